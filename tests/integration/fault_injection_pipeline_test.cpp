// Fault injection into whole pipelines, through runtime::build_loader's file-system seam
// (src/runtime/loader_build.hpp; the injector is tests/support/fault_fs.hpp):
// a file deleted, truncated or failing with EIO while an epoch runs, a disk that fills up while
// the disk cache is being built, and a cache entry whose bytes rot. Each fault is switched on
// after the first batch has been consumed, so it hits a pipeline that is already running with
// workers busy. The expectations are the ones docs/reliability.md tabulates: under OnError::kFail
// the consumer gets a sluice::Error naming the file and the cause; under kSkip the epoch completes
// with the sample replaced and counted; cache faults never change a batch, they only cost a
// re-read. (The consumer that throws and the loader destroyed mid-epoch are in
// pipeline_contract_test.cpp; faults in the read stage alone in unit/stages/fault_injection_test.)
#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fault_fs.hpp"
#include "pipeline_support.hpp"
#include "runtime/loader_build.hpp"
#include "sluice/sluice.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

using test::FaultFs;
using test::FsOp;
using test::TempDir;

constexpr int kItems = 160;
constexpr int kBatch = 8;
// The last item: far behind the in-flight window when the fault is switched on after batch 0.
constexpr int kVictim = kItems - 3;

class PipelineFaults : public ::testing::Test {
 protected:
  void SetUp() override { items_ = test::make_coded_items(dir_.path(), kItems); }

  Pipeline pipeline() const {
    return Pipeline::from_items(items_).read().decode_jpeg().resize(24, 16).batch(kBatch);
  }
  Loader build(OnError policy, int threads) {
    return runtime::build_loader(pipeline(), {.threads = threads, .on_error = policy}, &fs_);
  }
  std::string victim() const { return items_[kVictim].path; }

  // Runs epoch `e`, calling `arm` after the first batch. Returns the error the consumer saw, if
  // any, and checks every delivered batch's pixels against its labels.
  std::optional<Error> run_epoch(Loader& loader, std::int64_t e, const std::function<void()>& arm,
                                 int* batches = nullptr) {
    int seen = 0;
    try {
      for (Batch& b : loader.epoch(e)) {
        const auto* px = static_cast<const std::uint8_t*>(b.data().data);
        const std::int64_t sample_bytes = b.data().bytes() / b.size();
        for (std::int64_t i = 0; i < b.size(); ++i) {
          // A replaced sample (skip) carries the label of the sample that replaced it.
          EXPECT_EQ(test::index_of_colour(px + i * sample_bytes + (8 * 24 + 12) * 3), b.labels()[i]);
        }
        if (seen++ == 0 && arm) arm();
      }
    } catch (const Error& error) {
      if (batches != nullptr) *batches = seen;
      return error;
    }
    if (batches != nullptr) *batches = seen;
    return std::nullopt;
  }

  TempDir dir_;
  std::vector<Item> items_;
  FaultFs fs_;
};

struct Fault {
  std::string name;
  void (*arm)(FaultFs&, const std::string& path);
  ErrorCode code;
};

void PrintTo(const Fault& f, std::ostream* os) { *os << f.name; }

const std::vector<Fault>& faults() {
  static const std::vector<Fault> list{
      {"DeletedMidEpoch",
       [](FaultFs& fs, const std::string& p) { fs.fail(FsOp::kOpen, p, ENOENT, 1, FaultFs::kAlways); },
       ErrorCode::kNotFound},
      {"TruncatedMidEpoch", [](FaultFs& fs, const std::string& p) { fs.truncate_reads(p, 200); },
       ErrorCode::kCorruptData},
      {"EioOnRead",
       [](FaultFs& fs, const std::string& p) { fs.fail(FsOp::kPread, p, EIO, 1, FaultFs::kAlways); },
       ErrorCode::kIo},
      {"PermissionLostMidEpoch",
       [](FaultFs& fs, const std::string& p) { fs.fail(FsOp::kOpen, p, EACCES, 1, FaultFs::kAlways); },
       ErrorCode::kPermissionDenied},
  };
  return list;
}

class FileFault : public PipelineFaults, public ::testing::WithParamInterface<Fault> {};

TEST_P(FileFault, FailPolicyStopsTheEpochWithTheFileAndTheCause) {
  for (int threads : {1, 2}) {
    fs_.clear();
    Loader loader = build(OnError::kFail, threads);
    int batches = 0;
    const auto error = run_epoch(loader, 0, [&] { GetParam().arm(fs_, victim()); }, &batches);
    ASSERT_TRUE(error.has_value()) << GetParam().name << " at " << threads << " threads: no error";
    EXPECT_EQ(error->code(), GetParam().code) << error->what();
    EXPECT_EQ(error->path(), victim());
    EXPECT_FALSE(error->cause().empty());
    EXPECT_EQ(batches, kVictim / kBatch);  // every batch before the victim's was delivered
    // The fault is gone: the same loader delivers the next epoch whole.
    fs_.clear();
    int full = 0;
    EXPECT_FALSE(run_epoch(loader, 1, nullptr, &full).has_value());
    EXPECT_EQ(full, kItems / kBatch);
  }
}

TEST_P(FileFault, SkipPolicyCompletesTheEpochAndCountsTheFile) {
  for (int threads : {1, 2}) {
    fs_.clear();
    Loader loader = build(OnError::kSkip, threads);
    int batches = 0;
    EXPECT_FALSE(run_epoch(loader, 0, [&] { GetParam().arm(fs_, victim()); }, &batches).has_value());
    EXPECT_EQ(batches, kItems / kBatch);  // full batches: the victim was replaced
    const Stats s = loader.stats();
    EXPECT_EQ(s.skipped, 1);
    ASSERT_EQ(s.skipped_samples.size(), 1u);
    EXPECT_EQ(s.skipped_samples[0].path, victim());
    EXPECT_GT(fs_.injected(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(EachFault, FileFault, ::testing::ValuesIn(faults()),
                         [](const auto& info) { return info.param.name; });

TEST_F(PipelineFaults, SkipPolicyIsDeterministicUnderAFault) {
  std::uint64_t sums[2];
  for (int threads : {1, 2}) {
    FaultFs fs;
    fs.fail(FsOp::kPread, victim(), EIO, 1, FaultFs::kAlways);
    Loader loader = runtime::build_loader(pipeline(), {.threads = threads, .on_error = OnError::kSkip}, &fs);
    sums[threads - 1] = test::epoch_checksum(loader, 0);
  }
  EXPECT_EQ(sums[0], sums[1]);
}

TEST_F(PipelineFaults, TransientEioUnderFailPolicyCostsOneEpochNotTheLoader) {
  Loader loader = build(OnError::kFail, 2);
  fs_.fail(FsOp::kPread, victim(), EIO, 1, 1);  // the next read of the victim only
  const auto error = run_epoch(loader, 0, nullptr);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code(), ErrorCode::kIo);
  EXPECT_FALSE(run_epoch(loader, 1, nullptr).has_value());  // the retry in the next epoch reads it
}

TEST_F(PipelineFaults, FileOverTheMaximumSizeIsRefusedBeforeItIsRead) {
  // A valid JPEG with 1 MiB of trailing bytes: only its size is wrong.
  std::filesystem::resize_file(victim(), std::filesystem::file_size(victim()) + (1 << 20));
  const auto limited = [&](OnError policy) {
    return Pipeline::from_items(items_).read({.max_file_size = 64 * 1024}).decode_jpeg().resize(24, 16)
        .batch(kBatch).build({.threads = 2, .on_error = policy});
  };
  Loader strict = limited(OnError::kFail);
  const auto error = run_epoch(strict, 0, nullptr);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code(), ErrorCode::kTooLarge) << error->what();
  EXPECT_EQ(error->path(), victim());
  Loader lenient = limited(OnError::kSkip);
  EXPECT_FALSE(run_epoch(lenient, 0, nullptr).has_value());
  EXPECT_EQ(lenient.stats().skipped, 1);
}

// The disk cache under faults: the batches never change, whatever the disk does.
class CacheFaults : public PipelineFaults {
 protected:
  Pipeline cached(const std::filesystem::path& cache) const {
    return Pipeline::from_items(items_).read().cache(DiskCache{cache.string()}).decode_jpeg()
        .resize(24, 16).batch(kBatch);
  }
  std::uint64_t uncached_checksum() {
    Loader plain = pipeline().build({.threads = 2});
    return test::epoch_checksum(plain, 0);
  }
};

TEST_F(CacheFaults, DiskFullWhileBuildingTheCacheKeepsTheRunGoingUncached) {
  const auto cache = dir_.path() / "full.cache";
  fs_.fail(FsOp::kPwrite, FaultFs::kAnyPath, ENOSPC, 20, FaultFs::kAlways);  // full after a few entries
  Loader loader = runtime::build_loader(cached(cache), {.threads = 2}, &fs_);
  const std::uint64_t expected = uncached_checksum();
  EXPECT_EQ(test::epoch_checksum(loader, 0), expected);
  EXPECT_EQ(test::epoch_checksum(loader, 1), expected);
  const Stats s = loader.stats();
  EXPECT_EQ(s.cache.kind, "disk");
  EXPECT_NE(s.cache.note.find("No space"), std::string::npos) << s.cache.note;
  EXPECT_GT(s.cache.hits, 0);  // what was written before the disk filled up is served
  EXPECT_GT(s.cache.misses, kItems);  // the rest is read again in epoch 1
  EXPECT_GT(fs_.injected(), 0);
}

TEST_F(CacheFaults, FlippedBytesInACacheEntryAreDroppedAndRecomputedNeverServed) {
  const auto cache = dir_.path() / "rot.cache";
  const std::uint64_t expected = uncached_checksum();
  {
    Loader writer = cached(cache).build({.threads = 2});
    ASSERT_EQ(test::epoch_checksum(writer, 0), expected);
  }
  const auto size = std::filesystem::file_size(cache);
  // Rot a few bytes spread over the file: each lands in some entry's header or payload.
  for (int k = 1; k <= 4; ++k) fs_.flip_byte(cache.string(), size * k / 5, 0x5A);
  Loader reader = runtime::build_loader(cached(cache), {.threads = 2}, &fs_);
  EXPECT_EQ(test::epoch_checksum(reader, 0), expected);
  EXPECT_EQ(test::epoch_checksum(reader, 1), expected);
  const Stats s = reader.stats();
  EXPECT_GE(s.cache.dropped, 1);
  EXPECT_GT(s.cache.hits, 0);
}

TEST_F(CacheFaults, EioReadingTheCacheFallsBackToTheSourceFiles) {
  const auto cache = dir_.path() / "eio.cache";
  const std::uint64_t expected = uncached_checksum();
  {
    Loader writer = cached(cache).build({.threads = 2});
    ASSERT_EQ(test::epoch_checksum(writer, 0), expected);
  }
  Loader reader = runtime::build_loader(cached(cache), {.threads = 2}, &fs_);
  fs_.fail(FsOp::kPread, cache.string(), EIO, 5, 10);  // ten cache reads fail, mid-epoch
  EXPECT_EQ(test::epoch_checksum(reader, 0), expected);
  EXPECT_EQ(reader.stats().skipped, 0);
}

}  // namespace
}  // namespace sluice
