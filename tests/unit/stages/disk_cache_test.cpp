// DiskCacheStore's contract in one process: round trip, persistence, the index file, staleness,
// fingerprints, corrupt entries, a full disk, max_bytes, torn and damaged files, bad paths, and
// many threads at once. Tests with several processes are in disk_cache_process_test.cpp.
#include "stages/cache/disk_cache.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "disk_cache_test_util.hpp"
#include "fault_fs.hpp"
#include "sluice/core/error.hpp"
#include "stages/cache/disk_cache_format.hpp"
#include "test_support.hpp"

namespace sluice::stages {
namespace {

namespace fs = std::filesystem;
using cache_test::FaultyFileOps;
using cache_test::hit_equals;
using cache_test::key_for;
using cache_test::options_for;
using cache_test::payload_for;
using cache_test::size_of;
using test::TempDir;

void fill(DiskCacheStore& cache, int first, int count, std::size_t max_bytes = 20000) {
  for (int i = first; i < first + count; ++i) {
    ASSERT_TRUE(cache.insert(key_for(i), payload_for(i, max_bytes))) << i;
  }
}

int count_hits(DiskCacheStore& cache, int first, int count, std::size_t max_bytes = 20000) {
  AlignedBuffer out;
  int hits = 0;
  for (int i = first; i < first + count; ++i) {
    const std::optional<std::size_t> n = cache.lookup(key_for(i), out);
    if (!n) continue;
    const std::vector<std::uint8_t> expected = payload_for(i, max_bytes);
    EXPECT_EQ(*n, expected.size()) << i;
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), out.data())) << "served wrong bytes " << i;
    ++hits;
  }
  return hits;
}

// Where each entry of a cache filled by one thread ends (they are laid out in insert order).
std::vector<std::uint64_t> entry_ends(int count, std::size_t max_bytes) {
  std::vector<std::uint64_t> ends;
  std::uint64_t offset = disk_cache_format::kFileHeaderBytes;
  for (int i = 0; i < count; ++i) {
    const std::uint64_t end = offset + disk_cache_format::metadata_bytes(key_for(i).path.size()) +
                              payload_for(i, max_bytes).size();
    ends.push_back(end);
    offset = disk_cache_format::pad8(end);
  }
  return ends;
}

void flip_byte(const fs::path& path, std::uint64_t offset) {
  std::vector<std::uint8_t> bytes = test::read_bytes(path);
  bytes.at(offset) ^= 0x01;
  test::write_bytes(path, bytes);
}

TEST(DiskCacheStore, RoundTripOneThread) {
  TempDir dir;
  DiskCacheStore cache(options_for(dir / "c.cache"));
  EXPECT_TRUE(cache.stats().writable);
  fill(cache, 0, 200);
  EXPECT_TRUE(cache.insert({"/empty.jpg", 0, 1}, {}));
  EXPECT_EQ(count_hits(cache, 0, 200), 200);
  AlignedBuffer out;
  EXPECT_EQ(cache.lookup({"/empty.jpg", 0, 1}, out), std::optional<std::size_t>(0));
  EXPECT_FALSE(cache.lookup(key_for(999), out));
  std::uint64_t bytes = 0;
  for (int i = 0; i < 200; ++i) bytes += payload_for(i).size();
  const DiskCacheStats s = cache.stats();
  EXPECT_EQ(s.hits, 201);
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.inserts, 201);
  EXPECT_EQ(s.entries, 201);
  EXPECT_EQ(s.bytes, bytes);
  EXPECT_EQ(s.dropped_corrupt, 0);
  EXPECT_TRUE(s.note.empty()) << s.note;
}

TEST(DiskCacheStore, InsertingTheSameEntryTwiceWritesItOnce) {
  TempDir dir;
  DiskCacheStore cache(options_for(dir / "c.cache"));
  fill(cache, 0, 1);
  const std::uint64_t size = size_of(dir / "c.cache");
  EXPECT_TRUE(cache.insert(key_for(0), payload_for(0)));
  EXPECT_EQ(size_of(dir / "c.cache"), size);
  EXPECT_EQ(cache.stats().inserts, 1);
}

TEST(DiskCacheStore, PersistsAcrossReopenThroughTheIndexFile) {
  TempDir dir;
  { DiskCacheStore cache(options_for(dir / "c.cache")); fill(cache, 0, 300); }
  ASSERT_TRUE(fs::exists(dir / "c.cache.idx"));
  FaultyFileOps ops((dir / "c.cache").string());
  DiskCacheStore cache(options_for(dir / "c.cache", 42, &ops));
  // Opening read the index, not the entries: the data file's header alone.
  EXPECT_LE(ops.data_bytes_read.load(), 64u);
  EXPECT_EQ(cache.stats().entries, 300);
  EXPECT_EQ(count_hits(cache, 0, 300), 300);
  EXPECT_TRUE(cache.stats().note.empty()) << cache.stats().note;
}

TEST(DiskCacheStore, WithoutIndexFileOpenScansHeadersOnly) {
  TempDir dir;
  constexpr std::size_t kLarge = 200000;
  { DiskCacheStore cache(options_for(dir / "c.cache")); fill(cache, 0, 40, kLarge); }
  fs::remove(dir / "c.cache.idx");
  FaultyFileOps ops((dir / "c.cache").string());
  DiskCacheStore cache(options_for(dir / "c.cache", 42, &ops));
  EXPECT_EQ(cache.stats().entries, 40);
  EXPECT_LT(ops.data_bytes_read.load(), size_of(dir / "c.cache") / 4);
  EXPECT_EQ(count_hits(cache, 0, 40, kLarge), 40);
}

TEST(DiskCacheStore, DamagedIndexFileIsIgnored) {
  TempDir dir;
  { DiskCacheStore cache(options_for(dir / "c.cache")); fill(cache, 0, 50); }
  const fs::path idx = dir / "c.cache.idx";
  flip_byte(idx, size_of(idx) / 2);
  { DiskCacheStore cache(options_for(dir / "c.cache")); EXPECT_EQ(count_hits(cache, 0, 50), 50); }
  fs::resize_file(idx, size_of(idx) - 5);
  { DiskCacheStore cache(options_for(dir / "c.cache")); EXPECT_EQ(count_hits(cache, 0, 50), 50); }
  test::write_bytes(idx, {1, 2, 3});
  DiskCacheStore cache(options_for(dir / "c.cache"));
  EXPECT_EQ(cache.stats().entries, 50);
  EXPECT_EQ(count_hits(cache, 0, 50), 50);
}

TEST(DiskCacheStore, StaleWhenTheSourceFileChanges) {
  TempDir dir;
  const fs::path source = dir / "photo.jpg";
  test::write_bytes(source, std::vector<std::uint8_t>(1000, 7));
  const auto key_of = [&] {
    struct stat st {};
    EXPECT_EQ(::stat(source.c_str(), &st), 0);
    return CacheKey{source.string(), static_cast<std::uint64_t>(st.st_size),
                    st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec};
  };
  DiskCacheStore cache(options_for(dir / "c.cache"));
  const std::vector<std::uint8_t> decoded(5000, 1);
  ASSERT_TRUE(cache.insert(key_of(), decoded));
  AlignedBuffer out;
  EXPECT_TRUE(hit_equals(cache, key_of(), decoded, out));

  // touch: a new mtime, same size.
  const timespec times[2] = {{0, UTIME_NOW}, {1'900'000'000, 5}};
  ASSERT_EQ(::utimensat(AT_FDCWD, source.c_str(), times, 0), 0);
  EXPECT_FALSE(cache.lookup(key_of(), out));
  EXPECT_EQ(cache.stats().stale, 1);
  const std::vector<std::uint8_t> redecoded(5000, 2);
  ASSERT_TRUE(cache.insert(key_of(), redecoded));
  EXPECT_TRUE(hit_equals(cache, key_of(), redecoded, out));

  // A new size, mtime restored.
  test::write_bytes(source, std::vector<std::uint8_t>(2000, 7));
  ASSERT_EQ(::utimensat(AT_FDCWD, source.c_str(), times, 0), 0);
  EXPECT_FALSE(cache.lookup(key_of(), out));
  EXPECT_EQ(cache.stats().stale, 2);
  EXPECT_EQ(cache.stats().entries, 1);
}

TEST(DiskCacheStore, AnotherFingerprintRebuildsTheFile) {
  TempDir dir;
  const fs::path path = dir / "c.cache";
  { DiskCacheStore cache(options_for(path, 1)); fill(cache, 0, 20); }
  {
    DiskCacheStore cache(options_for(path, 2));
    const DiskCacheStats s = cache.stats();
    EXPECT_EQ(s.entries, 0);
    EXPECT_TRUE(s.writable);
    EXPECT_NE(s.note.find("fingerprint"), std::string::npos) << s.note;
    EXPECT_EQ(count_hits(cache, 0, 20), 0);
    EXPECT_EQ(size_of(path), disk_cache_format::kFileHeaderBytes);
    fill(cache, 100, 5);
  }
  DiskCacheStore cache(options_for(path, 1));
  EXPECT_EQ(cache.stats().entries, 0);
  EXPECT_EQ(count_hits(cache, 0, 20) + count_hits(cache, 100, 5), 0);
}

TEST(DiskCacheStore, SecondInstanceIsReadOnlyAndIgnoresAnotherFingerprint) {
  TempDir dir;
  const fs::path path = dir / "c.cache";
  DiskCacheStore writer(options_for(path, 1));
  fill(writer, 0, 30);
  {
    DiskCacheStore other(options_for(path, 2));
    const DiskCacheStats s = other.stats();
    EXPECT_FALSE(s.writable);
    EXPECT_EQ(s.entries, 0);
    EXPECT_NE(s.note.find("another pipeline"), std::string::npos) << s.note;
    EXPECT_FALSE(other.insert(key_for(500), payload_for(500)));
    EXPECT_EQ(count_hits(other, 0, 30), 0);
  }
  DiskCacheStore reader(options_for(path, 1));
  EXPECT_FALSE(reader.stats().writable);
  EXPECT_NE(reader.stats().note.find("writing this cache"), std::string::npos) << reader.stats().note;
  EXPECT_FALSE(reader.insert(key_for(500), payload_for(500)));
  EXPECT_EQ(count_hits(reader, 0, 30), 30);
  EXPECT_EQ(count_hits(writer, 0, 30), 30);  // the rejected fingerprint did not touch the file
}

TEST(DiskCacheStore, CorruptReadIsDroppedNeverServedAndRecomputed) {
  TempDir dir;
  FaultyFileOps ops((dir / "c.cache").string());
  DiskCacheStore cache(options_for(dir / "c.cache", 42, &ops));
  fill(cache, 0, 10);
  AlignedBuffer out;
  ops.flip_next_read = true;
  EXPECT_FALSE(cache.lookup(key_for(3), out));
  DiskCacheStats s = cache.stats();
  EXPECT_EQ(s.dropped_corrupt, 1);
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.entries, 9);
  EXPECT_FALSE(cache.lookup(key_for(3), out));  // forgotten: a plain miss now
  EXPECT_EQ(cache.stats().dropped_corrupt, 1);
  ASSERT_TRUE(cache.insert(key_for(3), payload_for(3)));
  EXPECT_TRUE(hit_equals(cache, key_for(3), payload_for(3), out));
  EXPECT_EQ(count_hits(cache, 0, 10), 10);
}

TEST(DiskCacheStore, FlippedByteInTheFileIsDroppedAndMarkedDead) {
  TempDir dir;
  const fs::path path = dir / "c.cache";
  { DiskCacheStore cache(options_for(path)); fill(cache, 0, 20); }
  // Flip a byte in the middle of entry 7's payload.
  const std::vector<std::uint8_t> file = test::read_bytes(path);
  const std::vector<std::uint8_t> p7 = payload_for(7);
  const auto at = std::search(file.begin(), file.end(), p7.begin(), p7.end());
  ASSERT_NE(at, file.end());
  flip_byte(path, static_cast<std::uint64_t>(at - file.begin()) + p7.size() / 2);
  {
    DiskCacheStore cache(options_for(path));
    AlignedBuffer out;
    EXPECT_FALSE(cache.lookup(key_for(7), out));
    EXPECT_EQ(cache.stats().dropped_corrupt, 1);
    EXPECT_EQ(count_hits(cache, 0, 20), 19);
  }
  // Dropped for good: neither the rewritten index nor a full scan brings it back.
  {
    DiskCacheStore cache(options_for(path));
    EXPECT_EQ(cache.stats().entries, 19);
  }
  fs::remove(dir / "c.cache.idx");
  DiskCacheStore cache(options_for(path));
  EXPECT_EQ(cache.stats().entries, 19);
  EXPECT_EQ(count_hits(cache, 0, 20), 19);
  EXPECT_EQ(cache.stats().dropped_corrupt, 0);
  ASSERT_TRUE(cache.insert(key_for(7), payload_for(7)));
  EXPECT_EQ(count_hits(cache, 0, 20), 20);
}

TEST(DiskCacheStore, DiskFullWarnsOnceStopsInsertsAndKeepsServing) {
  for (const int err : {ENOSPC, EDQUOT, EFBIG, EIO}) {
    SCOPED_TRACE(std::strerror(err));
    // Cut in the payload's middle, and in the header (written after the payload).
    for (const std::int64_t budget : {std::int64_t{1000}, std::int64_t(payload_for(50).size()) + 20}) {
      TempDir dir;
      const fs::path path = dir / "c.cache";
      FaultyFileOps ops(path.string());
      ops.fail_errno = err;
      {
        DiskCacheStore cache(options_for(path, 42, &ops));
        fill(cache, 0, 50);
        const std::uint64_t good_size = size_of(path);
        ops.write_budget = budget;
        testing::internal::CaptureStderr();
        EXPECT_FALSE(cache.insert(key_for(50), payload_for(50)));
        for (int i = 51; i < 70; ++i) EXPECT_FALSE(cache.insert(key_for(i), payload_for(i)));
        const std::string warnings = testing::internal::GetCapturedStderr();
        EXPECT_EQ(std::count(warnings.begin(), warnings.end(), '\n'), 1) << warnings;
        EXPECT_NE(warnings.find(path.string()), std::string::npos) << warnings;
        EXPECT_NE(warnings.find(std::strerror(err)), std::string::npos) << warnings;
        const DiskCacheStats s = cache.stats();
        EXPECT_FALSE(s.writable);
        EXPECT_NE(s.note.find(std::strerror(err)), std::string::npos) << s.note;
        EXPECT_EQ(size_of(path), disk_cache_format::pad8(good_size));  // rolled back
        EXPECT_EQ(count_hits(cache, 0, 70), 50);
        ops.write_budget = -1;
      }
      DiskCacheStore cache(options_for(path));
      EXPECT_TRUE(cache.stats().writable);
      EXPECT_EQ(cache.stats().entries, 50);
      EXPECT_EQ(count_hits(cache, 0, 70), 50);
      EXPECT_EQ(cache.stats().dropped_corrupt, 0);
    }
  }
}

// One policy for a full disk: a cache file that cannot be created (no space, no inodes: ENOSPC;
// a quota: EDQUOT) is the same warning as a disk that fills mid-run, and a run without caching,
// not a failed build (it was fatal while ENOSPC mid-run was a warning).
TEST(DiskCacheStore, NoSpaceToCreateTheFileWarnsAndCachesNothing) {
  for (const int err : {ENOSPC, EDQUOT}) {
    SCOPED_TRACE(std::strerror(err));
    TempDir dir;
    const fs::path path = dir / "c.cache";
    test::FaultFs ops;
    ops.fail(test::FsOp::kOpen, path.string(), err, 1, test::FaultFs::kAlways);
    testing::internal::CaptureStderr();
    DiskCacheStore cache(options_for(path, 42, &ops));
    EXPECT_FALSE(cache.insert(key_for(1), payload_for(1)));
    EXPECT_EQ(count_hits(cache, 0, 3), 0);
    const std::string warnings = testing::internal::GetCapturedStderr();
    EXPECT_EQ(std::count(warnings.begin(), warnings.end(), '\n'), 1) << warnings;
    EXPECT_NE(warnings.find(std::strerror(err)), std::string::npos) << warnings;
    const DiskCacheStats s = cache.stats();
    EXPECT_FALSE(s.writable);
    EXPECT_NE(s.note.find("caching off"), std::string::npos) << s.note;
    EXPECT_FALSE(fs::exists(path));
  }
}

// Created for its owner alone (it holds the reader's data), and never through a symlink.
TEST(DiskCacheStore, CreatedOwnerOnlyAndNeverThroughASymlink) {
  TempDir dir;
  const fs::path path = dir / "c.cache";
  { DiskCacheStore cache(options_for(path)); }
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0u);
  test::write_bytes(dir / "victim", {});
  fs::create_symlink(dir / "victim", dir / "link.cache");
  try {
    DiskCacheStore cache(options_for(dir / "link.cache"));
    FAIL() << "opened a cache through a symlink";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("symbolic link"), std::string::npos) << e.what();
  }
  EXPECT_EQ(fs::file_size(dir / "victim"), 0u);
}

TEST(DiskCacheStore, MaxBytesStopsInsertsWithoutEvicting) {
  TempDir dir;
  const fs::path path = dir / "c.cache";
  const std::uint64_t limit = 100'000;
  int stored = 0;
  {
    DiskCacheStore cache(options_for(path, 42, nullptr, limit));
    for (int i = 0; i < 100 && cache.insert(key_for(i), payload_for(i)); ++i) ++stored;
    EXPECT_GT(stored, 3);
    EXPECT_LT(stored, 100);
    const DiskCacheStats s = cache.stats();
    EXPECT_FALSE(s.writable);
    EXPECT_NE(s.note.find("max_bytes"), std::string::npos) << s.note;
    EXPECT_LE(size_of(path), limit);
    EXPECT_FALSE(cache.insert(key_for(0), std::vector<std::uint8_t>(10, 1)));
    EXPECT_EQ(count_hits(cache, 0, 100), stored);
  }
  DiskCacheStore cache(options_for(path, 42, nullptr, limit));
  EXPECT_EQ(cache.stats().entries, stored);
  EXPECT_EQ(count_hits(cache, 0, 100), stored);
}

TEST(DiskCacheStore, TornTailIsCutAtAnyLength) {
  TempDir dir;
  constexpr int kEntries = 25;
  constexpr std::size_t kMax = 3000;
  const fs::path original = dir / "full.cache";
  { DiskCacheStore cache(options_for(original)); fill(cache, 0, kEntries, kMax); }
  const std::vector<std::uint8_t> bytes = test::read_bytes(original);
  const std::vector<std::uint64_t> ends = entry_ends(kEntries, kMax);
  ASSERT_EQ(ends.back(), bytes.size());
  std::mt19937_64 rng(7);
  std::vector<std::uint64_t> cuts;
  for (std::uint64_t e : ends) cuts.insert(cuts.end(), {e - 1, e, e + 1});
  for (int i = 0; i < 60; ++i) cuts.push_back(64 + rng() % (bytes.size() - 64));
  for (const std::uint64_t cut : cuts) {
    if (cut > bytes.size()) continue;
    SCOPED_TRACE("cut at " + std::to_string(cut));
    const fs::path path = dir / "torn.cache";
    fs::remove(dir / "torn.cache.idx");  // recover by scanning, as after a crash
    test::write_bytes(path, {bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(cut)});
    const auto complete = static_cast<int>(std::upper_bound(ends.begin(), ends.end(), cut) - ends.begin());
    const std::uint64_t valid_end = complete == 0 ? 64 : ends[complete - 1];
    {
      DiskCacheStore cache(options_for(path));
      EXPECT_EQ(cache.stats().entries, complete);
      EXPECT_EQ(size_of(path), valid_end);
      EXPECT_EQ(count_hits(cache, 0, kEntries, kMax), complete);
      EXPECT_EQ(cache.stats().dropped_corrupt, 0);
      fill(cache, complete, kEntries - complete, kMax);  // a fresh writer completes it
    }
    DiskCacheStore cache(options_for(path));
    EXPECT_EQ(count_hits(cache, 0, kEntries, kMax), kEntries);
  }
}

TEST(DiskCacheStore, UnfinishedEntryInTheMiddleIsSkipped) {
  TempDir dir;
  const fs::path path = dir / "c.cache";
  { DiskCacheStore cache(options_for(path)); fill(cache, 0, 12); }
  fs::remove(dir / "c.cache.idx");
  // Entry 5 as a killed writer leaves it when later entries completed: no header.
  const std::vector<std::uint64_t> ends = entry_ends(12, 20000);
  std::vector<std::uint8_t> bytes = test::read_bytes(path);
  std::fill_n(bytes.begin() + static_cast<std::ptrdiff_t>(disk_cache_format::pad8(ends[4])), 48, 0);
  test::write_bytes(path, bytes);
  DiskCacheStore cache(options_for(path));
  EXPECT_EQ(cache.stats().entries, 11);
  EXPECT_NE(cache.stats().note.find("skipped"), std::string::npos) << cache.stats().note;
  EXPECT_EQ(count_hits(cache, 0, 12), 11);
  EXPECT_EQ(size_of(path), bytes.size());  // nothing after the gap was cut
}

TEST(DiskCacheStore, BadPathsThrowWithThePath) {
  TempDir dir;
  const std::string missing = (dir / "no" / "such" / "folder" / "c.cache").string();
  try {
    DiskCacheStore cache(options_for(missing));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_EQ(e.path(), missing);
  }
  fs::create_directory(dir / "folder");
  try {
    DiskCacheStore cache(options_for(dir / "folder"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.path(), (dir / "folder").string());
  }
  EXPECT_THROW(DiskCacheStore(options_for("")), Error);
}

// A damaged file of ours (the cache's magic, then garbage) is rebuilt; a file without the magic
// is someone else's and refused (disk_cache_trust_test.cpp).
TEST(DiskCacheStore, DamagedFileOfOursIsRebuilt) {
  TempDir dir;
  const fs::path path = dir / "c.cache";
  for (const std::size_t size : {std::size_t{8}, std::size_t{64}, std::size_t{100000}}) {
    std::vector<std::uint8_t> garbage(size);
    std::mt19937 rng(static_cast<unsigned>(size));
    for (auto& b : garbage) b = static_cast<std::uint8_t>(rng());
    std::memcpy(garbage.data(), "SLUICEDC", 8);
    test::write_bytes(path, garbage);
    {
      DiskCacheStore cache(options_for(path));
      EXPECT_TRUE(cache.stats().writable);
      EXPECT_EQ(cache.stats().entries, 0);
      EXPECT_NE(cache.stats().note.find("rebuilt"), std::string::npos) << cache.stats().note;
      // A second instance meanwhile reads nothing (and does not crash).
      DiskCacheStore reader(options_for(path));
      EXPECT_EQ(reader.stats().entries, 0);
      fill(cache, 0, 10);
    }
    DiskCacheStore cache(options_for(path));
    EXPECT_EQ(count_hits(cache, 0, 10), 10);
  }
  // A reader of a damaged file that another instance holds: empty, read-only, no crash.
  std::vector<std::uint8_t> damaged(1000, 0xAB);
  std::memcpy(damaged.data(), "SLUICEDC", 8);
  test::write_bytes(path, damaged);
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  {
    DiskCacheStore reader(options_for(path));
    EXPECT_FALSE(reader.stats().writable);
    EXPECT_EQ(reader.stats().entries, 0);
    EXPECT_EQ(count_hits(reader, 0, 10), 0);
  }
  ::close(fd);
}

TEST(DiskCacheStore, EightThreadsInsertAndLookUpConcurrently) {
  TempDir dir;
  const fs::path path = dir / "c.cache";
  constexpr int kKeys = 600;
  constexpr int kThreads = 8;
  constexpr int kOps = 1500;
  std::atomic<int> wrong{0};
  std::atomic<std::int64_t> lookups{0};
  {
    DiskCacheStore cache(options_for(path));
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 rng(static_cast<unsigned>(t));
        AlignedBuffer out;
        for (int op = 0; op < kOps; ++op) {
          const int i = static_cast<int>(rng() % kKeys);
          const std::vector<std::uint8_t> expected = payload_for(i, 8000);
          lookups.fetch_add(1);
          const std::optional<std::size_t> n = cache.lookup(key_for(i), out);
          if (!n) {
            if (!cache.insert(key_for(i), expected)) wrong.fetch_add(1);
          } else if (*n != expected.size() || !std::equal(expected.begin(), expected.end(), out.data())) {
            wrong.fetch_add(1);
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
    const DiskCacheStats s = cache.stats();
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_EQ(s.hits + s.misses, lookups.load());
    EXPECT_EQ(s.dropped_corrupt, 0);
    EXPECT_EQ(s.stale, 0);
    EXPECT_LE(s.entries, kKeys);
  }
  DiskCacheStore cache(options_for(path));
  const std::int64_t entries = cache.stats().entries;
  EXPECT_EQ(count_hits(cache, 0, kKeys, 8000), entries);
}

}  // namespace
}  // namespace sluice::stages
