// LoaderState: resumable iteration. A saved state describes the whole job's position, not one
// rank's: the epoch, the global steps delivered in it (as segments: so many steps at so many
// ranks), the global batch, and a fingerprint of what decides the global order (items, order,
// seeds, split); never the rank or the world size. Every rank at the same step saves the same
// bytes, and any of them restores the job at another world size: the epoch's global order less
// what the segments delivered is what is left (stages/source/epoch_order.hpp). restore() checks a
// state and keeps its resume point until the epoch it names starts.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "stages/program/resolved_pipeline.hpp"

namespace sluice::runtime {

// Where an epoch starts: what of it earlier runs delivered.
struct ResumePoint {
  std::int64_t epoch = -1;  // -1: no resume pending
  std::vector<stages::EpochSegment> done;
};

class LoaderState {
 public:
  // `plan` must outlive the state.
  explicit LoaderState(const stages::ResolvedPipeline& plan) : plan_(plan) {}

  // The bytes of a state: the consumer has been handed batches up to `returned` (a batch index,
  // earlier segments' steps included) of the `batches` of `epoch` (-1: no epoch started yet). A
  // finished epoch resumes at the next one's start. While a restored point is pending
  // (set_resume, and its epoch not started), that point instead: the consumer's position is then
  // where the restored run resumes, not where the abandoned one stopped.
  std::vector<std::uint8_t> save(std::int64_t epoch, std::int64_t returned, std::int64_t batches) const;
  // Checks a saved state against this pipeline. Throws sluice::Error(kInvalidArgument) for a state
  // of another pipeline, another global batch (naming the world sizes that would work), another
  // version or damaged bytes.
  ResumePoint parse(std::span<const std::uint8_t> bytes) const;
  // Keeps a parsed point for the next start of its epoch.
  void set_resume(ResumePoint point) { resume_ = std::move(point); }
  // What earlier runs delivered of `epoch`: the resume point's segments if it names this epoch,
  // else none. Any pending resume point is used up; the segments stay for save().
  std::span<const stages::EpochSegment> begin_epoch(std::int64_t epoch);
  // The epoch a pending restore resumes, or 0.
  std::int64_t resume_epoch() const { return resume_.epoch < 0 ? 0 : resume_.epoch; }

  // What decides the global order: the items, the order, the split and the seeds.
  std::uint64_t fingerprint() const;

 private:
  std::vector<std::uint8_t> encode(const ResumePoint& point) const;
  std::int64_t global_batch() const;

  const stages::ResolvedPipeline& plan_;
  ResumePoint resume_;
  ResumePoint current_;  // the epoch in progress and what earlier runs delivered of it
};

}  // namespace sluice::runtime
