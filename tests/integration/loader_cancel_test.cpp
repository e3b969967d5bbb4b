// Loader::cancel() and Loader::set_wait_check(): a consumer's wait for a batch ends when asked,
// even the wait for a free slot while the consumer holds every one (which nothing else would
// ever end), by throwing Error(kCancelled); the epoch is abandoned and the next one runs as if
// nothing happened.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "pipeline_support.hpp"
#include "sluice/sluice.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

using namespace std::chrono_literals;
using test::TempDir;

class LoaderCancel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    items_ = new std::vector<Item>(test::make_coded_items(dir_->path(), 40));
  }
  static void TearDownTestSuite() {
    delete items_;
    delete dir_;
  }
  // prefetch 1: a ring of 3 slots (fixed threads, so no autotuner grows it).
  static Loader build() { return Pipeline::from_items(*items_).read().decode_jpeg().batch(4).prefetch(1).build({.threads = 2}); }

  // Takes the epoch's first three batches and keeps them: every slot is held, so the next ++
  // would wait for ever.
  static std::vector<Batch> hold_every_slot(Loader::Iterator& it) {
    std::vector<Batch> held;
    for (int i = 0; i < 3; ++i) {
      EXPECT_FALSE(it == Loader::Sentinel{});
      held.push_back(std::move(*it));
      if (i < 2) ++it;
    }
    return held;
  }

  // ++it, which must throw kCancelled; returns how long it waited.
  static std::chrono::duration<double> expect_cancelled(Loader::Iterator& it) {
    const auto start = std::chrono::steady_clock::now();
    try {
      ++it;
      ADD_FAILURE() << "the wait was not cancelled";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kCancelled) << e.what();
    }
    EXPECT_TRUE(it == Loader::Sentinel{}) << "the iterator goes on after a cancellation";
    return std::chrono::steady_clock::now() - start;
  }

  static TempDir* dir_;
  static std::vector<Item>* items_;
};

TempDir* LoaderCancel::dir_ = nullptr;
std::vector<Item>* LoaderCancel::items_ = nullptr;

TEST_F(LoaderCancel, CancelFromAnotherThreadWakesTheWaitForAFreeSlot) {
  Loader loader = build();
  const std::uint64_t expected = test::epoch_checksum(loader, 0);
  auto range = loader.epoch(0);
  Loader::Iterator it = range.begin();
  std::vector<Batch> held = hold_every_slot(it);
  std::thread canceller([&] {
    std::this_thread::sleep_for(200ms);
    loader.cancel();
  });
  const auto waited = expect_cancelled(it);
  canceller.join();
  EXPECT_GE(waited, 150ms) << "the wait ended before cancel()";
  EXPECT_LT(waited, 5s);
  held.clear();
  // The abandoned epoch leaves nothing behind: the same epoch again is the same epoch.
  EXPECT_EQ(test::epoch_checksum(loader, 0), expected);
}

TEST_F(LoaderCancel, CancelBeforeAWaitEndsTheNextOne) {
  Loader loader = build();
  auto range = loader.epoch(1);
  Loader::Iterator it = range.begin();
  loader.cancel();
  expect_cancelled(it);  // even though the next batch may be ready already
  // Taken once: the epoch after runs to its end.
  std::int64_t batches = 0;
  for (Batch& b : loader.epoch(1)) {
    (void)b;
    ++batches;
  }
  EXPECT_EQ(batches, loader.batches_per_epoch());
}

TEST_F(LoaderCancel, WaitCheckIsPolledEveryIntervalAndEndsTheWait) {
  Loader loader = build();
  // Counts its calls; once armed, says "cancel" at its third call from then.
  std::atomic<bool> armed{false};
  std::atomic<int> calls{0};
  std::atomic<int> armed_calls{0};
  loader.set_wait_check(
      [&] {
        calls.fetch_add(1);
        return armed.load() && armed_calls.fetch_add(1) + 1 >= 3;
      },
      20ms);
  auto range = loader.epoch(0);
  Loader::Iterator it = range.begin();
  std::vector<Batch> held = hold_every_slot(it);
  armed.store(true);
  const auto waited = expect_cancelled(it);
  EXPECT_EQ(armed_calls.load(), 3);
  EXPECT_GE(waited, 40ms);  // the first call comes an interval into the wait, the third two later
  EXPECT_LT(waited, 5s);
  held.clear();
  // Removed, it is not called again.
  loader.set_wait_check({}, 20ms);
  const int before = calls.load();
  for (Batch& b : loader.epoch(0)) (void)b;
  EXPECT_EQ(calls.load(), before);
}

}  // namespace
}  // namespace sluice
