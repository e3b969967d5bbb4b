// Resumable iteration: a run stopped after N batches and resumed in a new loader from state()
// delivers exactly the batches the uninterrupted run delivered after the first N, without
// decoding the skipped ones; with a shuffle buffer, the skip policy and sharding, at 1 and 2
// threads; and a state from another pipeline, or a damaged one, is refused.
#include <gtest/gtest.h>

#include <cstring>

#include "pipeline_support.hpp"
#include "sluice/sluice.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

using test::TempDir;

std::uint64_t hash_batch(const Batch& b) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const std::uint8_t*>(b.data().data);
  for (std::size_t i = 0; i < b.data().bytes(); ++i) h = (h ^ p[i]) * 1099511628211ull;
  for (std::int32_t l : b.labels()) h = (h ^ static_cast<std::uint64_t>(l)) * 1099511628211ull;
  return h;
}

struct Case {
  std::string name;
  bool skip_policy;
  int rank;
  int world;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class Resume : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    items_ = test::make_coded_items(dir_.path(), 150);
    if (GetParam().skip_policy) {
      items_[20].path = test::write_truncated_jpeg(dir_.path()).string();
      items_[77].path = test::write_png_named_jpg(dir_.path()).string();
    }
  }
  Loader build(int threads) const {
    return Pipeline::from_items(items_)
        .shard(GetParam().rank, GetParam().world)
        .shuffle_files(5)
        .read()
        .decode_jpeg()
        .random_resized_crop(16)
        .flip_horizontal()
        .normalize()
        .shuffle(25)
        .batch(6)
        .build({.threads = threads, .on_error = GetParam().skip_policy ? OnError::kSkip : OnError::kFail, .seed = 2});
  }
  TempDir dir_;
  std::vector<Item> items_;
};

TEST_P(Resume, ResumedRunDeliversTheUninterruptedRunsBatches) {
  for (int threads : {1, 2}) {
    std::vector<std::uint64_t> full;
    {
      Loader loader = build(threads);
      for (int e = 0; e < 2; ++e) {
        for (Batch& b : loader.epoch(e)) full.push_back(hash_batch(b));
      }
    }
    const std::int64_t per_epoch = static_cast<std::int64_t>(full.size() / 2);
    for (std::int64_t stop : {std::int64_t{0}, std::int64_t{3}, per_epoch - 1, per_epoch}) {
      std::vector<std::uint8_t> state;
      {
        Loader first = build(threads);
        std::int64_t n = 0;
        if (stop > 0) {
          for (Batch& b : first.epoch(0)) {
            (void)b;
            if (++n == stop) break;
          }
        }
        state = first.state();
      }
      Loader second = build(threads);
      second.restore(state);
      std::vector<std::uint64_t> tail;
      for (std::int64_t e = second.resume_epoch(); e < 2; ++e) {
        for (Batch& b : second.epoch(e)) tail.push_back(hash_batch(b));
      }
      const std::vector<std::uint64_t> expected(full.begin() + stop, full.end());
      EXPECT_EQ(tail, expected) << "stopped after " << stop << " batches, " << threads << " threads";
      if (!GetParam().skip_policy) {
        // Only the remaining samples went through read and decode.
        const std::int64_t consumed = std::min(stop * 6, second.samples_per_epoch());  // the last batch may be short
        const std::int64_t remaining_samples = second.samples_per_epoch() * 2 - consumed;
        EXPECT_EQ(second.stats().stages[0].items, remaining_samples);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Resume,
                         ::testing::Values(Case{"ShuffleBuffer", false, 0, 1}, Case{"SkipPolicy", true, 0, 1},
                                           Case{"ShardOneOfTwo", false, 1, 2}),
                         [](const auto& info) { return info.param.name; });

TEST(ResumeState, ForeignOrDamagedStatesAreRefused) {
  TempDir dir;
  const auto items = test::make_coded_items(dir.path(), 20);
  Loader a = Pipeline::from_items(items).read().decode_jpeg().batch(4).build({.seed = 1});
  for (Batch& b : a.epoch(0)) (void)b;
  std::vector<std::uint8_t> state = a.state();
  Loader other_seed = Pipeline::from_items(items).read().decode_jpeg().batch(4).build({.seed = 2});
  Loader other_batch = Pipeline::from_items(items).read().decode_jpeg().batch(5).build({.seed = 1});
  EXPECT_THROW(other_seed.restore(state), Error);
  EXPECT_THROW(other_batch.restore(state), Error);
  std::vector<std::uint8_t> damaged = state;
  damaged[20] ^= 1;
  Loader same = Pipeline::from_items(items).read().decode_jpeg().batch(4).build({.seed = 1});
  EXPECT_THROW(same.restore(damaged), Error);
  EXPECT_THROW(same.restore(std::span<const std::uint8_t>(state.data(), 3)), Error);
  same.restore(state);
  EXPECT_EQ(same.resume_epoch(), 1);  // epoch 0 was finished
}

TEST(ResumeState, StateRightAfterRestoreIsTheRestoredStateUntilAnEpochStarts) {
  TempDir dir;
  const auto items = test::make_coded_items(dir.path(), 20);
  const auto build = [&] { return Pipeline::from_items(items).read().decode_jpeg().batch(4).build({.seed = 1}); };
  Loader first = build();
  std::int64_t n = 0;
  for (Batch& b : first.epoch(1)) {
    (void)b;
    if (++n == 2) break;
  }
  const std::vector<std::uint8_t> saved = first.state();  // epoch 1, batch 2

  Loader second = build();
  for (Batch& b : second.epoch(0)) (void)b;  // somewhere else: epoch 0 finished
  const std::vector<std::uint8_t> own = second.state();
  EXPECT_NE(own, saved);
  second.restore(saved);
  EXPECT_EQ(second.state(), saved);  // not where the abandoned run stopped
  EXPECT_EQ(second.state(), saved);  // asking twice changes nothing
  Loader::Iterator it = second.epoch(1).begin();
  ASSERT_EQ((*it).index(), 2);  // the epoch started at the restored batch
  ++it;
  ASSERT_EQ((*it).index(), 3);  // handed out: the next one is batch 4
  Loader third = build();
  third.restore(second.state());
  EXPECT_EQ(third.resume_epoch(), 1);
  std::vector<std::int64_t> indices;
  for (Batch& b : third.epoch(1)) indices.push_back(b.index());
  EXPECT_EQ(indices, (std::vector<std::int64_t>{4}));
}

}  // namespace
}  // namespace sluice
