// read(): every file of the data set, whole, into a pooled buffer (stages/source/read_file.cpp).
#include "pipeline/stage_json.hpp"
#include "pipeline/stage_registry.hpp"

namespace sluice::schema {

namespace {

using namespace json_fields;

spec::Stage read(const json& v, const std::string& p) {
  const Object o(v, p, {"max_file_size"});
  ReadOptions r;
  r.max_file_size = o.get("max_file_size", r.max_file_size, as_size);
  return spec::Read{r};
}

ordered_json write(const spec::Stage& stage) {
  return {{"max_file_size", std::get<spec::Read>(stage).options.max_file_size}};
}

const StageJson kJson{read, write};

}  // namespace

template <>
const StageDescriptor& descriptor_for<spec::Read>() {
  static const StageDescriptor d{
      .name = "read",
      .order = {.allowed = {Phase::kStart}, .enters = Phase::kRead, .misplaced = "read() must come first, once"},
      .json = &kJson,
  };
  return d;
}

}  // namespace sluice::schema
