// LoaderImpl, composed: it builds the parts, moves each batch through them (issue, samples on
// the workers, ship, hand-out, recycle), and decides what a part's failure means.
#include "runtime/loader_impl.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>

#include "runtime/batch_access.hpp"
#include "stages/remote/remote_stats.hpp"
#include "sluice/core/error.hpp"
#include "sluice/detail/core/log.hpp"
#include "sluice/core/units.hpp"

namespace sluice {

using runtime::BatchSlot;

namespace {

// fork() copies only the thread that called it: in a child of a process whose loaders had
// started workers, the pool's threads (oneTBB's included) are gone while their state says they
// exist, so building or iterating a loader there would wait forever. A child that calls into
// sluice fails at once instead, saying what to do; a child of a process that never built a loader
// works, since nothing was started before the fork.
std::atomic<bool> g_workers_started{false};
std::atomic<bool> g_forked_after_workers{false};

void mark_forked_child() {
  if (g_workers_started.load(std::memory_order_relaxed)) g_forked_after_workers.store(true, std::memory_order_relaxed);
}

void note_workers_started() {
  static std::once_flag registered;
  std::call_once(registered, [] { ::pthread_atfork(nullptr, nullptr, mark_forked_child); });
  g_workers_started.store(true, std::memory_order_relaxed);
}

void refuse_in_forked_child() {
  if (!g_forked_after_workers.load(std::memory_order_relaxed)) return;
  throw Error(ErrorCode::kInvalidArgument,
              "this process was forked from one whose sluice loaders had started worker threads, which do not "
              "survive fork(): build and iterate loaders in a process started with the 'spawn' start method "
              "(multiprocessing.set_start_method(\"spawn\"), DataLoader(multiprocessing_context=\"spawn\")), "
              "or fork before the first loader is built");
}

bool forked_after_workers() { return g_forked_after_workers.load(std::memory_order_relaxed); }

}  // namespace

LoaderImpl::LoaderImpl(stages::ResolvedPipeline plan)
    : shared_(std::make_shared<runtime::SharedSlots>(
          std::make_shared<MemoryBudget>(plan.options.memory_budget, plan.options.job_budget))),
      plan_(std::move(plan)),
      order_(plan_.order),
      state_(plan_) {
  refuse_in_forked_child();
  note_workers_started();
  const BuildOptions& options = plan_.options;
  threads_ = options.threads == autotune ? runtime::Executor::available_cores() : options.threads;
  create_caches();
  program_ = std::make_unique<stages::SampleProgram>(plan_.program,
                                                     stages::SampleCaches{memory_cache_.get(), disk_cache_.get()});
  tuning_ = std::make_unique<runtime::LoaderTuning>(runtime::TuningInputs{
      .threads = threads_,
      .batch_size = plan_.batch_size,
      .fixed_in_flight = options.samples_in_flight,
      .autotune = options.threads == autotune,
      .prefetch = plan_.prefetch,
      .prefetch_set = plan_.prefetch_set,
      .fixed_depth = runtime::DeviceDelivery::wanted(plan_)});
  memory_plan_ = runtime::plan_memory(plan_, program_->sample_bytes(), threads_, tuning_->min_prefetch());
  check_budget();
  order_reservation_ = *budget().try_reserve(memory_plan_.index_bytes, MemoryUse::kShuffle);
  items_reservation_ = *budget().try_reserve(memory_plan_.items_bytes, MemoryUse::kItems);
  remote_reservation_ = *budget().try_reserve(memory_plan_.remote_bytes, MemoryUse::kRemote);
  resume_reservation_ = *budget().try_reserve(memory_plan_.resume_bytes, MemoryUse::kDecodeBuffers);
  task_ = std::make_unique<runtime::SampleTask>(
      *program_, plan_.dataset.items, budget(),
      runtime::SampleTaskOptions{.on_error = options.on_error, .skip_key = plan_.skip_key, .threads = threads_,
                                 .share = memory_plan_.share});
  create_slots();
  submitter_ = std::make_unique<runtime::SampleSubmitter>(tuning_->initial_in_flight());
  // After the slots: workers go where the pinned ring's pages are (a node only on a multi-node
  // machine with a device attached): they write the batches there, and the DMA engine reads them
  // locally.
  const int numa_node = shared_->device ? shared_->device->numa_node() : -1;
  executor_ = std::make_unique<runtime::Executor>(threads_, &LoaderImpl::run_sample_entry, this,
                                                  runtime::WorkerPlacement{.numa_node = numa_node});
  submitter_->attach(*executor_);
  fetch_ahead(0, {});
}

LoaderImpl::~LoaderImpl() {
  if (forked_after_workers()) {
    // The parent's loader, copied into a forked child: its workers are not in this process, so
    // joining them would never return. What it holds is left to the process's exit.
    (void)executor_.release();
    return;
  }
  ring().bump_generation();  // pending tasks skip their work,
  submitter_->stop();        // finishing ones submit nothing more,
  budget().cancel();         // and nobody waits for memory
  if (plan_.dataset.fetcher) plan_.dataset.fetcher->stop();  // nor for a remote shard's bytes
  executor_.reset();
}

void LoaderImpl::create_caches() {
  if (!plan_.cache) return;
  if (const auto* m = std::get_if<MemoryCache>(&plan_.cache->store)) {
    memory_cache_ = std::make_unique<stages::MemoryCacheStore>(plan_.dataset.items.size(), m->max_bytes, budget());
  } else {
    const auto& d = std::get<DiskCache>(plan_.cache->store);
    disk_cache_ = std::make_unique<stages::DiskCacheStore>(stages::DiskCacheOptions{
        .path = d.path, .max_bytes = d.max_bytes,
        .fingerprint = stages::SampleProgram::cache_fingerprint(plan_.program),
        .file_ops = plan_.program.file_ops,
        .max_entry_bytes = stages::SampleProgram::cache_entry_limit(plan_.program),
        .max_source_bytes = plan_.program.read.max_file_size});
  }
}

void LoaderImpl::check_budget() const {
  if (plan_.options.job_budget) {
    // Nothing is reserved yet: what the part may take is what the job has left (or its own cap).
    const std::uint64_t room = shared_->budget->available();
    if (memory_plan_.minimum() > room) {
      throw Error(ErrorCode::kOutOfBudget,
                  "the pipeline needs at least " + memory_plan_.explain() + ", above the " + format_bytes(room) +
                      " its job's memory budget has left (" + format_bytes(plan_.options.job_budget->used()) +
                      " of " + format_bytes(plan_.options.job_budget->limit()) +
                      " held by the rest of the job): raise the job's limit by " +
                      format_bytes(memory_plan_.minimum() - room) +
                      ", or lower the batch size, threads or prefetch depth");
    }
    return;
  }
  const std::uint64_t limit = plan_.options.memory_budget;
  if (limit != 0 && memory_plan_.minimum() > limit) {
    throw Error(ErrorCode::kOutOfBudget,
                "the pipeline needs at least " + memory_plan_.explain() + ", above the memory budget of " +
                    format_bytes(limit) + ": raise the budget to " + format_bytes(memory_plan_.minimum()) + " (" +
                    std::to_string(memory_plan_.minimum()) + " bytes), or lower the batch size, threads or prefetch depth");
  }
}

void LoaderImpl::create_slots() {
  shared_->ring = std::make_unique<runtime::BatchRing>(
      runtime::BatchRingOptions{.batch_size = plan_.batch_size,
                                .sample_bytes = program_->sample_bytes(),
                                .mix_bytes = mix_classes() == 0 ? 0
                                                                 : stages::batch_mix_slot_bytes(plan_.batch_size, mix_classes(),
                                                                                                program_->sample_bytes()),
                                .slot_reservation = memory_plan_.batch_bytes,
                                .ordered = plan_.options.ordered},
      budget());
  if (runtime::DeviceDelivery::wanted(plan_)) {
    // The transfer ring's slots are allocated once: its depth is fixed.
    const int prefetch = std::min(tuning_->start_prefetch(), runtime::kMaxPrefetch);
    shared_->device = std::make_unique<runtime::DeviceDelivery>(plan_, *program_, prefetch + 2, budget(),
                                                                plan_.options.device_budget.get());
    runtime::DeviceDelivery& device = *shared_->device;
    for (int i = 0; i < device.slots(); ++i) {
      ring().add_external_slot(device.host_data(i), device.host_labels(i), device.host_mix(i));
    }
    tuning_->start(prefetch);
    return;
  }
  // The smallest ring the memory plan counted, then as deep as the start depth when the budget
  // allows it (the autotuner may go deeper later).
  for (int i = 0; i < memory_plan_.min_slots; ++i) ring().add_slot(Reclaim::kNo);
  int prefetch = tuning_->min_prefetch();
  while (prefetch < tuning_->start_prefetch() && ring().add_slot(Reclaim::kNo)) ++prefetch;
  tuning_->start(prefetch);
}

std::int64_t LoaderImpl::batches_per_epoch() const {
  return ring().epoch_started() ? ring().batches() : order_.batches();
}

Shape LoaderImpl::batch_shape() const {
  const Shape sample = program_->sample_shape();
  return Shape{plan_.batch_size, sample[0], sample[1], sample[2]};
}

std::vector<OutputDescription> LoaderImpl::outputs() const {
  const DeviceId device = plan_.to_device ? plan_.to_device->device : host();
  OutputDescription data{.name = "data", .shape = batch_shape(), .dtype = program_->dtype(),
                         .layout = program_->layout() == Layout::kNCHW ? "NCHW" : "NHWC", .device = device};
  if (plan_.to_device && plan_.to_device->options.normalize_on_device) {
    // The host ships u8 NHWC; the device writes the normalize stage's dtype and layout
    // (DeviceDelivery::hand_over), which is what the consumer receives.
    const Size2 out = program_->output_size();
    const int c = program_->channels();
    const bool nchw = plan_.device_normalize.layout == Layout::kNCHW;
    data.dtype = plan_.device_normalize.dtype;
    data.layout = nchw ? "NCHW" : "NHWC";
    data.shape = nchw ? Shape{plan_.batch_size, c, out.height, out.width} : Shape{plan_.batch_size, out.height, out.width, c};
  }
  OutputDescription labels{.name = "labels", .shape = Shape{plan_.batch_size}, .dtype = DType::kI32, .layout = "N",
                           .device = device};
  if (mix_classes() != 0) {  // mixup() / cutmix(): soft labels (docs/decisions/batch-mix-labels.md)
    labels.shape = Shape{plan_.batch_size, mix_classes()};
    labels.dtype = DType::kF32;
    labels.layout = "NC";
  }
  return {std::move(data), std::move(labels)};
}

// ---- a batch's way through the parts ---------------------------------------------------------

void LoaderImpl::start_epoch(std::int64_t epoch) {
  if (epoch < 0) throw Error(ErrorCode::kInvalidArgument, "epoch must be >= 0, got " + std::to_string(epoch));
  abandon_epoch();
  // A stream fetch_ahead() started for another epoch than this one brings shards it may not read.
  if (early_epoch_ >= 0 && early_epoch_ != epoch && plan_.dataset.fetcher) plan_.dataset.fetcher->stop();
  early_epoch_ = -1;
  // A restored state's epoch holds only what its earlier runs did not deliver: nothing before
  // it is read or decoded. Batch indices (and ring positions) continue after the earlier runs'
  // steps; position p of the ring is p - first_step * batch of the slice.
  slice_ = order_.compute(epoch, state_.begin_epoch(epoch), epoch_items_);
  // Remote shards fetched on demand: those of this rank's part of the epoch, before its reads.
  // cancel() and the wait check (Ctrl-C in Python and the CLI) end the wait on the network.
  if (plan_.dataset.fetcher) {
    const auto stop = [this] {
      if (cancel_requested_.load(std::memory_order_acquire)) return true;
      return wait_check_ && wait_check_();
    };
    try {
      plan_.dataset.fetcher->fetch(std::span<const std::int64_t>(epoch_items_.data(), static_cast<std::size_t>(slice_.positions)), stop);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kCancelled) cancel_requested_.store(false, std::memory_order_release);
      throw;
    }
  }
  const std::int64_t b = plan_.batch_size;
  const std::int64_t first = slice_.first_step + slice_.skip;
  ring().start_epoch(epoch, slice_.first_step + slice_.batches, slice_.first_step * b + slice_.positions, first);
  submitter_->reset(first * b);
  tuning_->start_period(std::chrono::steady_clock::now(), task_->busy_seconds());
  issue_batches();
}

// Remote shards fetched on demand: the first ones the epoch reads (this rank's, from where it
// resumes) start streaming now, at build()'s end or a restore(), so their first bytes' latency
// overlaps what comes before the epoch starts (docs/remote.md). start_epoch()'s fetch adopts the
// stream when it brings that epoch's shards; the transport keeps its read-ahead depth, so only
// the first transfers are issued at once, and a loader destroyed before its epoch stops them.
void LoaderImpl::fetch_ahead(std::int64_t epoch, std::span<const stages::EpochSegment> done) {
  if (!plan_.dataset.fetcher) return;
  if (early_epoch_ >= 0) plan_.dataset.fetcher->stop();  // restore(): another part of the order
  const stages::EpochSlice slice = order_.compute(epoch, done, epoch_items_);
  plan_.dataset.fetcher->fetch(std::span<const std::int64_t>(epoch_items_.data(), static_cast<std::size_t>(slice.positions)), {});
  early_epoch_ = epoch;
}

void LoaderImpl::issue_batches() {
  bool claimed = false;
  while (const auto issued = ring().issue_next(tuning_->prefetch())) {
    if (shared_->device) shared_->device->begin_fill(issued->slot);  // its previous copy has read its host memory
    submitter_->claim(issued->slot, issued->first, issued->size);
    claimed = true;
  }
  if (claimed) submitter_->submit();
}

void LoaderImpl::run_sample_entry(void* self, std::int64_t slot, std::int64_t position) {
  auto* loader = static_cast<LoaderImpl*>(self);
  loader->run_sample(static_cast<int>(slot), position);
  if (loader->submitter_->finished_one()) loader->submitter_->submit();
}

void LoaderImpl::run_sample(int s, std::int64_t position) {
  BatchSlot& slot = ring().slot(s);
  if (!ring().current(slot)) {
    finish_sample(slot);  // abandoned epoch or shutdown
    return;
  }
  const std::int64_t index = position - slot.batch * plan_.batch_size;
  const runtime::SampleTarget target{slot.data_ptr + static_cast<std::size_t>(index) * program_->sample_bytes(),
                                     slot.labels_ptr + index};
  const std::int64_t local = position - slice_.first_step * plan_.batch_size;
  if (std::exception_ptr error = task_->run(slot.epoch, local, epoch_items_, slice_.real, target)) {
    runtime::BatchRing::record_error(slot, position, std::move(error));
  }
  finish_sample(slot);
}

int LoaderImpl::mix_classes() const {
  return plan_.batch_mix.choices.empty() ? 0 : plan_.batch_mix.choices.front().num_classes;
}

void LoaderImpl::mix_batch(BatchSlot& slot) const {
  try {
    const Size2 out = program_->output_size();
    const auto [params, draw] = stages::draw_batch_mix(plan_.batch_mix, slot.epoch, slot.batch, out);
    const stages::BatchBuffer batch{slot.data_ptr, program_->dtype(), program_->layout(), slot.size,
                                    program_->channels(),  out.height, out.width};
    const std::size_t label_bytes = stages::batch_mix_label_bytes(plan_.batch_size, params.num_classes);
    stages::mix_batch(batch, params, draw, std::span<std::byte>(slot.mix_ptr + label_bytes, program_->sample_bytes()));
    const auto n = static_cast<std::size_t>(slot.size);
    stages::mix_labels(std::span<const std::int32_t>(slot.labels_ptr, n), params.num_classes, draw.label_lambda,
                       std::span<float>(reinterpret_cast<float*>(slot.mix_ptr), n * static_cast<std::size_t>(params.num_classes)));
  } catch (...) {
    runtime::BatchRing::record_error(slot, slot.batch * plan_.batch_size, std::current_exception());
  }
}

void LoaderImpl::finish_sample(BatchSlot& slot) {
  if (!runtime::BatchRing::finish_sample(slot)) return;
  // The batch is complete: mix it here, on the worker, off the consumer's thread.
  if (mix_classes() != 0 && !slot.error && ring().current(slot)) mix_batch(slot);
  // The batch's last sample: ship a complete, current batch to the device, then let it be taken.
  if (shared_->device && !slot.error && ring().current(slot)) {
    if (std::exception_ptr error = shared_->device->ship(slot.index, slot.size)) {
      runtime::BatchRing::record_error(slot, slot.batch * plan_.batch_size, std::move(error));
    }
  }
  ring().mark_ready(slot);
}

bool LoaderImpl::next(Batch& out) {
  refuse_in_forked_child();
  runtime::BatchRing& r = ring();
  if (!r.epoch_started()) throw Error(ErrorCode::kInvalidArgument, "call epoch(e) before iterating");
  if (r.epoch_complete()) {
    // The epoch's remote shards: their ends (read by no sample) arrive after their last members.
    if (plan_.dataset.fetcher) {
      try {
        plan_.dataset.fetcher->settle([this] {
          return cancel_requested_.load(std::memory_order_acquire) || (wait_check_ && wait_check_());
        });
      } catch (const Error& e) {
        if (e.code() == ErrorCode::kCancelled) cancel_requested_.store(false, std::memory_order_release);
        throw;
      }
    }
    return false;
  }
  const auto wait_start = std::chrono::steady_clock::now();
  const int found = wait_for_ready();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
  consumer_wait_seconds_ += waited;
  tuning_->count_batch(waited);

  BatchSlot& slot = r.slot(found);
  r.hand_out(found);
  if (slot.error) {
    std::exception_ptr error = slot.error;
    shared_->recycle(found);
    abandon_epoch();
    std::rethrow_exception(error);
  }
  ++batches_done_;
  tune();
  const Shape sample = program_->sample_shape();
  const TensorView view{slot.data_ptr, program_->dtype(), Shape{slot.size, sample[0], sample[1], sample[2]}};
  // Padding: the batch's positions at or past the slice's last sample.
  const std::int64_t start = (slot.batch - slice_.first_step) * plan_.batch_size;
  const std::int64_t padding = std::clamp<std::int64_t>(start + slot.size - std::max(start, slice_.real), 0, slot.size);
  out = runtime::BatchAccess::make(view, std::span<const std::int32_t>(slot.labels_ptr, static_cast<std::size_t>(slot.size)),
                                   slot.epoch, slot.batch, padding, found, shared_);
  if (mix_classes() != 0) {
    runtime::BatchAccess::set_soft_labels(out, TensorView{slot.mix_ptr, DType::kF32, Shape{slot.size, mix_classes()}});
  }
  if (shared_->device) shared_->device->hand_over(found, slot.size, out);
  return true;
}

// Issues what can be issued and waits for the next batch to hand out. A cancellation (cancel(),
// or the wait check saying so) abandons the epoch and throws; it is looked for before each look
// at the ring, so one that comes while a batch is ready still wins.
int LoaderImpl::wait_for_ready() {
  using Clock = std::chrono::steady_clock;
  runtime::BatchRing& r = ring();
  Clock::time_point next_check = Clock::now() + wait_check_interval_;
  while (true) {
    const std::uint32_t seen = r.events();
    if (cancel_requested_.exchange(false, std::memory_order_acq_rel)) {
      if (plan_.dataset.fetcher) plan_.dataset.fetcher->stop();  // the epoch's remote shards too
      abandon_epoch();
      throw Error(ErrorCode::kCancelled, "cancelled while waiting for a batch");
    }
    issue_batches();
    const int found = r.take_ready();
    if (found >= 0) return found;
    if (!wait_check_) {
      r.wait_for_change(seen);
      continue;
    }
    // Checked every interval of waiting, however often the ring changes meanwhile.
    const Clock::time_point now = Clock::now();
    if (now >= next_check) {
      if (wait_check_()) cancel_requested_.store(true, std::memory_order_release);
      next_check = Clock::now() + wait_check_interval_;
      continue;
    }
    (void)r.wait_for_change_for(seen, std::chrono::ceil<std::chrono::milliseconds>(next_check - now));
  }
}

void LoaderImpl::cancel() {
  cancel_requested_.store(true, std::memory_order_release);
  ring().wake();
}

void LoaderImpl::set_wait_check(std::function<bool()> check, std::chrono::milliseconds interval) {
  wait_check_ = std::move(check);
  wait_check_interval_ = std::max(interval, std::chrono::milliseconds(1));
}

void LoaderImpl::abandon_epoch() {
  runtime::BatchRing& r = ring();
  if (!r.has_outstanding()) return;
  r.bump_generation();
  // Claimed samples not yet submitted will never run: count them done.
  for (const runtime::UnsubmittedSamples& u : submitter_->cancel_unsubmitted()) {
    for (int i = 0; i < u.samples; ++i) finish_sample(r.slot(u.slot));
  }
  // Reads waiting for a remote shard's bytes end, so the abandoned samples finish at once.
  if (plan_.dataset.fetcher) plan_.dataset.fetcher->interrupt();
  const runtime::AbandonedSlots ready = r.abandon();
  for (int i = 0; i < ready.count; ++i) shared_->recycle(ready.slots[static_cast<std::size_t>(i)]);
}

// ---- tuning and statistics -------------------------------------------------------------------

void LoaderImpl::tune() {
  if (!tuning_->autotuned()) return;
  const auto now = std::chrono::steady_clock::now();
  if (!tuning_->due(now)) return;
  std::string why;
  const bool can_grow = ring().can_grow() && budget().available() >= memory_plan_.batch_bytes;
  const auto settings = tuning_->tick(now, task_->busy_seconds(), can_grow, why);
  if (!settings) return;
  apply(*settings);
  if (log_enabled(LogLevel::kDebug)) log(LogLevel::kDebug, "autotune: " + why);
}

void LoaderImpl::apply(const runtime::TuningSettings& settings) {
  submitter_->set_in_flight(settings.in_flight);
  int prefetch = tuning_->prefetch();
  while (prefetch < settings.prefetch && ring().live_slots() < prefetch + 3 && ring().add_slot(Reclaim::kNo)) ++prefetch;
  tuning_->set_prefetch(std::min(prefetch, settings.prefetch));  // a shallower depth retires slots as they return
  submitter_->submit();
}

Stats LoaderImpl::stats() const {
  Stats stats;
  task_->add_stats(stats);
  stats.batches = batches_done_;
  stats.consumer_wait_seconds = consumer_wait_seconds_;
  stats.threads = threads_;
  const MemoryBudget& b = *shared_->budget;
  // A part of a job's budget without a cap of its own is bounded by the job's limit.
  stats.memory_budget = b.limit() != 0 || !b.parent() ? b.limit() : b.parent()->limit();
  stats.memory_used = b.used();
  stats.memory_peak = b.peak();
  for (int u = 0; u < kPipelineUseCount; ++u) {
    const auto use = static_cast<MemoryUse>(u);
    stats.memory.push_back(MemoryStats{std::string(to_string(use)), b.used(use), b.peak(use)});
  }
  if (memory_cache_) {
    const auto c = memory_cache_->stats();
    stats.cache = CacheStats{"memory", c.hits, c.misses, c.entries, c.bytes, c.evicted, {}};
  } else if (disk_cache_) {
    const auto c = disk_cache_->stats();
    stats.cache = CacheStats{"disk", c.hits, c.misses, c.entries, c.bytes, c.dropped_corrupt, c.note};
  }
  stats.tuning = tuning_->stats(submitter_->in_flight());
  stats.recovered = program_->recovered().count();
  stats.recovered_samples = program_->recovered().listed();
  if (plan_.remote_counters) stats.sources = plan_.remote_counters->stats();
  return stats;
}

// ---- resumable iteration ---------------------------------------------------------------------

std::vector<std::uint8_t> LoaderImpl::state() const {
  const runtime::BatchRing& r = ring();
  return state_.save(r.epoch(), r.returned(), r.batches());
}

void LoaderImpl::restore(std::span<const std::uint8_t> bytes) {
  const runtime::ResumePoint point = state_.parse(bytes);  // throws before anything changes
  abandon_epoch();
  state_.set_resume(point);
  // No epoch started yet: build()'s stream was epoch 0's from its start; the resumed part's
  // shards go first instead.
  if (early_epoch_ >= 0) fetch_ahead(point.epoch, point.done);
}

}  // namespace sluice
