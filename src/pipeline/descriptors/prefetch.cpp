// prefetch(depth): batches prepared ahead of the one the consumer holds.
#include "pipeline/stage_json.hpp"
#include "pipeline/stage_registry.hpp"

namespace sluice::schema {

namespace {

using namespace json_fields;

void check(const spec::Stage& stage, const std::string& where) {
  const auto& s = std::get<spec::Prefetch>(stage);
  if (s.depth < 1) refuse(where + ": prefetch depth must be at least 1, got " + std::to_string(s.depth));
}

spec::Stage read(const json& v, const std::string& p) {
  const Object o(v, p, {"depth"});
  return spec::Prefetch{o.positive("depth")};
}

ordered_json write(const spec::Stage& stage) { return {{"depth", std::get<spec::Prefetch>(stage).depth}}; }

const StageJson kJson{read, write};

}  // namespace

template <>
const StageDescriptor& descriptor_for<spec::Prefetch>() {
  static const StageDescriptor d{
      .name = "prefetch",
      .order = {.allowed = {Phase::kBatched}, .misplaced = "prefetch() must follow batch()"},
      .check = check,
      .json = &kJson,
  };
  return d;
}

}  // namespace sluice::schema
