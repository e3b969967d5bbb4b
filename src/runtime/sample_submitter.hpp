// SampleSubmitter: in-flight control. The samples of batches that have a slot are handed to the
// workers while fewer than `in_flight` of them run; each finishing sample counts itself out, and
// once a quarter of the limit has finished the finishing worker submits the next ones (in bursts,
// so the lock is taken once per several samples, which matters when a sample takes 20 us).
//
// Threads: claim(), reset() and cancel_unsubmitted() run on the consumer's thread, submit() on
// the consumer's and on finishing workers; all of them take one short lock. finished_one() is
// lock-free.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>

#include "runtime/batch_ring.hpp"

namespace sluice::runtime {

class Executor;

// Samples of one claimed batch that were never submitted.
struct UnsubmittedSamples {
  int slot = -1;
  int samples = 0;
};

class SampleSubmitter {
 public:
  explicit SampleSubmitter(int in_flight) : in_flight_(in_flight) {}
  SampleSubmitter(const SampleSubmitter&) = delete;
  SampleSubmitter& operator=(const SampleSubmitter&) = delete;

  // The executor that runs (slot, position) pairs; set once, before the first submit().
  void attach(Executor& executor) { executor_ = &executor; }

  // An epoch starts at `position` (a restored state skips what came before).
  void reset(std::int64_t position);
  // Positions [first, first + size) belong to `slot`; batches are claimed in position order.
  void claim(int slot, std::int64_t first, int size);
  // Submits claimed samples while fewer than in_flight() run.
  void submit();
  // A worker finished a sample: true when enough have finished that it should call submit().
  bool finished_one() {
    const std::int64_t limit = in_flight_.load(std::memory_order_relaxed);
    const std::int64_t running = running_.fetch_sub(1, std::memory_order_acq_rel) - 1;
    return running <= limit - std::max<std::int64_t>(1, limit / 4);
  }
  // Stops submitting what is claimed and not yet submitted, and says which slots those samples
  // belong to, so the caller can count them done. The span lives until the next call.
  std::span<const UnsubmittedSamples> cancel_unsubmitted();
  // The loader is going away: nothing is submitted any more.
  void stop();

  int in_flight() const { return in_flight_.load(std::memory_order_relaxed); }
  void set_in_flight(int in_flight) { in_flight_.store(in_flight, std::memory_order_relaxed); }
  std::int64_t running() const { return running_.load(std::memory_order_relaxed); }

 private:
  struct Claim {
    int slot = -1;
    std::int64_t first = 0;
    std::int64_t end = 0;
  };

  Executor* executor_ = nullptr;
  std::atomic<int> in_flight_;
  std::mutex mutex_;
  // Claimed batches with samples still to submit, oldest first: a fixed ring, since a batch is
  // claimed only with a free slot, so at most kMaxSlots are outstanding.
  std::array<Claim, kMaxSlots> claims_{};
  int claims_head_ = 0;
  int claims_count_ = 0;
  std::int64_t submitted_ = 0;              // positions before this one are submitted
  std::int64_t claimed_end_ = 0;            // positions before this one have a slot
  std::atomic<std::int64_t> running_{0};    // submitted and not finished (written under the lock
                                            // when submitting, atomically when finishing)
  bool stopping_ = false;
  std::array<UnsubmittedSamples, kMaxSlots> unsubmitted_{};
};

}  // namespace sluice::runtime
