// LoaderState: resumable iteration. A saved state is where the consumer is (the epoch and the
// next batch) with a fingerprint of what decides which samples land where (items, order,
// batching, seeds); every order and random choice is a function of (seed, epoch, position), so
// that is all a resume needs. restore() checks a state and keeps its resume point until the
// epoch it names starts.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "stages/program/resolved_pipeline.hpp"

namespace sluice::runtime {

// Where an epoch starts: its first batch to issue.
struct ResumePoint {
  std::int64_t epoch = -1;  // -1: no resume pending
  std::int64_t batch = 0;
};

class LoaderState {
 public:
  // `plan` must outlive the state.
  explicit LoaderState(const stages::ResolvedPipeline& plan) : plan_(plan) {}

  // The bytes of a state: the consumer has been handed `returned` of the `batches` batches of
  // `epoch` (-1: no epoch started yet). A finished epoch resumes at the next one's start. While
  // a restored point is pending (set_resume, and its epoch not started), that point instead: the
  // consumer's position is then where the restored run resumes, not where the abandoned one
  // stopped.
  std::vector<std::uint8_t> save(std::int64_t epoch, std::int64_t returned, std::int64_t batches) const;
  // Checks a saved state against this pipeline. Throws sluice::Error(kInvalidArgument) for a state
  // of another pipeline, another version or damaged bytes.
  ResumePoint parse(std::span<const std::uint8_t> bytes) const;
  // Keeps a parsed point for the next start of its epoch.
  void set_resume(ResumePoint point) { resume_ = point; }
  // The first batch of `epoch`: the resume point's batch if it names this epoch, else 0. Any
  // pending resume point is used up.
  std::int64_t take_first_batch(std::int64_t epoch);
  // The epoch a pending restore resumes, or 0.
  std::int64_t resume_epoch() const { return resume_.epoch < 0 ? 0 : resume_.epoch; }

  // What decides which samples land where: the items, the order, the batching and the seeds.
  std::uint64_t fingerprint() const;

 private:
  std::vector<std::uint8_t> encode(ResumePoint point) const;

  const stages::ResolvedPipeline& plan_;
  ResumePoint resume_;
};

}  // namespace sluice::runtime
