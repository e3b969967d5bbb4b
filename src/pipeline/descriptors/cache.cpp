// cache(): encoded files (right after read()) or decoded images (right after decode()) kept
// in memory or on local disk (stages/cache/memory_cache.cpp, stages/cache/disk_cache.cpp).
#include "pipeline/stage_json.hpp"
#include "pipeline/stage_registry.hpp"

namespace sluice::schema {

namespace {

using namespace json_fields;

void check(const spec::Stage& stage, const std::string& where) {
  const auto& s = std::get<spec::Cache>(stage);
  if (const auto* disk = std::get_if<DiskCache>(&s.store); disk != nullptr && disk->path.empty()) {
    refuse(where + ": DiskCache needs a path");
  }
}

spec::Stage read(const json& v, const std::string& p) {
  const Object o(v, p, {"memory", "disk"});
  const json* memory = o.find("memory");
  const json* disk = o.find("disk");
  if ((memory == nullptr) == (disk == nullptr)) {
    bad(p + ": expected exactly one of memory, disk (e.g. {\"memory\": {}} or {\"disk\": {\"path\": ...}})");
  }
  if (memory != nullptr) {
    const Object m(*memory, o.path("memory"), {"max_bytes"});
    return spec::Cache{MemoryCache{m.get("max_bytes", std::uint64_t{0}, as_size)}};
  }
  const Object d(*disk, o.path("disk"), {"path", "max_bytes"});
  return spec::Cache{DiskCache{d.require<std::string>("path", "a non-empty string", as_string),
                               d.get("max_bytes", std::uint64_t{0}, as_size)}};
}

ordered_json write(const spec::Stage& stage) {
  const auto& s = std::get<spec::Cache>(stage);
  if (const auto* m = std::get_if<MemoryCache>(&s.store)) return {{"memory", {{"max_bytes", m->max_bytes}}}};
  const auto& d = std::get<DiskCache>(s.store);
  return {{"disk", {{"path", d.path}, {"max_bytes", d.max_bytes}}}};
}

const StageJson kJson{read, write};

}  // namespace

template <>
const StageDescriptor& descriptor_for<spec::Cache>() {
  static const StageDescriptor d{
      .name = "cache",
      .order = {.allowed = {Phase::kRead, Phase::kDecoded},
                .once = true,
                .misplaced = "cache() goes right after read() (encoded files) or right after decode() "
                             "(decoded images)"},
      .check = check,
      .json = &kJson,
  };
  return d;
}

}  // namespace sluice::schema
