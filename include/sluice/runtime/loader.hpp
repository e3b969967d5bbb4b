// Loader: a built pipeline, what Pipeline::build() returns. Iterate one epoch at a time:
//
//   sluice::Loader loader = pipeline.build({.threads = sluice::autotune});
//   for (sluice::Batch& b : loader.epoch(e)) step(b);
//
// Batches come in order (deterministic for a seed) unless BuildOptions::ordered is false. The
// runtime module defines it (src/runtime/); sluice/sluice.hpp includes this header.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sluice/core/device_id.hpp"
#include "sluice/core/dtype.hpp"
#include "sluice/core/shape.hpp"
#include "sluice/pipeline/batch.hpp"
#include "sluice/pipeline/pipeline.hpp"
#include "sluice/pipeline/stats.hpp"

namespace sluice {

class LoaderImpl;

// One output of a batch as its consumer receives it, after every stage (a to_device stage that
// normalises on the device included): what the C API's sluice_loader_info_t and Python's
// batch_shape, dtype and device report. Like DALI's output descriptions, one entry per output.
struct OutputDescription {
  std::string name;    // "data" (the images) or "labels"
  Shape shape;         // of a full batch; an epoch's last batch may be shorter in its first axis
  DType dtype = DType::kU8;
  std::string layout;  // one letter per axis: "NCHW" or "NHWC" for data, "N" for labels
  DeviceId device;     // where the output lies: host(), or the to_device stage's device
};

class Loader {
 public:
  class Iterator;
  struct Sentinel {};
  class EpochRange;

  explicit Loader(std::unique_ptr<LoaderImpl> impl);
  Loader(Loader&&) noexcept;
  Loader& operator=(Loader&&) noexcept;
  // Stops the workers. Batches still held stay valid until released (they share the loader's
  // slots), but iterators of this loader must not be advanced any more.
  ~Loader();

  EpochRange epoch(std::int64_t e);

  std::int64_t samples_per_epoch() const;  // this rank's, padding not counted
  // The same on every rank (docs/distributed.md). Once an epoch started, that epoch's: after a
  // restore at another world size the indices continue past the steps delivered before it.
  std::int64_t batches_per_epoch() const;
  // The batch's outputs: "data" first, then "labels".
  std::vector<OutputDescription> outputs() const;
  Shape batch_shape() const;  // outputs()[0].shape: a full batch's data as the consumer receives it
  DType dtype() const;        // outputs()[0].dtype
  Stats stats() const;

  // The data set as the source listed it (every item, before a shard takes its slice), as
  // torchvision's ImageFolder describes its own: item i's path ("shard.tar:member" for a tar
  // member) and label, and the class names, label i being class_names()[i] (the sorted class
  // folders, or the class names of shards labelled by name; empty where labels are numbers).
  std::int64_t dataset_size() const;
  std::string item_path(std::int64_t item) const;
  std::int32_t item_label(std::int64_t item) const;
  const std::vector<std::string>& class_names() const;

  // Resumable iteration. state() is where the whole job is, not this rank: the epoch, the global
  // steps delivered in it, the global batch (batch x world) and a fingerprint of the pipeline;
  // every rank at the same step saves the same bytes. Every order and random choice is a function
  // of (seed, epoch, position), so that is all a resume needs: after restore(state), the next
  // epoch(e) with the saved epoch delivers what the job had not delivered of it, without decoding
  // the rest; at the same world size exactly the batches the uninterrupted run would have. The
  // state may come from another world size with the same global batch (docs/distributed.md):
  // every remaining sample is then delivered once over the new ranks, in the uninterrupted run's
  // global steps when split by samples. Throws sluice::Error(kInvalidArgument) for a state from
  // another pipeline, a global batch this world size does not split (naming the sizes that
  // would), or a damaged one. Statistics and memory caches start afresh.
  // Between restore(state) and the next epoch's start, state() is the restored state (where the
  // next epoch resumes), not where the abandoned epoch stopped.
  std::vector<std::uint8_t> state() const;
  void restore(std::span<const std::uint8_t> state);
  // The epoch restore() resumes (the next one to iterate), or 0 without a restore.
  std::int64_t resume_epoch() const;

  // Cancellation, for a consumer that must stop while it waits for a batch (Ctrl-C, a shutdown,
  // a watchdog). cancel() may be called from any thread while the loader lives (not from a
  // signal handler: see set_wait_check): the consumer's wait in progress, or its next one if
  // none is, ends by throwing sluice::Error(kCancelled), and the epoch is abandoned (the iterator
  // is done; epoch(e) starts afresh). Every wait of the consumer wakes for it, including one for
  // a free slot while the consumer holds them all.
  void cancel();
  // While the consumer waits for a batch, `check` runs on the consumer's thread every `interval`;
  // when it returns true the wait ends as after cancel(). For a consumer that can only poll:
  // Python's signal handlers run when the waiting thread looks for them (the bindings check
  // every 50 ms), a command line's handler sets a flag. An empty `check` removes it.
  void set_wait_check(std::function<bool()> check, std::chrono::milliseconds interval);

 private:
  std::unique_ptr<LoaderImpl> impl_;
};

class Loader::Iterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = Batch;
  using difference_type = std::ptrdiff_t;

  Iterator() = default;
  Iterator(LoaderImpl* impl, std::int64_t epoch);

  Batch& operator*() { return current_; }
  Batch* operator->() { return &current_; }
  Iterator& operator++();  // releases the current batch (unless moved out) and waits for the next
  void operator++(int) { ++*this; }
  friend bool operator==(const Iterator& it, Sentinel) { return it.done_; }

 private:
  void fetch();

  LoaderImpl* impl_ = nullptr;
  std::int64_t epoch_ = 0;
  Batch current_;
  bool done_ = true;
};

class Loader::EpochRange {
 public:
  EpochRange(LoaderImpl* impl, std::int64_t epoch) : impl_(impl), epoch_(epoch) {}
  Iterator begin() { return Iterator(impl_, epoch_); }
  Sentinel end() { return {}; }

 private:
  LoaderImpl* impl_;
  std::int64_t epoch_;
};

}  // namespace sluice
