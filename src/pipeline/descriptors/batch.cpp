// batch(n): samples into batches of n (the runtime's batch ring).
#include "pipeline/stage_json.hpp"
#include "pipeline/stage_registry.hpp"

namespace sluice::schema {

namespace {

using namespace json_fields;

void check(const spec::Stage& stage, const std::string& where) {
  const auto& s = std::get<spec::Batch>(stage);
  if (s.size < 1) refuse(where + ": batch size must be at least 1, got " + std::to_string(s.size));
}

spec::Stage read(const json& v, const std::string& p) {
  const Object o(v, p, {"size", "drop_last"});
  return spec::Batch{o.positive("size"), BatchOptions{o.flag("drop_last", false)}};
}

ordered_json write(const spec::Stage& stage) {
  const auto& s = std::get<spec::Batch>(stage);
  return {{"size", s.size}, {"drop_last", s.options.drop_last}};
}

const StageJson kJson{read, write};

}  // namespace

template <>
const StageDescriptor& descriptor_for<spec::Batch>() {
  static const StageDescriptor d{
      .name = "batch",
      .order = {.allowed = {Phase::kDecoded, Phase::kTransformed, Phase::kNormalized},
                .enters = Phase::kBatched,
                .misplaced = "batch() needs decoded samples: add read() and decode() before it"},
      .check = check,
      .json = &kJson,
  };
  return d;
}

}  // namespace sluice::schema
