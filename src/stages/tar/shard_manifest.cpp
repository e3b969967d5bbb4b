// Checking shards against the manifest `prepare shards` writes last (shard_manifest.hpp).
#include "stages/tar/shard_manifest.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "sluice/detail/core/binary_io.hpp"
#include "sluice/core/error.hpp"

namespace sluice::stages {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The manifests in `folder` as shard name -> bytes.
std::map<std::string, std::uint64_t> listed_in(const fs::path& folder, std::set<std::string>& manifests) {
  std::map<std::string, std::uint64_t> sizes;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with("-manifest.json") || name.starts_with(".")) continue;
    json manifest;
    try {
      manifest = json::parse(core::read_regular_text(entry.path().string(), core::kMaxTextInputBytes, "shard manifest"));
    } catch (const json::exception&) {
      continue;  // not ours: another tool's file of that name
    }
    if (!manifest.is_object() || manifest.value("format", "") != "sluice shard set") continue;
    manifests.insert(name);
    for (const json& shard : manifest.value("shards", json::array())) {
      if (!shard.is_object() || !shard.contains("name") || !shard.contains("bytes")) continue;
      if (!shard["name"].is_string() || !shard["bytes"].is_number_unsigned()) continue;
      sizes[shard["name"].get<std::string>()] = shard["bytes"].get<std::uint64_t>();
    }
  }
  return sizes;
}

}  // namespace

void check_shard_manifests(const std::vector<std::string>& shards) {
  std::map<fs::path, std::vector<std::string>> by_folder;
  for (const std::string& shard : shards) {
    const fs::path p(shard);
    by_folder[p.parent_path()].push_back(p.filename().string());
  }
  for (const auto& [folder, names] : by_folder) {
    std::set<std::string> manifests;
    const std::map<std::string, std::uint64_t> sizes = listed_in(folder.empty() ? fs::path(".") : folder, manifests);
    for (const std::string& name : names) {
      const fs::path path = folder / name;
      const auto listed = sizes.find(name);
      if (listed != sizes.end()) {
        struct stat st {};
        if (::stat(path.c_str(), &st) == 0 && static_cast<std::uint64_t>(st.st_size) != listed->second) {
          throw Error(ErrorCode::kCorruptData,
                      "the shard is " + std::to_string(st.st_size) + " bytes, its set's manifest says " +
                          std::to_string(listed->second) + ": it was cut or changed after `sluice prepare shards` "
                          "wrote it",
                      path.string());
        }
        continue;
      }
      if (!manifests.empty()) continue;  // another set's manifest: this shard is not ours to judge
      // No manifest: a hidden temporary of this set's prepare run says the run never finished.
      std::error_code ec;
      for (const auto& entry : fs::directory_iterator(folder.empty() ? fs::path(".") : folder, ec)) {
        const std::string other = entry.path().filename().string();
        const auto dash = name.rfind('-');
        const std::string prefix = dash == std::string::npos ? name : name.substr(0, dash + 1);
        if (other.starts_with("." + prefix) && other.find(".partial-") != std::string::npos) {
          throw Error(ErrorCode::kCorruptData,
                      "this shard set is incomplete: a `sluice prepare shards` run stopped before writing its "
                      "manifest (it left " + other + "); run prepare again into an empty folder",
                      path.string());
        }
      }
    }
  }
}

}  // namespace sluice::stages
