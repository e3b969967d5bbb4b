// Any number of ranks, through whole loaders: every rank of a world yields as many batches (the
// short ones padded, Batch::padding(), never counted as samples); the union of the ranks' s-th
// batches is the same global step at every world size (split by samples); and a job stopped at
// W ranks (first step, middle, last step, between epochs) and resumed from any rank's state at W'
// delivers every sample of the epoch once, for W, W' in {1, 2, 3, 4, 6, 8}, for a folder, a list,
// items and tar shards split both ways, with a shuffle buffer, drop_last and the skip policy over
// bad files. A state whose global batch the new world does not divide is refused with the sizes
// that work. Samples are identified by their pixels (make_coded_items), whatever the labels say.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>

#include "pipeline_support.hpp"
#include "shard_support.hpp"
#include "sluice/sluice.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

constexpr int kItems = 100;
constexpr int kGlobalBatch = 24;
const std::vector<int> kWorlds = {1, 2, 3, 4, 6, 8};

enum class Source { kFolder, kList, kItems, kShardsBySamples, kShardsByShards };

struct Config {
  std::string name;
  Source source;
  bool drop_last = false;
  std::int64_t buffer = 0;
  bool bad_files = false;  // two items unreadable, on_error skip
};
void PrintTo(const Config& c, std::ostream* os) { *os << c.name; }

// What one rank saw of an epoch: per global step, the sample identities (padding left out).
struct RankRun {
  std::map<std::int64_t, std::vector<int>> steps;
  std::int64_t batches = 0;
  std::int64_t padding = 0;
  std::vector<std::uint8_t> state;
};

class Ranks : public ::testing::TestWithParam<Config> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir;
    const auto root = dir_->path() / "images";
    std::filesystem::create_directories(root);
    items_ = new std::vector<Item>(test::make_coded_items(root, kItems));
    bad_items_ = new std::vector<Item>(*items_);
    (*bad_items_)[20].path = test::write_truncated_jpeg(dir_->path()).string();
    (*bad_items_)[77].path = test::write_png_named_jpg(dir_->path()).string();
    std::ofstream list(dir_->path() / "list.txt");
    for (const Item& item : *items_) list << item.path << "\t" << item.label << "\n";
    list.close();
    test::shard_folder(root, dir_->path() / "shards", 17);
  }
  static void TearDownTestSuite() {
    delete items_;
    delete bad_items_;
    delete dir_;
  }

  Pipeline source() const {
    const auto& d = dir_->path();
    switch (GetParam().source) {
      case Source::kFolder: return Pipeline::from_folder((d / "images").string());
      case Source::kList: return Pipeline::from_list((d / "list.txt").string());
      case Source::kItems: return Pipeline::from_items(GetParam().bad_files ? *bad_items_ : *items_);
      case Source::kShardsBySamples:
        return Pipeline::from_shards((d / "shards/train-*.tar").string(), {.shard_by = ShardBy::kSamples});
      case Source::kShardsByShards: break;
    }
    return Pipeline::from_shards((d / "shards/train-*.tar").string(), {.shard_by = ShardBy::kShards});
  }
  Loader build(int rank, int world) const {
    Pipeline p = source();
    p.shard(rank, world).shuffle_files(3).read().decode_jpeg();
    if (GetParam().buffer > 1) p.shuffle(GetParam().buffer);
    p.batch(kGlobalBatch / world, {.drop_last = GetParam().drop_last});
    return p.build({.threads = 1, .on_error = GetParam().bad_files ? OnError::kSkip : OnError::kFail, .seed = 4});
  }

  // Rank `rank` of `world`: restores `state` if any, runs `epoch` up to `stop` global steps
  // (-1: to its end) and saves its state.
  RankRun run(int rank, int world, std::int64_t epoch, std::int64_t stop, const std::vector<std::uint8_t>* state) const {
    Loader loader = build(rank, world);
    if (state != nullptr) loader.restore(*state);
    RankRun out;
    for (Batch& b : loader.epoch(epoch)) {
      if (stop >= 0 && b.index() >= stop) break;
      const auto* px = static_cast<const std::uint8_t*>(b.data().data);
      const std::size_t sample = static_cast<std::size_t>(b.data().shape[1] * b.data().shape[2] * 3);
      auto& step = out.steps[b.index()];
      for (std::int64_t i = 0; i < b.size() - b.padding(); ++i) step.push_back(test::index_of_colour(px + i * sample));
      std::sort(step.begin(), step.end());
      out.padding += b.padding();
      ++out.batches;
      if (stop >= 0 && b.index() + 1 >= stop) break;
    }
    if (stop < 0 && state == nullptr) {
      // A whole epoch: the samples the stats count are those delivered, padding not among them.
      std::int64_t n = 0;
      for (const auto& [s, v] : out.steps) n += static_cast<std::int64_t>(v.size());
      EXPECT_EQ(loader.stats().samples, n) << "rank " << rank << " of " << world;
    }
    out.state = loader.state();
    return out;
  }

  // A whole job: every rank's run, merged into global steps; checks the ranks' batch counts and
  // that every rank saved the same state.
  struct JobRun {
    std::map<std::int64_t, std::vector<int>> steps;
    std::vector<std::uint8_t> state;
  };
  JobRun job(int world, std::int64_t epoch, std::int64_t stop, const std::vector<std::uint8_t>* state) const {
    JobRun out;
    std::int64_t batches = -1;
    for (int rank = 0; rank < world; ++rank) {
      RankRun r = run(rank, world, epoch, stop, state);
      if (rank == 0) {
        out.state = r.state;
        batches = r.batches;
      }
      EXPECT_EQ(r.batches, batches) << "rank " << rank << " of " << world;
      EXPECT_EQ(r.state, out.state) << "rank " << rank << " of " << world << " saved another state";
      for (auto& [s, v] : r.steps) out.steps[s].insert(out.steps[s].end(), v.begin(), v.end());
    }
    for (auto& [s, v] : out.steps) std::sort(v.begin(), v.end());
    return out;
  }

  void expect_epoch(const std::vector<int>& delivered, const std::string& what) const {
    std::map<int, int> count;
    for (const int i : delivered) ++count[i];
    if (GetParam().bad_files) {
      // Bad items are never delivered; their positions hold replacements (other samples again).
      EXPECT_EQ(count.count(20) + count.count(77), 0u) << what;
      EXPECT_EQ(count.size(), static_cast<std::size_t>(kItems - 2)) << what;
      EXPECT_EQ(static_cast<int>(delivered.size()), kItems) << what;
      return;
    }
    for (const auto& [i, c] : count) EXPECT_EQ(c, 1) << what << ": sample " << i;
    const int missing = kItems - static_cast<int>(count.size());
    EXPECT_EQ(missing, GetParam().drop_last ? kItems % kGlobalBatch : 0) << what;
  }

  static inline test::TempDir* dir_ = nullptr;
  static inline std::vector<Item>* items_ = nullptr;
  static inline std::vector<Item>* bad_items_ = nullptr;
};

std::vector<int> flatten(const std::map<std::int64_t, std::vector<int>>& steps, std::int64_t from = 0) {
  std::vector<int> out;
  for (auto it = steps.lower_bound(from); it != steps.end(); ++it) out.insert(out.end(), it->second.begin(), it->second.end());
  return out;
}

TEST_P(Ranks, EveryWorldSizeCoversTheEpochInEqualBatchCounts) {
  const JobRun one = job(1, 1, -1, nullptr);
  expect_epoch(flatten(one.steps), "1 rank");
  for (const int world : kWorlds) {
    const JobRun all = job(world, 1, -1, nullptr);
    expect_epoch(flatten(all.steps), std::to_string(world) + " ranks");
    if (GetParam().source != Source::kShardsByShards && !GetParam().bad_files) {
      EXPECT_EQ(all.steps, one.steps) << world << " ranks: other global steps than 1 rank's";
    }
  }
}

TEST_P(Ranks, ResumeAtAnyWorldSizeDeliversTheRestOnce) {
  const std::int64_t steps = GetParam().drop_last ? kItems / kGlobalBatch : (kItems + kGlobalBatch - 1) / kGlobalBatch;
  const JobRun uninterrupted = job(1, 1, -1, nullptr);
  for (const int world : kWorlds) {
    for (const std::int64_t stop : {std::int64_t{1}, steps / 2, steps - 1, steps}) {
      const JobRun before = job(world, 1, stop, nullptr);
      for (const int next : kWorlds) {
        const std::string what = std::to_string(world) + " -> " + std::to_string(next) + " ranks after " +
                                 std::to_string(stop) + " steps";
        const std::int64_t epoch = stop == steps ? 2 : 1;  // between epochs: the next one starts whole
        const JobRun after = job(next, epoch, -1, &before.state);
        if (stop == steps) {
          expect_epoch(flatten(after.steps), what);
          continue;
        }
        std::vector<int> delivered = flatten(before.steps);
        const std::vector<int> rest = flatten(after.steps);
        delivered.insert(delivered.end(), rest.begin(), rest.end());
        expect_epoch(delivered, what);
        if (GetParam().source != Source::kShardsByShards && !GetParam().bad_files) {
          auto expected = uninterrupted.steps;
          expected.erase(expected.begin(), expected.lower_bound(stop));
          EXPECT_EQ(after.steps, expected) << what << ": other global steps than the uninterrupted run's";
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Sources, Ranks,
    ::testing::Values(Config{"Folder", Source::kFolder}, Config{"ListDropLast", Source::kList, true},
                      Config{"ItemsShuffleBuffer", Source::kItems, false, 16},
                      Config{"ItemsSkipBadFiles", Source::kItems, false, 0, true},
                      Config{"ShardsBySamples", Source::kShardsBySamples, false, 16},
                      Config{"ShardsByShards", Source::kShardsByShards}, Config{"ShardsByShardsDropLast", Source::kShardsByShards, true, 16}),
    [](const auto& info) { return info.param.name; });

TEST(RanksState, AGlobalBatchTheWorldDoesNotDivideIsRefusedWithTheSizesThatWork) {
  test::TempDir dir;
  const auto items = test::make_coded_items(dir.path(), 30);
  const auto build = [&](int rank, int world, int batch) {
    return Pipeline::from_items(items).shard(rank, world).read().decode_jpeg().batch(batch).build({.threads = 1});
  };
  Loader four = build(0, 4, 3);  // global batch 12
  for (Batch& b : four.epoch(0)) {
    (void)b;
    break;
  }
  const std::vector<std::uint8_t> state = four.state();
  try {
    build(0, 5, 2).restore(state);
    FAIL() << "restored a global batch of 12 at 5 ranks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("world sizes that divide it: 1, 2, 3, 4, 6, 12"), std::string::npos) << e.what();
  }
  try {
    build(0, 3, 3).restore(state);
    FAIL() << "restored a global batch of 12 as 3 x 3";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("use batch(4)"), std::string::npos) << e.what();
  }
  Loader three = build(2, 3, 4);
  three.restore(state);
  EXPECT_EQ(three.resume_epoch(), 0);
}

}  // namespace
}  // namespace sluice
