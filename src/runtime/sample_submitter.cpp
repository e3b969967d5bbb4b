// In-flight control: the claimed samples and how many of them the workers run at once.
#include "runtime/sample_submitter.hpp"

#include "runtime/executor.hpp"
#include "sluice/core/error.hpp"

namespace sluice::runtime {

void SampleSubmitter::reset(std::int64_t position) {
  std::lock_guard lock(mutex_);
  // running_ returns to 0 by itself as the last tasks of an abandoned epoch finish.
  submitted_ = claimed_end_ = position;
  claims_head_ = claims_count_ = 0;
}

void SampleSubmitter::claim(int slot, std::int64_t first, int size) {
  std::lock_guard lock(mutex_);
  if (claims_count_ == kMaxSlots) {
    throw Error(ErrorCode::kInternal, "sample submitter: more claimed batches than ring slots");
  }
  claims_[static_cast<std::size_t>((claims_head_ + claims_count_) % kMaxSlots)] = Claim{slot, first, first + size};
  ++claims_count_;
  claimed_end_ = first + size;
}

void SampleSubmitter::submit() {
  std::lock_guard lock(mutex_);
  const int limit = in_flight_.load(std::memory_order_relaxed);
  while (!stopping_ && running_.load(std::memory_order_relaxed) < limit && submitted_ < claimed_end_) {
    const Claim& claim = claims_[static_cast<std::size_t>(claims_head_)];
    const std::int64_t p = submitted_++;
    if (submitted_ == claim.end) {  // the batch's last sample: its claim is done
      claims_head_ = (claims_head_ + 1) % kMaxSlots;
      --claims_count_;
    }
    running_.fetch_add(1, std::memory_order_relaxed);
    executor_->submit(claim.slot, p);
  }
}

std::span<const UnsubmittedSamples> SampleSubmitter::cancel_unsubmitted() {
  std::lock_guard lock(mutex_);
  int n = 0;
  for (int i = 0; i < claims_count_; ++i) {
    const Claim& claim = claims_[static_cast<std::size_t>((claims_head_ + i) % kMaxSlots)];
    const std::int64_t from = std::max(claim.first, submitted_);
    unsubmitted_[static_cast<std::size_t>(n++)] = UnsubmittedSamples{claim.slot, static_cast<int>(claim.end - from)};
  }
  claims_head_ = claims_count_ = 0;
  claimed_end_ = submitted_;
  return {unsubmitted_.data(), static_cast<std::size_t>(n)};
}

void SampleSubmitter::stop() {
  std::lock_guard lock(mutex_);
  claims_head_ = claims_count_ = 0;
  claimed_end_ = submitted_;
  stopping_ = true;
}

}  // namespace sluice::runtime
