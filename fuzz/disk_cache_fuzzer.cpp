// disk_cache_fuzzer: DiskCacheStore opening a data file and an index file it did not write
// then looking up, inserting and closing. Checksums would stop random bytes at the
// first header, so the target can repair them before writing the files (flags below): then the
// sizes, offsets and paths inside checksummed headers and index records are what gets fuzzed.
//
// Input: [0] flags  [1..2] data file length, little-endian  [3..] the data file, then the index.
//   flags bit 0: repair the data file header's checksum    bit 1: repair entry header checksums
//         bit 2: repair entry payload hashes                bit 3: repair the index (ids, digest)
//         bit 4: open with the pipeline's limits (4 KiB entries, 1 MiB sources)
//         bit 5: open a second instance (a reader) while the first is open
// Expected: the store opens or throws sluice::Error. A finding: a crash, a sanitizer report,
// another exception, kInternal, or an entry this run inserted that a lookup then misses or serves
// with other bytes.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "sluice/memory/aligned_buffer.hpp"
#include "stages/cache/disk_cache.hpp"
#include "stages/cache/disk_cache_format.hpp"

namespace sluice::fuzz {

namespace fs = std::filesystem;
namespace dcf = stages::disk_cache_format;

std::uint64_t get64(const std::uint8_t* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
std::uint32_t get32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
void put64(std::uint8_t* p, std::uint64_t v) { std::memcpy(p, &v, 8); }


struct Found {
  std::string path;
  std::uint64_t file_size;
  std::int64_t mtime_ns;
};

// Rewrites checksums in place as the flags ask; returns the entries it saw (for lookups).
std::vector<Found> repair_data(std::vector<std::uint8_t>& d, std::uint8_t flags, dcf::FileHeader* header) {
  std::vector<Found> found;
  if (d.size() < dcf::kFileHeaderBytes) return found;
  header->fingerprint = get64(d.data() + 16);
  header->generation = get64(d.data() + 24);
  if ((flags & 1) != 0 && std::memcmp(d.data(), "SLUICEDC", 8) == 0) {
    std::uint8_t fixed[dcf::kFileHeaderBytes];
    dcf::encode_file_header(*header, fixed);
    std::memcpy(d.data(), fixed, sizeof fixed);
  }
  for (std::size_t at = dcf::kFileHeaderBytes; at + dcf::kEntryHeaderBytes <= d.size(); at += 8) {
    const std::uint32_t magic = get32(d.data() + at);
    if (magic != dcf::kLiveEntry && magic != dcf::kDeadEntry) continue;
    dcf::RawEntryHeader raw = dcf::decode_entry_fixed(d.data() + at);
    const std::uint32_t path_bytes = raw.info.path_bytes;
    if (path_bytes == 0 || path_bytes > dcf::kMaxPathBytes || at + dcf::metadata_bytes(path_bytes) > d.size()) continue;
    const std::string path(reinterpret_cast<const char*>(d.data() + at + dcf::kEntryHeaderBytes), path_bytes);
    const std::uint64_t payload_at = at + dcf::metadata_bytes(path_bytes);
    if ((flags & 4) != 0 && raw.info.payload_bytes <= d.size() - payload_at) {
      raw.info.payload_hash = dcf::payload_checksum(d.data() + payload_at, raw.info.payload_bytes);
    }
    if ((flags & 2) != 0) {
      std::vector<std::uint8_t> meta(dcf::metadata_bytes(path_bytes));
      dcf::encode_entry_header(raw.info, magic, path, header->generation, meta.data());
      std::memcpy(d.data() + at, meta.data(), dcf::kEntryHeaderBytes);  // the path bytes stay
    }
    if (found.size() < 8) found.push_back({path, raw.info.file_size, raw.info.mtime_ns});
  }
  return found;
}

void repair_index(std::vector<std::uint8_t>& x, const dcf::FileHeader& header) {
  if (x.size() < 64 || std::memcmp(x.data(), "SLUICEIX", 8) != 0) return;
  put64(x.data() + 16, header.fingerprint);
  put64(x.data() + 24, header.generation);
  put64(x.data() + x.size() - 8, dcf::payload_checksum(x.data(), x.size() - 8));
}

void write_seeds(const fs::path& folder) {
  const fs::path dir = scratch() / "seeds";
  fs::create_directories(dir);
  int n = 0;
  for (const int entries : {1, 3, 6}) {
    const fs::path path = dir / ("c" + std::to_string(entries));
    {
      stages::DiskCacheStore store(stages::DiskCacheOptions{.path = path.string(), .fingerprint = 42});
      for (int i = 0; i < entries; ++i) {
        std::vector<std::uint8_t> payload(static_cast<std::size_t>(10 + 37 * i), static_cast<std::uint8_t>(i));
        store.insert(stages::CacheKey{"/data/c" + std::to_string(i) + "/img" + std::to_string(i) + ".jpg",
                                      static_cast<std::uint64_t>(1000 + i), 1700000000000000000 + i},
                     payload);
      }
    }
    std::vector<std::uint8_t> data(fs::file_size(path));
    std::vector<std::uint8_t> index(fs::file_size(path.string() + ".idx"));
    std::ifstream(path, std::ios::binary).read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(data.size()));
    std::ifstream(path.string() + ".idx", std::ios::binary)
        .read(reinterpret_cast<char*>(index.data()), static_cast<std::streamsize>(index.size()));
    for (const std::uint8_t flags : {0x0F, 0x1F, 0x2F, 0x00}) {
      std::vector<std::uint8_t> seed = {flags, static_cast<std::uint8_t>(data.size()), static_cast<std::uint8_t>(data.size() >> 8)};
      seed.insert(seed.end(), data.begin(), data.end());
      seed.insert(seed.end(), index.begin(), index.end());
      write_seed(folder, "cache_" + std::to_string(n++), seed);
    }
  }
}

}  // namespace sluice::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sluice;
  using namespace sluice::fuzz;
  if (size < 3) return -1;
  const std::uint8_t flags = data[0];
  const std::size_t data_bytes = std::min<std::size_t>(data[1] | (std::size_t{data[2]} << 8), size - 3);
  std::vector<std::uint8_t> file(data + 3, data + 3 + data_bytes);
  std::vector<std::uint8_t> index(data + 3 + data_bytes, data + size);
  dcf::FileHeader header{42, 0};
  const std::vector<Found> found = repair_data(file, flags, &header);
  if ((flags & 8) != 0) repair_index(index, header);

  static const fs::path path = scratch() / "c.cache";
  static const std::string idx = path.string() + ".idx";
  std::error_code ec;
  fs::remove(idx + ".tmp", ec);
  write_file(path, file.data(), file.size());
  if (index.empty()) {
    fs::remove(idx, ec);
  } else {
    write_file(idx, index.data(), index.size());
  }

  stages::DiskCacheOptions options{.path = path.string(), .max_bytes = 0, .fingerprint = header.fingerprint};
  if ((flags & 16) != 0) {
    options.max_entry_bytes = 4096;
    options.max_source_bytes = 1 << 20;
  }
  try {
    stages::DiskCacheStore store(options);
    std::optional<stages::DiskCacheStore> reader;
    if ((flags & 32) != 0) reader.emplace(options);
    AlignedBuffer out;
    for (const Found& f : found) {
      store.lookup(stages::CacheKey{f.path, f.file_size, f.mtime_ns}, out);
      if (reader) reader->lookup(stages::CacheKey{f.path, f.file_size, f.mtime_ns}, out);
    }
    // An entry this run inserts is served back exactly.
    const std::vector<std::uint8_t> payload(data, data + std::min<std::size_t>(size, 300));
    const stages::CacheKey key{"/fuzz/inserted.jpg", 77, 88};
    // (Unless the crafted file already holds it: then insert keeps that one.)
    const bool held = store.lookup(key, out).has_value();
    if (store.insert(key, payload) && !held) {
      const std::optional<std::size_t> n = store.lookup(key, out);
      if (!n || *n != payload.size() || std::memcmp(out.data(), payload.data(), payload.size()) != 0) {
        finding("insert then lookup", "the entry just inserted was not served back");
      }
    }
    (void)store.stats();
  } catch (const Error& e) {
    check_error(e, "DiskCacheStore");
  }
  return 0;
}
