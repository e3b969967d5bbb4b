// LoaderBatches: a sluice Loader as the training core's BatchSource, so an EpochRunner
// (sluice/train/epoch_runner.hpp) trains on a pipeline's batches. The training core may not
// include the pipeline or the runtime, and they may not include it: this adapter sits on top of
// both, as the umbrella header does, for the command line, the examples and the bindings alike.
//
// It holds one batch at a time, the one next() returned, and gives its slot back when asked for
// the next or when the epoch ends: the loader keeps producing ahead meanwhile. A batch the
// pipeline delivered to a device (to_device) is handed over there, with its ready event.
//
// ShortBatch::kSkip trains on full batches only, as batch(n, {.drop_last = true}) does, from a
// pipeline that still produces its short last batch: every sample of the epoch is read, which a
// memory cache of the whole data set needs to hold every item after the first epoch (a training
// job under one limit, sluice/train/job_plan.hpp, builds its training pipeline so).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>

#include "sluice/core/device_id.hpp"
#include "sluice/pipeline/batch.hpp"
#include "sluice/pipeline/stats.hpp"
#include "sluice/runtime/loader.hpp"
#include "sluice/train/epoch_runner.hpp"

namespace sluice {

// What LoaderBatches does with an epoch's short last batch.
enum class ShortBatch : std::uint8_t { kDeliver, kSkip };

class LoaderBatches final : public train::BatchSource {
 public:
  // The loader must outlive the adapter.
  explicit LoaderBatches(Loader& loader, ShortBatch short_batch = ShortBatch::kDeliver)
      : loader_(loader), short_batch_(short_batch) {}

  std::int64_t batches_per_epoch() const override {
    if (short_batch_ == ShortBatch::kDeliver) return loader_.batches_per_epoch();
    return loader_.samples_per_epoch() / loader_.batch_shape()[0];
  }

  void start_epoch(std::int64_t epoch) override {
    end_epoch();
    range_.emplace(loader_.epoch(epoch));
  }

  const train::TrainBatch* next() override {
    if (!range_) return nullptr;
    // The first call starts the iteration (which waits for the first batch), the later ones
    // give the previous batch back and wait for the next; past the end, nothing moves.
    if (!it_) {
      it_.emplace(range_->begin());
    } else if (!(*it_ == Loader::Sentinel{})) {
      ++*it_;
    }
    if (*it_ == Loader::Sentinel{}) return nullptr;
    if (short_batch_ == ShortBatch::kSkip && (**it_).size() < loader_.batch_shape()[0]) {
      ++*it_;  // the epoch's short last batch: read, not trained on
      if (*it_ == Loader::Sentinel{}) return nullptr;
    }
    const Batch& b = **it_;
    if (b.on_device()) {
      current_ = {.data = b.device_data(),
                  .labels = std::span<const std::int32_t>(b.device_labels(), static_cast<std::size_t>(b.size())),
                  .where = b.device(),
                  .ready_event = b.ready_event()};
    } else {
      current_ = {.data = b.data(), .labels = b.labels(), .where = host()};
    }
    return &current_;
  }

  void end_epoch() override {
    it_.reset();
    range_.reset();
  }

  // The loader's stages' busy time, its workers, its accounted bytes split into pageable and
  // page-locked (the "pinned" use) memory, and its memory cache's counters.
  train::InputStats input_stats() const override {
    const Stats st = loader_.stats();
    train::InputStats in{.workers = st.threads};
    if (st.cache.kind == "memory") {
      in.cache_hits = st.cache.hits;
      in.cache_misses = st.cache.misses;
      in.cache_bytes = st.cache.bytes;
      in.cache_dropped = st.cache.dropped;
    }
    for (const StageStats& stage : st.stages) in.busy_seconds += stage.busy_seconds;
    for (const MemoryStats& m : st.memory) {
      if (m.use == "pinned") in.pinned_bytes += m.used;
    }
    in.host_bytes = st.memory_used - std::min(st.memory_used, in.pinned_bytes);
    return in;
  }

 private:
  Loader& loader_;
  ShortBatch short_batch_;
  std::optional<Loader::EpochRange> range_;
  std::optional<Loader::Iterator> it_;
  train::TrainBatch current_;
};

}  // namespace sluice
