// DiskCacheStore never destroys or trusts what is not its own: a file at the path that
// sluice did not write is refused and left byte for byte as it was (and so is a foreign .idx);
// special files at the path are refused without blocking; entries and index records whose
// checksums are valid but whose sizes exceed the pipeline's limits or wrap around are rejected;
// a decoded-image entry claiming more pixels than max_image_pixels is never served.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "disk_cache_test_util.hpp"
#include "sluice/core/error.hpp"
#include "stages/cache/disk_cache.hpp"
#include "stages/cache/disk_cache_format.hpp"
#include "stages/source/file_ops.hpp"
#include "stages/program/sample_program.hpp"
#include "stages/source/source.hpp"
#include "test_support.hpp"

namespace sluice::stages {
namespace {

namespace fs = std::filesystem;
namespace dcf = disk_cache_format;
using cache_test::key_for;
using cache_test::options_for;
using cache_test::payload_for;
using test::TempDir;

// The Error a constructor throws, or a failed expectation when it does not.
template <class F>
std::optional<Error> error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return std::nullopt;
}

TEST(DiskCacheTrust, AFileSluiceDidNotWriteIsRefusedAndLeftAsItIs) {
  TempDir dir;
  const fs::path path = dir / "c.cache";
  std::mt19937 rng(14);
  for (const std::size_t size : {std::size_t{1}, std::size_t{5}, std::size_t{64}, std::size_t{100000}}) {
    std::vector<std::uint8_t> bytes(size);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    bytes[0] = 'x';  // never the cache's magic
    test::write_bytes(path, bytes);
    const auto e = error_of([&] { DiskCacheStore cache(options_for(path)); });
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e->path(), path.string());
    EXPECT_NE(e->cause().find("not a sluice disk cache"), std::string::npos) << e->what();
    EXPECT_EQ(test::read_bytes(path), bytes) << size;
    EXPECT_FALSE(fs::exists(dir / "c.cache.idx"));
  }
  // A text file a user typed the cache path over, and another process holding a lock on it.
  const std::string text = "my notes\n";
  test::write_bytes(path, std::vector<std::uint8_t>(text.begin(), text.end()));
  EXPECT_THROW(DiskCacheStore(options_for(path)), Error);
  EXPECT_EQ(fs::file_size(path), text.size());
}

TEST(DiskCacheTrust, AnEmptyFileIsOursToFill) {
  TempDir dir;
  const fs::path path = dir / "c.cache";
  test::write_bytes(path, {});
  {
    DiskCacheStore cache(options_for(path));
    EXPECT_TRUE(cache.insert(key_for(0), payload_for(0)));
  }
  DiskCacheStore cache(options_for(path));
  EXPECT_EQ(cache.stats().entries, 1);
}

TEST(DiskCacheTrust, SpecialFilesAtThePathAreRefusedWithoutBlocking) {
  TempDir dir;
  const fs::path fifo = dir / "fifo.cache";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  // Opening a FIFO for reading would wait for a writer forever; the ctest timeout would catch a
  // hang, this asserts the error.
  const auto e = error_of([&] { DiskCacheStore cache(options_for(fifo)); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->path(), fifo.string());
  EXPECT_TRUE(fs::is_fifo(fifo));

  const fs::path socket_path = dir / "s.cache";
  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_path.c_str(), sizeof address.sun_path - 1);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  EXPECT_THROW(DiskCacheStore(options_for(socket_path)), Error);
  ::close(s);

  EXPECT_THROW(DiskCacheStore(options_for("/dev/null")), Error);
}

TEST(DiskCacheTrust, AForeignIndexFileIsNeverReplacedOrUnlinked) {
  TempDir dir;
  const fs::path path = dir / "c.cache";
  const fs::path idx = dir / "c.cache.idx";
  const std::vector<std::uint8_t> mine = {'k', 'e', 'e', 'p', '\n'};
  test::write_bytes(idx, mine);
  {
    // A new cache (create_fresh would tidy the index away) that then writes entries and closes
    // (it would write the index).
    DiskCacheStore cache(options_for(path));
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(cache.insert(key_for(i), payload_for(i)));
    EXPECT_NE(cache.stats().note.find("not a sluice index"), std::string::npos) << cache.stats().note;
  }
  EXPECT_EQ(test::read_bytes(idx), mine);
  EXPECT_FALSE(fs::exists(dir / "c.cache.idx.tmp"));
  // Without its index the cache still opens, by scanning its entries.
  DiskCacheStore cache(options_for(path));
  EXPECT_EQ(cache.stats().entries, 20);
  AlignedBuffer out;
  EXPECT_TRUE(cache_test::hit_equals(cache, key_for(3), payload_for(3), out));
  // A symlink at the index's name is not ours either, whatever it points to.
  const fs::path target = dir / "elsewhere.idx";
  { DiskCacheStore other(options_for(dir / "d.cache")); ASSERT_TRUE(other.insert(key_for(0), payload_for(0))); }
  fs::rename(dir / "d.cache.idx", target);
  const std::vector<std::uint8_t> target_bytes = test::read_bytes(target);
  fs::create_symlink(target, dir / "e.cache.idx");
  { DiskCacheStore e(options_for(dir / "e.cache")); ASSERT_TRUE(e.insert(key_for(1), payload_for(1))); }
  EXPECT_TRUE(fs::is_symlink(dir / "e.cache.idx"));
  EXPECT_EQ(test::read_bytes(target), target_bytes);
}

// A cache whose entries are checksummed correctly but claim more than the pipeline allows:
// never indexed, never served, counted as rejected, through the index and through the scan.
TEST(DiskCacheTrust, EntriesOverTheLimitsAreRejectedThroughIndexAndScan) {
  TempDir dir;
  const fs::path path = dir / "c.cache";
  {
    DiskCacheStore cache(options_for(path));
    ASSERT_TRUE(cache.insert(key_for(0), std::vector<std::uint8_t>(5000, 7)));
    ASSERT_TRUE(cache.insert(key_for(1), std::vector<std::uint8_t>(100, 8)));
  }
  for (const bool with_index : {true, false}) {
    if (!with_index) fs::remove(dir / "c.cache.idx");
    DiskCacheOptions o = options_for(path);
    o.max_entry_bytes = 1000;
    DiskCacheStore cache(o);
    const DiskCacheStats s = cache.stats();
    EXPECT_EQ(s.entries, 1) << with_index;
    EXPECT_EQ(s.rejected, 1) << with_index;
    EXPECT_NE(s.note.find("rejected 1"), std::string::npos) << s.note;
    AlignedBuffer out;
    EXPECT_FALSE(cache.lookup(key_for(0), out));
    EXPECT_TRUE(cache_test::hit_equals(cache, key_for(1), std::vector<std::uint8_t>(100, 8), out));
  }
  // The source size an entry records is bounded too (key_for(i) records 1000 + i bytes).
  DiskCacheOptions o = options_for(path);
  o.max_source_bytes = 1000;
  DiskCacheStore cache(o);
  EXPECT_EQ(cache.stats().rejected, 1);
  EXPECT_EQ(cache.stats().entries, 1);
  AlignedBuffer out;
  EXPECT_FALSE(cache.lookup(key_for(1), out));
  EXPECT_TRUE(cache_test::hit_equals(cache, key_for(0), std::vector<std::uint8_t>(5000, 7), out));
}

// Index records with valid checksums whose offsets and sizes wrap around 2^64 or point past the
// data: the index is refused as a whole and the scan recovers every real entry.
TEST(DiskCacheTrust, IndexRecordsThatWrapAroundAreRefused) {
  TempDir dir;
  const fs::path path = dir / "c.cache";
  { DiskCacheStore cache(options_for(path)); for (int i = 0; i < 5; ++i) ASSERT_TRUE(cache.insert(key_for(i), payload_for(i))); }
  const std::vector<std::uint8_t> data = test::read_bytes(path);
  const std::optional<dcf::FileHeader> header = dcf::decode_file_header(data.data());
  ASSERT_TRUE(header);
  const std::vector<dcf::EntryInfo> crafted = {
      {.offset = UINT64_MAX - 7, .payload_bytes = 16, .file_size = 1000, .mtime_ns = 0, .payload_hash = 0, .path_bytes = 8},
      {.offset = 64, .payload_bytes = UINT64_MAX - 40, .file_size = 1000, .mtime_ns = 0, .payload_hash = 0, .path_bytes = 8},
      {.offset = 64, .payload_bytes = data.size(), .file_size = 1000, .mtime_ns = 0, .payload_hash = 0, .path_bytes = 8},
      {.offset = 68, .payload_bytes = 16, .file_size = 1000, .mtime_ns = 0, .payload_hash = 0, .path_bytes = 8},
  };
  for (const dcf::EntryInfo& bad : crafted) {
    SCOPED_TRACE("offset " + std::to_string(bad.offset) + " payload " + std::to_string(bad.payload_bytes));
    dcf::IndexFileWriter writer(real_file_ops(), (dir / "c.cache.idx").string(), *header, data.size());
    writer.add("/a/b.jpg", bad);
    ASSERT_TRUE(writer.commit());
    DiskCacheStore cache(options_for(path));
    EXPECT_EQ(cache.stats().entries, 5);
    AlignedBuffer out;
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(cache_test::hit_equals(cache, key_for(i), payload_for(i), out)) << i;
  }
}

TEST(DiskCacheTrust, CheckBoundsUsesCheckedArithmetic) {
  const dcf::Limits none{};
  dcf::EntryInfo e{.offset = 64, .payload_bytes = 100, .file_size = 5, .mtime_ns = 0, .payload_hash = 0, .path_bytes = 10};
  EXPECT_EQ(dcf::check_bounds(e, 64 + 48 + 16 + 100, none), dcf::Bounds::kOk);
  EXPECT_EQ(dcf::check_bounds(e, 64 + 48 + 16 + 99, none), dcf::Bounds::kBadLayout);
  e.payload_bytes = UINT64_MAX - 100;
  EXPECT_EQ(dcf::check_bounds(e, UINT64_MAX, none), dcf::Bounds::kBadLayout);
  e.payload_bytes = 100;
  e.offset = UINT64_MAX - 63;
  EXPECT_EQ(dcf::check_bounds(e, UINT64_MAX, none), dcf::Bounds::kBadLayout);
  e.offset = 64;
  EXPECT_EQ(dcf::check_bounds(e, UINT64_MAX, {.max_payload_bytes = 99, .max_source_bytes = 0}), dcf::Bounds::kOverLimit);
  EXPECT_EQ(dcf::check_bounds(e, UINT64_MAX, {.max_payload_bytes = 0, .max_source_bytes = 4}), dcf::Bounds::kOverLimit);
  e.path_bytes = 4097;
  EXPECT_EQ(dcf::check_bounds(e, UINT64_MAX, none), dcf::Bounds::kBadLayout);
}

// A decoded-image entry (cache after decode_jpeg) whose header claims more pixels than
// max_image_pixels, with a payload of exactly that size: not served, the file is decoded instead.
TEST(DiskCacheTrust, DecodedEntryOverMaxImagePixelsIsNotServed) {
  TempDir dir;
  const std::string image = (dir / "img.jpg").string();
  test::write_bytes(image, test::encode_jpeg(test::make_pattern(32, 32, 3, 7), 32, 32, 3));
  SampleProgramConfig config;
  config.cache_point = CachePoint::kDecoded;
  config.decode.max_image_pixels = 32 * 32;
  config.normalize = NormalizeOptions{.mean = {}, .std = {}, .layout = Layout::kNHWC, .dtype = DType::kU8};
  config.geometry.push_back(GeometryStep{spec::Resize{8, 8, {}}, 1});
  config.output = {8, 8};

  const Dataset one = load_dataset(spec::Items{{Item{image, 0}}});
  std::vector<std::uint8_t> expected;
  {
    const SampleProgram plain(config);
    auto ws = plain.make_workspace();
    expected.resize(plain.sample_bytes());
    plain.run(one.items, 0, SampleKey{0, 0, 0}, *ws, expected.data());
  }
  // The entry a crafted file would hold: "SLDI", 64 x 64 x 3, 4096 pixels of 0xEE.
  std::vector<std::uint8_t> entry(64 + 64 * 64 * 3, 0xEE);
  const std::uint32_t h[4] = {0x49444c53, 64, 64, 3};
  std::memset(entry.data(), 0, 64);
  std::memcpy(entry.data(), h, sizeof h);
  struct stat st {};
  ASSERT_EQ(::stat(image.c_str(), &st), 0);
  const CacheKey key{image, static_cast<std::uint64_t>(st.st_size),
                     static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
  DiskCacheStore store(options_for(dir / "c.cache"));
  ASSERT_TRUE(store.insert(key, entry));
  const SampleProgram cached(config, SampleCaches{nullptr, &store});
  auto ws = cached.make_workspace();
  std::vector<std::uint8_t> out(cached.sample_bytes());
  cached.run(one.items, 0, SampleKey{0, 0, 0}, *ws, out.data());
  EXPECT_EQ(out, expected);
  EXPECT_GE(store.stats().hits, 1);  // the crafted entry was found, and refused
}

}  // namespace
}  // namespace sluice::stages
