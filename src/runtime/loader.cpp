// The running pipeline: issuing batches into ring slots, the per-sample task, the consumer's
// wait, error policies, and the public Loader / Pipeline::build entry points.
#include "runtime/loader_impl.hpp"

#include <boost/lockfree/queue.hpp>
#include <chrono>

#include "sluice/core/error.hpp"
#include "sluice/core/rng.hpp"
#include "sluice/core/units.hpp"
#include "sluice/pipeline/pipeline.hpp"

namespace sluice {

namespace {
// A bad sample is replaced by a random one from the same epoch; this many bad replacements in a
// row mean the data set is unreadable, not noisy, and the run fails.
constexpr int kMaxReplacements = 64;
}  // namespace

struct LoaderImpl::FreeSlots {
  explicit FreeSlots(std::size_t n) : queue(n) {}
  boost::lockfree::queue<int, boost::lockfree::fixed_sized<true>> queue;
};

LoaderImpl::LoaderImpl(stages::PipelinePlan plan)
    : plan_(std::move(plan)), program_(*plan_.program), order_(plan_.order) {
  sample_bytes_ = program_.sample_bytes();
  threads_ = plan_.options.threads == autotune ? runtime::Executor::available_cores()
                                               : plan_.options.threads;
  const int slot_count = plan_.prefetch + 2;  // the consumer's, one completing, `prefetch` ahead
  const std::size_t batch_bytes = sample_bytes_ * static_cast<std::size_t>(plan_.batch_size);
  if (plan_.options.memory_budget != 0) {
    const std::uint64_t ring = static_cast<std::uint64_t>(batch_bytes) * slot_count;
    if (ring > plan_.options.memory_budget) {
      throw Error(ErrorCode::kOutOfBudget,
                  "the batch ring needs " + format_bytes(ring) + " (" + std::to_string(slot_count) +
                      " batches of " + format_bytes(batch_bytes) + "), above the memory budget of " +
                      format_bytes(plan_.options.memory_budget) +
                      ": raise the budget, or lower the batch size or prefetch depth");
    }
  }
  free_slots_ = std::make_unique<FreeSlots>(static_cast<std::size_t>(slot_count));
  for (int i = 0; i < slot_count; ++i) {
    auto slot = std::make_unique<Slot>();
    slot->data.reserve(batch_bytes);
    slot->labels.resize(static_cast<std::size_t>(plan_.batch_size));
    slots_.push_back(std::move(slot));
    free_slots_->queue.push(i);
  }
  executor_ = std::make_unique<runtime::Executor>(threads_, &LoaderImpl::run_sample_entry, this);
  for (int i = 0; i < threads_; ++i) workspaces_.push_back(program_.make_workspace());
}

LoaderImpl::~LoaderImpl() {
  generation_.fetch_add(1, std::memory_order_acq_rel);  // pending tasks skip their work
  executor_.reset();
}

std::int64_t LoaderImpl::batches_per_epoch() const {
  const std::int64_t n = order_.size();
  const std::int64_t b = plan_.batch_size;
  return plan_.drop_last ? n / b : (n + b - 1) / b;
}

Shape LoaderImpl::batch_shape() const {
  const Shape sample = program_.sample_shape();
  return Shape{plan_.batch_size, sample[0], sample[1], sample[2]};
}

void LoaderImpl::signal() {
  events_.fetch_add(1, std::memory_order_acq_rel);
  events_.notify_all();
}

void LoaderImpl::recycle(int slot) noexcept {
  slots_[static_cast<std::size_t>(slot)]->state.store(kFree, std::memory_order_release);
  free_slots_->queue.push(slot);
  signal();
}

void LoaderImpl::start_epoch(std::int64_t epoch) {
  if (epoch < 0) throw Error(ErrorCode::kInvalidArgument, "epoch must be >= 0, got " + std::to_string(epoch));
  abandon_epoch();
  epoch_ = epoch;
  order_.compute(epoch, epoch_items_);
  batches_ = batches_per_epoch();
  slot_of_batch_.assign(static_cast<std::size_t>(batches_), -1);
  next_issue_ = next_return_ = returned_ = 0;
  issue_ready_batches();
}

void LoaderImpl::abandon_epoch() {
  if (next_issue_ == returned_) return;  // nothing in flight
  generation_.fetch_add(1, std::memory_order_acq_rel);
  for (std::int64_t b = 0; b < next_issue_; ++b) {
    const int s = slot_of_batch_[static_cast<std::size_t>(b)];
    if (s < 0) continue;
    Slot& slot = *slots_[static_cast<std::size_t>(s)];
    // Stale tasks skip their work, so this wait is short.
    for (auto st = slot.state.load(std::memory_order_acquire); st == kFilling;
         st = slot.state.load(std::memory_order_acquire)) {
      slot.state.wait(st, std::memory_order_acquire);
    }
    if (slot.state.load(std::memory_order_acquire) == kReady) recycle(s);
    slot_of_batch_[static_cast<std::size_t>(b)] = -1;
  }
  next_issue_ = returned_ = batches_;
}

void LoaderImpl::issue_ready_batches() {
  int s = 0;
  while (next_issue_ < batches_ && free_slots_->queue.pop(s)) {
    Slot& slot = *slots_[static_cast<std::size_t>(s)];
    const std::int64_t b = next_issue_++;
    const std::int64_t first = b * plan_.batch_size;
    const int size = static_cast<int>(std::min<std::int64_t>(plan_.batch_size, order_.size() - first));
    slot.epoch = epoch_;
    slot.batch = b;
    slot.size = size;
    slot.generation = generation_.load(std::memory_order_acquire);
    slot.error = nullptr;
    slot.remaining.store(size, std::memory_order_relaxed);
    slot.state.store(kFilling, std::memory_order_release);
    slot_of_batch_[static_cast<std::size_t>(b)] = s;
    for (std::int64_t p = first; p < first + size; ++p) executor_->submit(s, p);
  }
}

void LoaderImpl::run_sample_entry(void* self, std::int64_t slot, std::int64_t position) {
  static_cast<LoaderImpl*>(self)->run_sample(static_cast<int>(slot), position);
}

void LoaderImpl::run_sample(int s, std::int64_t position) {
  Slot& slot = *slots_[static_cast<std::size_t>(s)];
  if (slot.generation != generation_.load(std::memory_order_acquire)) {
    finish_sample(slot);  // abandoned epoch or shutdown
    return;
  }
  const std::int64_t index = position - slot.batch * plan_.batch_size;
  void* out = slot.data.data() + static_cast<std::size_t>(index) * sample_bytes_;
  // oneTBB gives a one-thread arena two slots and its worker may use either; both map to the one
  // workspace (at concurrency 1 they never run at once), so its buffers stay warm.
  const int worker = runtime::Executor::current_worker() % threads_;
  if (worker < 0 || worker >= static_cast<int>(workspaces_.size())) {
    record_error(slot, position, std::make_exception_ptr(Error(ErrorCode::kInternal,
        "sample task ran on worker slot " + std::to_string(worker) + " outside the pool")));
    finish_sample(slot);
    return;
  }
  auto& ws = *workspaces_[static_cast<std::size_t>(worker)];
  const auto& items = plan_.dataset.items;

  std::int64_t item = epoch_items_[static_cast<std::size_t>(position)];
  CounterRng replacement(plan_.skip_key, static_cast<std::uint64_t>(position),
                         static_cast<std::uint32_t>(slot.epoch));
  for (std::uint32_t attempt = 0;; ++attempt) {
    try {
      program_.run(items[static_cast<std::size_t>(item)],
                   stages::SampleKey{slot.epoch, item, attempt}, ws, out);
      slot.labels[static_cast<std::size_t>(index)] = items[static_cast<std::size_t>(item)].label;
      break;
    } catch (const Error& e) {
      const bool skippable = plan_.options.on_error == OnError::kSkip &&
                             e.code() != ErrorCode::kInternal && e.code() != ErrorCode::kCancelled;
      if (!skippable) {
        record_error(slot, position, std::current_exception());
        break;
      }
      record_skip(e.path(), e.cause());
      if (attempt + 1 >= static_cast<std::uint32_t>(kMaxReplacements)) {
        record_error(slot, position,
                     std::make_exception_ptr(Error(
                         ErrorCode::kCorruptData,
                         std::to_string(kMaxReplacements) +
                             " replacements in a row were bad too: the data set looks unreadable, "
                             "check it with `sluice inspect`; last error: " + e.what())));
        break;
      }
      // Any other position of the epoch, never this one (whose item just failed).
      std::uint64_t other = replacement.below(epoch_items_.size() > 1 ? epoch_items_.size() - 1 : 1);
      if (epoch_items_.size() > 1 && other >= static_cast<std::uint64_t>(position)) ++other;
      item = epoch_items_[static_cast<std::size_t>(other)];
    } catch (...) {
      record_error(slot, position, std::current_exception());
      break;
    }
  }
  samples_done_.fetch_add(1, std::memory_order_relaxed);
  finish_sample(slot);
}

void LoaderImpl::finish_sample(Slot& slot) {
  if (slot.remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    slot.state.store(kReady, std::memory_order_release);
    slot.state.notify_all();
    signal();
  }
}

void LoaderImpl::record_error(Slot& slot, std::int64_t position, std::exception_ptr error) {
  std::lock_guard lock(slot.error_mutex);
  if (!slot.error || position < slot.error_position) {  // the first in order, whatever the timing
    slot.error = std::move(error);
    slot.error_position = position;
  }
}

void LoaderImpl::record_skip(const std::string& path, const std::string& cause) {
  std::lock_guard lock(skip_mutex_);
  ++skipped_;
  if (skipped_paths_.insert(path).second) skipped_samples_.push_back(SkippedSample{path, cause});
}

bool LoaderImpl::next(Batch& out) {
  if (epoch_ < 0) throw Error(ErrorCode::kInvalidArgument, "call epoch(e) before iterating");
  if (returned_ >= batches_) return false;
  const auto wait_start = std::chrono::steady_clock::now();
  int found = -1;
  while (true) {
    const std::uint32_t seen = events_.load(std::memory_order_acquire);
    issue_ready_batches();
    if (plan_.options.ordered) {
      const int s = slot_of_batch_[static_cast<std::size_t>(next_return_)];
      if (s >= 0 && slots_[static_cast<std::size_t>(s)]->state.load(std::memory_order_acquire) == kReady) {
        found = s;
        ++next_return_;
      }
    } else {
      for (std::int64_t b = next_return_; b < next_issue_ && found < 0; ++b) {
        const int s = slot_of_batch_[static_cast<std::size_t>(b)];
        if (s >= 0 && slots_[static_cast<std::size_t>(s)]->state.load(std::memory_order_acquire) == kReady) {
          found = s;
          slot_of_batch_[static_cast<std::size_t>(b)] = -1;
        }
      }
      while (next_return_ < next_issue_ && slot_of_batch_[static_cast<std::size_t>(next_return_)] < 0) {
        ++next_return_;
      }
    }
    if (found >= 0) break;
    events_.wait(seen, std::memory_order_acquire);
  }
  consumer_wait_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();

  Slot& slot = *slots_[static_cast<std::size_t>(found)];
  ++returned_;
  if (plan_.options.ordered) slot_of_batch_[static_cast<std::size_t>(slot.batch)] = -1;
  if (slot.error) {
    std::exception_ptr error = slot.error;
    recycle(found);
    abandon_epoch();
    std::rethrow_exception(error);
  }
  slot.state.store(kHeld, std::memory_order_release);
  ++batches_done_;
  const Shape sample = program_.sample_shape();
  TensorView view{slot.data.data(), program_.dtype(), Shape{slot.size, sample[0], sample[1], sample[2]}};
  out = Batch(view, std::span<const std::int32_t>(slot.labels.data(), static_cast<std::size_t>(slot.size)),
              slot.epoch, slot.batch, found, this);
  return true;
}

Stats LoaderImpl::stats() const {
  Stats stats;
  for (int stage = 0; stage < stages::StageCounters::kStageCount; ++stage) {
    StageStats s;
    s.name = stages::StageCounters::name(stage);
    for (const auto& ws : workspaces_) {
      s.busy_seconds += static_cast<double>(ws->counters.busy_ns[stage].load(std::memory_order_relaxed)) * 1e-9;
      s.items += ws->counters.items[stage].load(std::memory_order_relaxed);
      s.bytes += ws->counters.bytes[stage].load(std::memory_order_relaxed);
    }
    stats.stages.push_back(std::move(s));
  }
  stats.samples = samples_done_.load(std::memory_order_relaxed);
  stats.batches = batches_done_;
  stats.consumer_wait_seconds = consumer_wait_seconds_;
  stats.threads = threads_;
  std::lock_guard lock(skip_mutex_);
  stats.skipped = skipped_;
  stats.skipped_samples = skipped_samples_;
  return stats;
}

// ---- public entry points -------------------------------------------------------------------

Loader Pipeline::build(const BuildOptions& options) const {
  return Loader(std::make_unique<LoaderImpl>(stages::plan_pipeline(spec_, options)));
}

Loader::Loader(std::unique_ptr<LoaderImpl> impl) : impl_(std::move(impl)) {}
Loader::Loader(Loader&&) noexcept = default;
Loader& Loader::operator=(Loader&&) noexcept = default;
Loader::~Loader() = default;

Loader::EpochRange Loader::epoch(std::int64_t e) { return EpochRange(impl_.get(), e); }
std::int64_t Loader::samples_per_epoch() const { return impl_->samples_per_epoch(); }
std::int64_t Loader::batches_per_epoch() const { return impl_->batches_per_epoch(); }
Shape Loader::batch_shape() const { return impl_->batch_shape(); }
DType Loader::dtype() const { return impl_->dtype(); }
Stats Loader::stats() const { return impl_->stats(); }

Loader::Iterator::Iterator(LoaderImpl* impl, std::int64_t epoch) : impl_(impl), epoch_(epoch) {
  impl_->start_epoch(epoch_);
  done_ = false;
  fetch();
}

Loader::Iterator& Loader::Iterator::operator++() {
  current_.release();
  fetch();
  return *this;
}

void Loader::Iterator::fetch() {
  try {
    done_ = !impl_->next(current_);
  } catch (...) {
    done_ = true;
    throw;
  }
}

}  // namespace sluice
