// A Batch and its Loader destroyed in either order. A batch shares ownership of the
// loader's slots (src/runtime/shared_slots.hpp), so one the consumer still holds when the Loader
// goes stays readable, keeps its contents, and returns its slot into living memory; before, that
// slot went back into a freed LoaderImpl. Run under AddressSanitizer (scripts/sanitize asan), which
// turns any read of freed memory or return into a freed loader into a failure, and LeakSanitizer,
// which would catch a cycle that kept the slots alive for ever. Host slots and transfer-ring slots
// (to_device(host()) through the ring) both.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "pipeline_support.hpp"
#include "sluice/sluice.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

using test::TempDir;

enum class Slots { kHost, kTransferRing };

class BatchLifetime : public ::testing::TestWithParam<Slots> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    items_ = new std::vector<Item>(test::make_coded_items(dir_->path(), 60));
  }
  static void TearDownTestSuite() {
    delete items_;
    delete dir_;
  }
  static Loader build() {
    Pipeline p = Pipeline::from_items(*items_).read().decode_jpeg().batch(4).prefetch(3);
    if (GetParam() == Slots::kTransferRing) p.to_device(host(), {.stage_through_ring = true});
    return p.build({.threads = 2});
  }
  // Every sample's pixels name the item its label names (make_coded_items), and the batch is the
  // one its index says: what a batch overwritten or freed behind our back would not be.
  static void expect_intact(const Batch& b, std::int64_t index) {
    ASSERT_TRUE(b.valid());
    EXPECT_EQ(b.index(), index);
    const TensorView& v = b.data();
    const auto* px = static_cast<const std::uint8_t*>(v.data);
    const std::size_t sample = static_cast<std::size_t>(v.shape[1] * v.shape[2] * v.shape[3]);
    const std::size_t centre = (static_cast<std::size_t>(v.shape[1] / 2) * v.shape[2] + v.shape[2] / 2) * 3;
    for (std::int64_t i = 0; i < b.size(); ++i) {
      const int label = b.labels()[static_cast<std::size_t>(i)];
      EXPECT_EQ(label, index * 4 + i);
      EXPECT_EQ(test::index_of_colour(px + static_cast<std::size_t>(i) * sample + centre), label);
    }
    if (b.on_device()) {  // the ring's "device" copy is host memory here: it must match too
      EXPECT_EQ(std::memcmp(b.device_data().data, v.data, v.bytes()), 0);
      EXPECT_EQ(std::memcmp(b.device_labels(), b.labels().data(), b.labels().size_bytes()), 0);
    }
  }
  static inline TempDir* dir_ = nullptr;
  static inline std::vector<Item>* items_ = nullptr;
};

TEST_P(BatchLifetime, BatchReleasedBeforeItsLoader) {
  std::optional<Loader> loader(build());
  std::optional<Batch> held;
  std::int64_t index = 0;
  for (Batch& b : loader->epoch(0)) {
    if (index++ == 2) held.emplace(std::move(b));
  }
  expect_intact(*held, 2);
  held.reset();
  loader.reset();
}

TEST_P(BatchLifetime, LoaderDestroyedWhileBatchesAreHeld) {
  std::optional<Loader> loader(build());
  std::vector<Batch> held;
  {
    auto range = loader->epoch(0);
    auto it = range.begin();
    held.push_back(std::move(*it));  // batch 0
    ++it;
    held.push_back(std::move(*it));  // batch 1; workers are filling the ones after it
  }
  loader.reset();  // mid-epoch, with two batches out
  expect_intact(held[0], 0);
  expect_intact(held[1], 1);
  held[0].release();  // one returns its slot on this thread,
  std::thread other([&] { held[1].release(); });  // the last one on another
  other.join();
  EXPECT_FALSE(held[1].valid());
}

TEST_P(BatchLifetime, IteratorOutlivesItsLoader) {
  std::optional<Loader> loader(build());
  std::optional<Loader::Iterator> it(loader->epoch(0).begin());
  ++*it;
  expect_intact(**it, 1);
  loader.reset();
  expect_intact(**it, 1);  // the iterator's current batch is the consumer's until the iterator goes
  it.reset();
}

TEST_P(BatchLifetime, ABatchOfAFinishedLoaderCanBeMovedAndReleasedLater) {
  Batch kept;
  {
    Loader loader = build();
    for (Batch& b : loader.epoch(0)) {
      if (b.index() == 14) kept = std::move(b);  // the epoch's last
    }
  }
  Batch moved = std::move(kept);
  EXPECT_FALSE(kept.valid());
  expect_intact(moved, 14);
}

INSTANTIATE_TEST_SUITE_P(BothSlotKinds, BatchLifetime, ::testing::Values(Slots::kHost, Slots::kTransferRing),
                         [](const auto& info) { return info.param == Slots::kHost ? "Host" : "TransferRing"; });

}  // namespace
}  // namespace sluice
