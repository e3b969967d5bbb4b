// The running pipeline: budget and caches, ring slots claimed for batches, samples submitted
// under the in-flight limit, the per-sample task with its error policies, the consumer's wait,
// autotuning, and the public Loader / Pipeline::build entry points.
#include "runtime/loader_impl.hpp"

#include <boost/lockfree/queue.hpp>
#include <chrono>
#include <cstring>

#include "sluice/core/error.hpp"
#include "sluice/core/log.hpp"
#include "sluice/core/rng.hpp"
#include "sluice/core/units.hpp"
#include "sluice/device/device.hpp"
#include "sluice/pipeline/pipeline.hpp"

namespace sluice {

namespace {
// A bad sample is replaced by a random one from the same epoch; this many bad replacements in a
// row mean the data set is unreadable, not noisy, and the run fails.
constexpr int kMaxReplacements = 64;
// The deepest prefetch the autotuner may choose, and so the most ring slots.
constexpr int kMaxPrefetch = 8;
constexpr int kMaxSlots = kMaxPrefetch + 2;
// How long a worker waits for room in the budget for a buffer its sample needs. Working memory
// is given back only by caches (asked before waiting) and retired batch slots, so a long wait
// rarely helps; the sample then fails with kOutOfBudget, saying what to raise.
constexpr std::chrono::milliseconds kBufferWait{2000};
constexpr std::chrono::milliseconds kTuningPeriod{250};

double busy_seconds(const std::vector<std::unique_ptr<stages::SampleProgram::Workspace>>& workspaces) {
  std::int64_t ns = 0;
  for (const auto& ws : workspaces) {
    for (const auto& b : ws->counters.busy_ns) ns += b.load(std::memory_order_relaxed);
  }
  return static_cast<double>(ns) * 1e-9;
}
}  // namespace

struct LoaderImpl::FreeSlots {
  explicit FreeSlots(std::size_t n) : queue(n) {}
  boost::lockfree::queue<int, boost::lockfree::fixed_sized<true>> queue;
};

LoaderImpl::LoaderImpl(stages::PipelinePlan plan)
    : budget_(plan.options.memory_budget), plan_(std::move(plan)), order_(plan_.order) {
  const BuildOptions& options = plan_.options;
  threads_ = options.threads == autotune ? runtime::Executor::available_cores() : options.threads;

  if (plan_.cache) {
    if (const auto* m = std::get_if<MemoryCache>(&plan_.cache->store)) {
      memory_cache_ = std::make_unique<stages::MemoryCacheStore>(static_cast<std::int64_t>(plan_.dataset.items.size()),
                                                                 m->max_bytes, budget_);
    } else {
      const auto& d = std::get<DiskCache>(plan_.cache->store);
      disk_cache_ = std::make_unique<stages::DiskCacheStore>(stages::DiskCacheOptions{
          .path = d.path, .max_bytes = d.max_bytes,
          .fingerprint = stages::SampleProgram::cache_fingerprint(plan_.program),
          .file_ops = options.file_ops,
          .max_entry_bytes = stages::SampleProgram::cache_entry_limit(plan_.program),
          .max_source_bytes = plan_.program.read.max_file_size});
    }
  }
  program_ = std::make_unique<stages::SampleProgram>(plan_.program,
                                                     stages::SampleCaches{memory_cache_.get(), disk_cache_.get()});
  sample_bytes_ = program_->sample_bytes();

  // Tuning: what the user fixed stays fixed; the rest starts small and is tuned when asked.
  const bool tuned = options.threads == autotune;
  const int min_prefetch = plan_.prefetch_set ? plan_.prefetch : 1;
  memory_plan_ = runtime::plan_memory(plan_, sample_bytes_, threads_, min_prefetch);
  if (options.memory_budget != 0 && memory_plan_.minimum() > options.memory_budget) {
    throw Error(ErrorCode::kOutOfBudget,
                "the pipeline needs at least " + memory_plan_.explain() + ", above the memory budget of " +
                    format_bytes(options.memory_budget) + ": raise the budget to " +
                    format_bytes(memory_plan_.minimum()) + " (" + std::to_string(memory_plan_.minimum()) +
                    " bytes), or lower the batch size, threads or prefetch depth");
  }
  order_reservation_ = *budget_.try_reserve(memory_plan_.index_bytes, MemoryUse::kShuffle);

  for (int i = 0; i < threads_; ++i) {
    auto ws = program_->make_workspace();
    ws->file.attach(budget_, MemoryUse::kReadBuffers, kBufferWait);
    ws->decoded.attach(budget_, MemoryUse::kDecodeBuffers, kBufferWait);
    ws->resized.attach(budget_, MemoryUse::kDecodeBuffers, kBufferWait);
    ws->scratch.attach(budget_, MemoryUse::kDecodeBuffers, kBufferWait);
    ws->decoder.attach(budget_, MemoryUse::kDecodeBuffers, kBufferWait);
    workspaces_.push_back(std::move(ws));
  }

  slots_.resize(kMaxSlots);
  free_slots_ = std::make_unique<FreeSlots>(static_cast<std::size_t>(kMaxSlots));
  // The autotuner starts from the fixed defaults (prefetch 2, 2 x threads in flight) when the
  // budget allows them, so tuning can only improve on what an untuned pipeline gets.
  const int start_prefetch = plan_.prefetch;
  const bool ring = plan_.to_device && (plan_.to_device->device.is_cuda() || plan_.to_device->options.stage_through_ring);
  if (ring) {
    prefetch_ = start_prefetch;  // the ring's slots are allocated once: its depth is fixed
    setup_device();
  } else {
    for (int i = 0; i < memory_plan_.min_slots; ++i) add_slot(Reclaim::kNo);
    prefetch_ = min_prefetch;
    while (prefetch_ < start_prefetch && add_slot(Reclaim::kNo)) prefetch_ = prefetch_ + 1;
  }

  const int fixed_in_flight = options.samples_in_flight;
  in_flight_ = fixed_in_flight > 0 ? fixed_in_flight : std::max(2 * threads_, plan_.batch_size);
  if (tuned) {
    autotuner_ = std::make_unique<runtime::Autotuner>(
        runtime::TuningLimits{.threads = threads_,
                              .min_in_flight = in_flight_.load(),
                              .max_in_flight = 4 * threads_,
                              .min_prefetch = min_prefetch,
                              .max_prefetch = plan_.prefetch_set ? plan_.prefetch : kMaxPrefetch,
                              .tune_in_flight = fixed_in_flight == 0,
                              .tune_prefetch = !plan_.prefetch_set && ring_ == nullptr},
        runtime::TuningSettings{in_flight_.load(), prefetch_.load()});
  }
  executor_ = std::make_unique<runtime::Executor>(threads_, &LoaderImpl::run_sample_entry, this);
}

LoaderImpl::~LoaderImpl() {
  generation_.fetch_add(1, std::memory_order_acq_rel);  // pending tasks skip their work,
  {
    std::lock_guard lock(submit_mutex_);                 // finishing ones submit nothing more,
    claimed_end_ = submitted_;
    stopping_ = true;
  }
  budget_.cancel();                                      // and nobody waits for memory
  executor_.reset();
}

bool LoaderImpl::add_slot(Reclaim reclaim) {
  if (live_slots_ >= kMaxSlots) return false;
  int index = 0;
  while (index < kMaxSlots && slots_[static_cast<std::size_t>(index)] != nullptr) ++index;
  if (index == kMaxSlots) return false;
  auto slot = std::make_unique<Slot>();
  auto reservation = budget_.try_reserve(memory_plan_.batch_bytes, MemoryUse::kBatches, reclaim);
  if (!reservation) return false;
  reservation->reset();  // the buffer reserves for itself; this only checked that it fits
  slot->data.attach(budget_, MemoryUse::kBatches, std::chrono::milliseconds(0));
  try {
    slot->data.reserve_exact(sample_bytes_ * static_cast<std::size_t>(plan_.batch_size));
  } catch (const Error&) {
    return false;  // another reservation took the room in between
  }
  slot->labels.resize(static_cast<std::size_t>(plan_.batch_size));
  slot->data_ptr = slot->data.data();
  slot->labels_ptr = slot->labels.data();
  slot->index = index;
  slots_[static_cast<std::size_t>(index)] = std::move(slot);
  ++live_slots_;
  free_slots_->queue.push(index);
  return true;
}

void LoaderImpl::setup_device() {
  const spec::ToDevice& to = *plan_.to_device;
  require_device(to.device);  // a clear error at build() when the device is not usable here
  const std::size_t data_bytes = sample_bytes_ * static_cast<std::size_t>(plan_.batch_size);
  // A ring slot: labels (rounded to 256 bytes), then the batch as the host assembles it; with
  // normalize_on_device the device slot also holds the normalised output after the u8 input.
  ring_labels_bytes_ = (sizeof(std::int32_t) * static_cast<std::size_t>(plan_.batch_size) + 255) / 256 * 256;
  const std::size_t host_bytes = ring_labels_bytes_ + data_bytes;
  std::size_t device_bytes = host_bytes;
  if (to.options.normalize_on_device) {
    device_normalizer_.setup(GpuNormalizeOptions{plan_.device_normalize.mean, plan_.device_normalize.std,
                                                 plan_.device_normalize.layout, plan_.device_normalize.dtype},
                             program_->channels());
    ring_output_offset_ = (host_bytes + 255) / 256 * 256;
    const Size2 out = program_->output_size();
    device_bytes = ring_output_offset_ + device_normalizer_.output_bytes(plan_.batch_size, out.height, out.width);
  }
  const int slots = prefetch_ + 2;
  ring_ = std::make_unique<TransferRing>(TransferRingOptions{.device = to.device,
                                                             .slots = slots,
                                                             .host_slot_bytes = host_bytes,
                                                             .device_slot_bytes = device_bytes,
                                                             .budget = &budget_});
  consumer_stream_ = std::make_unique<Stream>(Stream::wrap(to.device, to.options.stream));
  for (int i = 0; i < slots; ++i) {
    auto slot = std::make_unique<Slot>();
    const std::span<std::uint8_t> host = ring_->host_slot(i);
    slot->labels_ptr = reinterpret_cast<std::int32_t*>(host.data());
    slot->data_ptr = host.data() + ring_labels_bytes_;
    slot->index = i;
    slots_[static_cast<std::size_t>(i)] = std::move(slot);
    free_slots_->queue.push(i);
  }
  live_slots_ = slots;
}

void LoaderImpl::ship(int s) {
  const Slot& slot = *slots_[static_cast<std::size_t>(s)];
  const std::size_t bytes = ring_labels_bytes_ + sample_bytes_ * static_cast<std::size_t>(slot.size);
  try {
    if (plan_.to_device->options.normalize_on_device) {
      const Size2 out = program_->output_size();
      const DeviceNormalizeStep step{&device_normalizer_, ring_labels_bytes_, ring_output_offset_, slot.size,
                                     out.height, out.width};
      ring_->submit(s, bytes, &step);
    } else {
      ring_->submit(s, bytes);
    }
  } catch (...) {
    record_error(*slots_[static_cast<std::size_t>(s)], slot.batch * plan_.batch_size, std::current_exception());
  }
}

void LoaderImpl::describe_device_batch(int s, Batch& batch) {
  ring_->hand_over(s, *consumer_stream_);  // the consumer's stream waits for the copy; the host does not
  const Slot& slot = *slots_[static_cast<std::size_t>(s)];
  auto* base = static_cast<std::uint8_t*>(ring_->device_slot(s));
  const Shape sample = program_->sample_shape();
  TensorView data{base + ring_labels_bytes_, program_->dtype(), Shape{slot.size, sample[0], sample[1], sample[2]}};
  if (plan_.to_device->options.normalize_on_device) {
    const Size2 out = program_->output_size();
    const int c = program_->channels();
    const Shape shape = plan_.device_normalize.layout == Layout::kNCHW ? Shape{slot.size, c, out.height, out.width}
                                                                       : Shape{slot.size, out.height, out.width, c};
    data = TensorView{base + ring_output_offset_, plan_.device_normalize.dtype, shape};
  }
  batch.set_device(plan_.to_device->device, data, reinterpret_cast<const std::int32_t*>(base),
                   ring_->ready_event(s).native_handle());
}

std::int64_t LoaderImpl::batches_per_epoch() const {
  const std::int64_t n = order_.size();
  const std::int64_t b = plan_.batch_size;
  return plan_.drop_last ? n / b : (n + b - 1) / b;
}

Shape LoaderImpl::batch_shape() const {
  const Shape sample = program_->sample_shape();
  return Shape{plan_.batch_size, sample[0], sample[1], sample[2]};
}

void LoaderImpl::signal() {
  events_.fetch_add(1, std::memory_order_acq_rel);
  events_.notify_all();
}

void LoaderImpl::recycle(int slot) noexcept {
  // The device memory is free for reuse once the consumer's stream is done with it (an event,
  // not a host wait).
  if (ring_) ring_->release(slot, *consumer_stream_);
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
  // A restored state starts its epoch at the saved batch: nothing before it is read or decoded.
  const std::int64_t first = epoch == resume_epoch_ ? std::min(resume_batch_, batches_) : 0;
  resume_epoch_ = -1;
  next_issue_ = next_return_ = returned_ = first;
  {
    std::lock_guard lock(submit_mutex_);
    // running_ returns to 0 by itself as the last tasks finish.
    submitted_ = claimed_end_ = first * plan_.batch_size;
  }
  period_start_ = std::chrono::steady_clock::now();
  period_batches_ = 0;
  period_wait_ = 0;
  period_busy_start_ = busy_seconds(workspaces_);
  issue_ready_batches();
}

void LoaderImpl::abandon_epoch() {
  if (next_issue_ == returned_) return;  // nothing in flight
  generation_.fetch_add(1, std::memory_order_acq_rel);
  {
    // Claimed samples not yet submitted will never run: count them done.
    std::lock_guard lock(submit_mutex_);
    for (std::int64_t p = submitted_; p < claimed_end_; ++p) {
      finish_sample(*slots_[static_cast<std::size_t>(slot_of_batch_[static_cast<std::size_t>(p / plan_.batch_size)])]);
    }
    claimed_end_ = submitted_;
  }
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
  bool claimed = false;
  while (next_issue_ < batches_) {
    // Hold back batches beyond the prefetch depth (the consumer's batch and one completing do
    // not count), and give back slots the depth no longer needs.
    if (next_issue_ - returned_ >= prefetch_ + 1 || !free_slots_->queue.pop(s)) break;
    if (live_slots_ > prefetch_ + 2) {
      slots_[static_cast<std::size_t>(s)].reset();  // its buffer's reservation goes back to the budget
      --live_slots_;
      continue;
    }
    Slot& slot = *slots_[static_cast<std::size_t>(s)];
    if (ring_) ring_->begin_fill(s);  // the slot's previous copy has read its host buffer
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
    std::lock_guard lock(submit_mutex_);
    slot_of_batch_[static_cast<std::size_t>(b)] = s;
    claimed_end_ = first + size;
    claimed = true;
  }
  if (claimed) submit_samples();
}

void LoaderImpl::submit_samples() {
  std::lock_guard lock(submit_mutex_);
  const int limit = in_flight_.load(std::memory_order_relaxed);
  while (!stopping_ && running_.load(std::memory_order_relaxed) < limit && submitted_ < claimed_end_) {
    const std::int64_t p = submitted_++;
    running_.fetch_add(1, std::memory_order_relaxed);
    executor_->submit(slot_of_batch_[static_cast<std::size_t>(p / plan_.batch_size)], p);
  }
}

void LoaderImpl::run_sample_entry(void* self, std::int64_t slot, std::int64_t position) {
  auto* loader = static_cast<LoaderImpl*>(self);
  loader->run_sample(static_cast<int>(slot), position);
  // Refill in bursts: the lock is taken once a quarter of the in-flight limit has finished, not
  // per sample, which matters when a sample takes 20 us.
  const std::int64_t limit = loader->in_flight_.load(std::memory_order_relaxed);
  const std::int64_t running = loader->running_.fetch_sub(1, std::memory_order_acq_rel) - 1;
  if (running <= limit - std::max<std::int64_t>(1, limit / 4)) loader->submit_samples();
}

void LoaderImpl::run_sample(int s, std::int64_t position) {
  Slot& slot = *slots_[static_cast<std::size_t>(s)];
  if (slot.generation != generation_.load(std::memory_order_acquire)) {
    finish_sample(slot);  // abandoned epoch or shutdown
    return;
  }
  const std::int64_t index = position - slot.batch * plan_.batch_size;
  void* out = slot.data_ptr + static_cast<std::size_t>(index) * sample_bytes_;
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
  CounterRng replacement(plan_.skip_key, static_cast<std::uint64_t>(position), static_cast<std::uint32_t>(slot.epoch));
  for (std::uint32_t attempt = 0;; ++attempt) {
    try {
      program_->run(items[static_cast<std::size_t>(item)], stages::SampleKey{slot.epoch, item, attempt}, ws, out);
      slot.labels_ptr[index] = items[static_cast<std::size_t>(item)].label;
      break;
    } catch (const Error& e) {
      const bool skippable = plan_.options.on_error == OnError::kSkip && e.code() != ErrorCode::kInternal &&
                             e.code() != ErrorCode::kCancelled && e.code() != ErrorCode::kOutOfBudget;
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
    if (ring_ && !slot.error && slot.generation == generation_.load(std::memory_order_acquire)) {
      ship(slot.index);
    }
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

void LoaderImpl::apply(const runtime::TuningSettings& settings) {
  in_flight_.store(settings.in_flight, std::memory_order_relaxed);
  while (prefetch_ < settings.prefetch && live_slots_ < prefetch_ + 3) {
    if (!add_slot(Reclaim::kNo)) break;
    prefetch_ = prefetch_ + 1;
  }
  prefetch_ = std::min(prefetch_.load(), settings.prefetch);  // a shallower depth retires slots as they return
  submit_samples();
}

void LoaderImpl::tune() {
  if (!autotuner_) return;
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - period_start_).count();
  if (seconds < std::chrono::duration<double>(kTuningPeriod).count()) return;
  const double busy = busy_seconds(workspaces_);
  const runtime::TuningSample sample{
      .seconds = seconds,
      .batches = period_batches_,
      .consumer_wait_seconds = period_wait_,
      .worker_busy_seconds = busy - period_busy_start_,
      .prefetch_can_grow = live_slots_ < kMaxSlots && budget_.available() >= memory_plan_.batch_bytes,
  };
  std::string why;
  const runtime::TuningSettings before = autotuner_->settings();
  const runtime::TuningSettings after = autotuner_->update(sample, why);
  if (!(after == before)) {
    apply(after);
    if (log_enabled(LogLevel::kDebug)) log(LogLevel::kDebug, "autotune: " + why);
  }
  period_start_ = now;
  period_batches_ = 0;
  period_wait_ = 0;
  period_busy_start_ = busy;
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
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
  consumer_wait_seconds_ += waited;
  period_wait_ += waited;
  ++period_batches_;

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
  tune();
  const Shape sample = program_->sample_shape();
  TensorView view{slot.data_ptr, program_->dtype(), Shape{slot.size, sample[0], sample[1], sample[2]}};
  out = Batch(view, std::span<const std::int32_t>(slot.labels_ptr, static_cast<std::size_t>(slot.size)),
              slot.epoch, slot.batch, found, this);
  if (ring_) describe_device_batch(found, out);
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
  stats.memory_budget = budget_.limit();
  stats.memory_used = budget_.used();
  stats.memory_peak = budget_.peak();
  for (int u = 0; u < static_cast<int>(MemoryUse::kCount); ++u) {
    const auto use = static_cast<MemoryUse>(u);
    stats.memory.push_back(MemoryStats{std::string(to_string(use)), budget_.used(use), budget_.peak(use)});
  }
  if (memory_cache_) {
    const auto c = memory_cache_->stats();
    stats.cache = CacheStats{"memory", c.hits, c.misses, c.entries, c.bytes, c.evicted, {}};
  }
  else if (disk_cache_) {
    const auto c = disk_cache_->stats();
    stats.cache = CacheStats{"disk", c.hits, c.misses, c.entries, c.bytes, c.dropped_corrupt, c.note};
  }
  stats.tuning = TuningStats{in_flight_.load(), prefetch_.load(), autotuner_ != nullptr,
                             autotuner_ ? autotuner_->decisions() : 0};
  std::lock_guard lock(skip_mutex_);
  stats.skipped = skipped_;
  stats.skipped_samples = skipped_samples_;
  return stats;
}

// ---- resumable iteration ---------------------------------------------------------------------

namespace {
constexpr std::uint32_t kStateMagic = 0x54534c53;  // "SLST"
constexpr std::uint32_t kStateVersion = 1;

struct SavedState {
  std::uint32_t magic;
  std::uint32_t version;
  std::uint64_t fingerprint;
  std::int64_t epoch;
  std::int64_t batch;
  std::uint64_t check;  // of the fields above
};

std::uint64_t check_of(const SavedState& s) {
  std::uint64_t h = derive_key(s.magic ^ (std::uint64_t{s.version} << 32), s.fingerprint);
  h = derive_key(h, static_cast<std::uint64_t>(s.epoch));
  return derive_key(h, static_cast<std::uint64_t>(s.batch));
}
}  // namespace

std::uint64_t LoaderImpl::fingerprint() const {
  // What decides which samples land where: the items, the order, the batching and the seeds.
  std::uint64_t h = derive_key(plan_.dataset.items.size(), 0x7374617465);
  for (const Item& item : plan_.dataset.items) {
    for (const char c : item.path) h = h * 1099511628211ull ^ static_cast<unsigned char>(c);
    h = derive_key(h, static_cast<std::uint64_t>(item.label));
  }
  const auto mix = [&h](std::uint64_t v) { h = derive_key(h, v); };
  mix(static_cast<std::uint64_t>(plan_.batch_size));
  mix(plan_.drop_last ? 1 : 0);
  mix(static_cast<std::uint64_t>(plan_.order.shard_rank) << 32 | static_cast<std::uint32_t>(plan_.order.shard_world));
  mix(plan_.order.file_seed.value_or(~0ull));
  mix(static_cast<std::uint64_t>(plan_.order.shuffle_buffer));
  mix(plan_.order.shuffle_seed);
  mix(plan_.options.seed);
  mix(static_cast<std::uint64_t>(plan_.program.output.width) << 32 | static_cast<std::uint32_t>(plan_.program.output.height));
  return h;
}

std::vector<std::uint8_t> LoaderImpl::state() const {
  SavedState s{kStateMagic, kStateVersion, fingerprint(), 0, 0, 0};
  if (epoch_ >= 0) {
    // Past the last batch handed out; a finished epoch resumes at the next one's start.
    s.epoch = returned_ >= batches_ ? epoch_ + 1 : epoch_;
    s.batch = returned_ >= batches_ ? 0 : returned_;
  }
  s.check = check_of(s);
  std::vector<std::uint8_t> bytes(sizeof s);
  std::memcpy(bytes.data(), &s, sizeof s);
  return bytes;
}

void LoaderImpl::restore(std::span<const std::uint8_t> bytes) {
  SavedState s{};
  if (bytes.size() != sizeof s) {
    throw Error(ErrorCode::kInvalidArgument, "restore: a loader state is " + std::to_string(sizeof s) +
                                                 " bytes, got " + std::to_string(bytes.size()));
  }
  std::memcpy(&s, bytes.data(), sizeof s);
  if (s.magic != kStateMagic || s.check != check_of(s)) {
    throw Error(ErrorCode::kInvalidArgument, "restore: not a sluice loader state, or a damaged one");
  }
  if (s.version != kStateVersion) {
    throw Error(ErrorCode::kInvalidArgument, "restore: state version " + std::to_string(s.version) +
                                                 ", this sluice reads version " + std::to_string(kStateVersion));
  }
  if (s.fingerprint != fingerprint()) {
    throw Error(ErrorCode::kInvalidArgument,
                "restore: the state comes from a different pipeline (items, batching, order or seeds differ)");
  }
  abandon_epoch();
  resume_epoch_ = s.epoch;
  resume_batch_ = s.batch;
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
std::vector<std::uint8_t> Loader::state() const { return impl_->state(); }
void Loader::restore(std::span<const std::uint8_t> state) { impl_->restore(state); }
std::int64_t Loader::resume_epoch() const { return impl_->resume_epoch(); }

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
