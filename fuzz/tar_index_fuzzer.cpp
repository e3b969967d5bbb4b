// tar_index_fuzzer: the tar-shard source on shards and index files it did not write:
// indexing a shard from its headers, the index file's decoder, building the item table from
// either, and reading every member as a worker does (ItemReader, which checks each member's own
// header against the index).
//
// Input: [0] flags  [1..] the bytes
//   flags bit 0 clear: the bytes are a shard: scanned, its index encoded and decoded again (must
//                      give the same samples back), loaded with from_shards, every item read
//   flags bit 0 set:   the bytes are the index file of a fixed, well-formed shard, loaded with
//                      from_shards and every item read; bit 1: repair the index's header
//                      (magic, version, the shard's size and mtime, lengths, both checksums) so
//                      the records themselves get fuzzed
// Expected: samples (damaged ones with a cause) or sluice::Error. A finding: a crash, a sanitizer
// report, another exception, kInternal, an index that does not round-trip, or a read that returns
// other than the member's size.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "stages/source/file_ops.hpp"
#include "stages/source/read_file.hpp"
#include "stages/source/source.hpp"
#include "stages/tar/tar_format.hpp"
#include "stages/tar/tar_index.hpp"
#include "stages/tar/tar_source.hpp"

namespace sluice::fuzz {

namespace st = sluice::stages;

void append_member(std::vector<std::uint8_t>& tar, const std::string& name, const std::string& data) {
  st::tar::append_file_header(tar, name, data.size(), 1700000000);
  tar.insert(tar.end(), data.begin(), data.end());
  st::tar::append_padding(tar, data.size());
}

// Three samples, one with a name long enough for a pax header, one labelled by class name.
std::vector<std::uint8_t> good_shard() {
  std::vector<std::uint8_t> tar;
  append_member(tar, "a.jpg", std::string(700, 'a'));
  append_member(tar, "a.cls", "3");
  append_member(tar, std::string(160, 'd') + "/" + std::string(120, 'e') + ".jpg", std::string(30, 'b'));
  append_member(tar, "c.jpg", std::string(1, 'c'));
  append_member(tar, "c.cls", "0\n");
  st::tar::append_end(tar);
  return tar;
}

const std::filesystem::path& fixed_shard() {
  static const std::filesystem::path path = [] {
    const std::filesystem::path p = scratch() / "fixed.tar";
    const std::vector<std::uint8_t> bytes = good_shard();
    write_file(p, bytes.data(), bytes.size());
    return p;
  }();
  return path;
}

void put64(std::uint8_t* p, std::uint64_t v) { std::memcpy(p, &v, 8); }

void repair_index(std::vector<std::uint8_t>& index, const struct stat& shard) {
  if (index.size() < st::kShardIndexHeaderBytes) return;
  std::memcpy(index.data(), "SLUICETI", 8);
  const std::uint32_t version = 1;
  std::memcpy(index.data() + 8, &version, 4);
  put64(index.data() + 16, static_cast<std::uint64_t>(shard.st_size));
  put64(index.data() + 24, static_cast<std::uint64_t>(shard.st_mtim.tv_sec) * 1'000'000'000 + shard.st_mtim.tv_nsec);
  const std::size_t payload = index.size() - st::kShardIndexHeaderBytes;
  put64(index.data() + 40, payload);
  put64(index.data() + 48, XXH3_64bits(index.data() + st::kShardIndexHeaderBytes, payload));
  put64(index.data() + 56, XXH3_64bits(index.data(), 56));
}

void read_every_item(const std::vector<std::string>& pattern, ShardIndex where) {
  const st::Dataset dataset = st::load_dataset(spec::Shards{pattern, where});
  st::ItemReader reader;
  AlignedBuffer buffer;
  for (std::int64_t i = 0; i < dataset.items.size() && i < 64; ++i) {
    try {
      const std::span<const std::uint8_t> bytes = reader.read(dataset.items, i, buffer, 1 << 20);
      if (bytes.size() != dataset.items.locate(i).size) finding("read", "a member read other than its size");
    } catch (const Error& e) {
      check_error(e, "read");
    }
  }
}

void fuzz_shard(const std::vector<std::uint8_t>& bytes) {
  static const std::filesystem::path path = scratch() / "s.tar";
  write_file(path, bytes.data(), bytes.size());
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) finding("scratch", "cannot open the shard");
  const st::IndexedShard index = st::scan_shard(st::real_file_ops(), fd, bytes.size(), 1, path.string());
  ::close(fd);
  for (const st::ShardSample& s : index.samples) {
    if (s.damage.empty() && (s.offset % 512 != 0 || s.offset > bytes.size() || s.size > bytes.size() - s.offset)) {
      finding("scan", "a readable sample outside the shard");
    }
  }
  std::string why;
  const std::optional<st::IndexedShard> back =
      st::decode_shard_index(st::encode_shard_index(index), index.shard_size, index.mtime_ns, why);
  if (!back || back->samples.size() != index.samples.size()) finding("index", "does not round-trip: " + why);
  for (std::size_t i = 0; i < index.samples.size(); ++i) {
    const st::ShardSample& a = index.samples[i];
    const st::ShardSample& b = back->samples[i];
    if (a.name != b.name || a.offset != b.offset || a.size != b.size || a.damage != b.damage ||
        a.label_kind != b.label_kind || a.class_name != b.class_name) {
      finding("index", "sample " + std::to_string(i) + " does not round-trip");
    }
  }
  read_every_item({path.string()}, ShardIndex::kMemoryOnly);
}

void fuzz_index(std::vector<std::uint8_t> bytes, bool repair) {
  const std::filesystem::path& shard = fixed_shard();
  struct stat st {};
  if (::stat(shard.c_str(), &st) != 0) finding("scratch", "no fixed shard");
  if (repair) repair_index(bytes, st);
  const std::string index = st::shard_index_path(shard.string());
  write_file(index, bytes.data(), bytes.size());
  read_every_item({shard.string()}, ShardIndex::kBesideShard);
}

void write_seeds(const std::filesystem::path& folder) {
  std::vector<std::uint8_t> shard = good_shard();
  std::vector<std::uint8_t> seed = {0};
  seed.insert(seed.end(), shard.begin(), shard.end());
  write_seed(folder, "shard", seed);
  std::vector<std::uint8_t> cut(seed.begin(), seed.begin() + 1200);
  write_seed(folder, "shard_cut", cut);
  std::vector<std::uint8_t> bad = seed;
  bad[1 + 3] ^= 1;  // the first header's name: a bad checksum
  write_seed(folder, "shard_bad_checksum", bad);
  // The fixed shard's own index, intact and for repair.
  const int fd = ::open(fixed_shard().c_str(), O_RDONLY | O_CLOEXEC);
  struct stat info {};
  ::fstat(fd, &info);
  const st::IndexedShard index = st::scan_shard(st::real_file_ops(), fd, static_cast<std::uint64_t>(info.st_size),
                                                static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 +
                                                    info.st_mtim.tv_nsec,
                                                fixed_shard().string());
  ::close(fd);
  const std::vector<std::uint8_t> encoded = st::encode_shard_index(index);
  for (const std::uint8_t flags : {1, 3}) {
    seed = {flags};
    seed.insert(seed.end(), encoded.begin(), encoded.end());
    write_seed(folder, "index_" + std::to_string(flags), seed);
  }
}

}  // namespace sluice::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sluice;
  using namespace sluice::fuzz;
  if (size < 1) return -1;
  const std::uint8_t flags = data[0];
  std::vector<std::uint8_t> bytes(data + 1, data + size);
  try {
    if ((flags & 1) == 0) {
      fuzz_shard(bytes);
    } else {
      fuzz_index(std::move(bytes), (flags & 2) != 0);
    }
  } catch (const Error& e) {
    check_error(e, "tar");
  }
  return 0;
}
