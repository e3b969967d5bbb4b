// sluice::OutOfMemory: what the training allocator throws when a block cannot be had. A
// sluice::Error with ErrorCode::kOutOfBudget (so code that handles the pipeline's budget errors
// handles it too) whose message is a report for a person at a terminal: the request, the
// allocator's stats, free chunks per bin and an occupancy map of its regions. The numbers are
// also kept as fields, for programs (the automatic batch-size search backs off on it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "sluice/core/error.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/category.hpp"

namespace sluice {

class OutOfMemory : public Error {
 public:
  // `category` is empty when no tensor was being allocated (a preallocated region that the
  // backing could not provide).
  OutOfMemory(const std::string& report, std::uint64_t requested_bytes,
              std::optional<TensorCategory> category, AllocatorStats stats)
      : Error(ErrorCode::kOutOfBudget, report),
        requested_bytes_(requested_bytes),
        category_(category),
        stats_(std::move(stats)) {}

  // The request as made (before rounding).
  std::uint64_t requested_bytes() const noexcept { return requested_bytes_; }
  std::optional<TensorCategory> category() const noexcept { return category_; }
  // The allocator's stats when the request failed; the failed call changed none of them.
  const AllocatorStats& stats() const noexcept { return stats_; }

 private:
  std::uint64_t requested_bytes_;
  std::optional<TensorCategory> category_;
  AllocatorStats stats_;
};

}  // namespace sluice
