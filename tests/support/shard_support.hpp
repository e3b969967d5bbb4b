// Helpers for tests of the tar-shard source: tar bytes built member by member with sluice's own
// header writer (stages/tar/tar_format.hpp), an image folder written as shards in from_folder's
// order, and the ways a shard gets damaged (cut, a flipped header byte, a size past the end).
// Header-only: the tests that use it include src/ already.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "stages/source/source.hpp"
#include "stages/tar/tar_format.hpp"
#include "test_support.hpp"

namespace sluice::test {

struct TarMember {
  std::string name;
  std::vector<std::uint8_t> data;
  char type = '0';  // '0' regular; 'x' pax header; '5' folder...
};

// Where each member's header starts in the bytes make_tar returns.
struct TarLayout {
  std::vector<std::uint8_t> bytes;
  std::vector<std::uint64_t> headers;
};

// The members as a tar, each after its header (a pax header first for names over 100 bytes that
// do not split), then the end marker unless `end_marker` is false.
enum class EndMarker : std::uint8_t { kWrite, kOmit };
inline TarLayout make_tar(const std::vector<TarMember>& members, EndMarker end = EndMarker::kWrite) {
  TarLayout out;
  for (const TarMember& m : members) {
    stages::tar::append_file_header(out.bytes, m.name, m.data.size(), 1700000000);
    if (m.type != '0') {  // retype the (last) header, fixing its checksum
      std::uint8_t* h = out.bytes.data() + out.bytes.size() - 512;
      h[156] = static_cast<std::uint8_t>(m.type);
      std::fill(h + 148, h + 156, ' ');
      unsigned sum = 0;
      for (int i = 0; i < 512; ++i) sum += h[i];
      std::snprintf(reinterpret_cast<char*>(h + 148), 8, "%06o", sum);
    }
    out.headers.push_back(out.bytes.size() - 512);
    out.bytes.insert(out.bytes.end(), m.data.begin(), m.data.end());
    stages::tar::append_padding(out.bytes, m.data.size());
  }
  if (end == EndMarker::kWrite) stages::tar::append_end(out.bytes);
  return out;
}

inline std::vector<std::uint8_t> text_bytes(const std::string& s) { return {s.begin(), s.end()}; }

// Rewrites a header's checksum after a test edited its fields.
inline void fix_checksum(std::vector<std::uint8_t>& tar, std::uint64_t header) {
  std::uint8_t* h = tar.data() + header;
  std::fill(h + 148, h + 156, ' ');
  unsigned sum = 0;
  for (int i = 0; i < 512; ++i) sum += h[i];
  std::snprintf(reinterpret_cast<char*>(h + 148), 8, "%06o", sum);
}

// Sets a header's size field (octal, 11 digits: below 8 GiB) and fixes its checksum.
inline void set_size_field(std::vector<std::uint8_t>& tar, std::uint64_t header, std::uint64_t size) {
  char field[24];
  std::snprintf(field, sizeof field, "%011llo", static_cast<unsigned long long>(size & 077777777777));
  std::copy(field, field + 12, tar.data() + header + 124);
  fix_checksum(tar, header);
}

// The samples of an image folder, in from_folder's order, as shards of `per_shard` samples each
// (key = the file's path inside the folder without its extension; key.jpg holds the file, key.cls
// its label): out/<prefix>-000000.tar, ... Returns the shard paths.
inline std::vector<std::filesystem::path> shard_folder(const std::filesystem::path& folder,
                                                       const std::filesystem::path& out, int per_shard,
                                                       const std::string& prefix = "train") {
  const stages::Dataset dataset = stages::load_dataset(spec::Folder{folder.string()});
  std::filesystem::create_directories(out);
  std::vector<std::filesystem::path> shards;
  std::vector<TarMember> members;
  const std::string root = folder.string() + (folder.string().back() == '/' ? "" : "/");
  const auto flush = [&] {
    if (members.empty()) return;
    char name[64];
    std::snprintf(name, sizeof name, "%s-%06zu.tar", prefix.c_str(), shards.size());
    shards.push_back(out / name);
    write_bytes(shards.back(), make_tar(members).bytes);
    members.clear();
  };
  for (std::int64_t i = 0; i < dataset.items.size(); ++i) {
    const std::string path = dataset.items.path(i);
    std::string key = path.substr(root.size());
    key = key.substr(0, key.rfind('.'));
    members.push_back({key + ".jpg", read_bytes(path)});
    members.push_back({key + ".cls", text_bytes(std::to_string(dataset.items.label(i)))});
    if (static_cast<int>(members.size()) == 2 * per_shard) flush();
  }
  flush();
  return shards;
}

}  // namespace sluice::test
