// to_device(device): batches copied to a device through the transfer ring (docs/device.md).
#include "pipeline/stage_json.hpp"
#include "pipeline/stage_registry.hpp"

namespace sluice::schema {

namespace {

using namespace json_fields;

void check(const spec::Stage& stage, const std::string& where) {
  if (std::get<spec::ToDevice>(stage).device.index < 0) refuse(where + ": device index must be >= 0");
}

spec::Stage read(const json& v, const std::string& p) {
  const Object o(v, p, {"device", "normalize_on_device", "stage_through_ring"});
  ToDeviceOptions t;
  t.normalize_on_device = o.flag("normalize_on_device", t.normalize_on_device);
  t.stage_through_ring = o.flag("stage_through_ring", t.stage_through_ring);
  return spec::ToDevice{o.require<DeviceId>("device", "\"host\" or \"cuda:N\"", as_device), t};
}

// ToDeviceOptions::stream, a pointer, has no JSON form.
ordered_json write(const spec::Stage& stage) {
  const auto& s = std::get<spec::ToDevice>(stage);
  return {{"device", to_string(s.device)}, {"normalize_on_device", s.options.normalize_on_device},
          {"stage_through_ring", s.options.stage_through_ring}};
}

const StageJson kJson{read, write};

}  // namespace

template <>
const StageDescriptor& descriptor_for<spec::ToDevice>() {
  static const StageDescriptor d{
      .name = "to_device",
      .order = {.allowed = {Phase::kBatched}, .once = true, .misplaced = "to_device() must follow batch()"},
      .check = check,
      .json = &kJson,
  };
  return d;
}

}  // namespace sluice::schema
