// TransferRing: one pinned allocation and one device allocation carved into slots, a copy stream,
// and per slot two events: `ready` (recorded on the copy stream after the slot's copy and
// normalize) and `released` (recorded on the consumer's stream when it gives the batch back),
// plus one release event per other stream the consumer recorded the batch on (record_stream).
// Host-side reuse waits on `ready` (the copy has read the pinned bytes); device-side reuse is a
// cudaStreamWaitEvent of the copy stream on every release event, so the host never waits for the
// consumer.
#include "sluice/detail/device/transfer_ring.hpp"

#include <optional>
#include <string>

#include "device/consumer_streams.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"
#include "sluice/detail/device/copy.hpp"

namespace sluice {
namespace {

std::size_t round_up(std::size_t bytes, std::size_t to) { return (bytes + to - 1) / to * to; }

void check_options(const TransferRingOptions& o) {
  if (o.slots < 1) {
    throw Error(ErrorCode::kInvalidArgument, "transfer ring: slots must be >= 1, got " + std::to_string(o.slots));
  }
  if (o.host_slot_bytes == 0) throw Error(ErrorCode::kInvalidArgument, "transfer ring: host_slot_bytes must be > 0");
}

bool overlaps(std::size_t a, std::size_t a_bytes, std::size_t b, std::size_t b_bytes) {
  return a < b + b_bytes && b < a + a_bytes;
}

}  // namespace

struct TransferRing::Slot {
  explicit Slot(DeviceId device) : ready(device), released(device) {}
  Event ready;     // after the copy (and normalize) of the slot's current batch
  Event released;  // on the consumer's stream, after its use of the device memory
  bool release_pending = false;
  // Other streams the current batch is read on, and an event for each (created in
  // record_stream(), so release() only records), recorded at release on those streams.
  device_detail::ConsumerStreams streams;
  std::vector<Event> stream_released;
  std::size_t streams_pending = 0;  // stream_released[0, n) recorded by the last release
};

static_assert(TransferRing::kMaxConsumerStreams == device_detail::ConsumerStreams::kCapacity);

TransferRingFootprint TransferRing::footprint(const TransferRingOptions& options) {
  check_options(options);
  const std::size_t device_slot = options.device_slot_bytes != 0 ? options.device_slot_bytes : options.host_slot_bytes;
  const auto slots = static_cast<std::size_t>(options.slots);
  TransferRingFootprint f;
  f.host_bytes = PinnedBuffer::footprint(round_up(options.host_slot_bytes, kSlotAlignment) * slots);
  f.device_bytes = round_up(device_slot, kSlotAlignment) * slots;
  if (options.pool == nullptr) f.device_bytes = caching_pool_block_size(f.device_bytes);
  return f;
}

TransferRing::TransferRing(TransferRingOptions options) : options_(options) {
  check_options(options_);
  require_device(options_.device);
  if (options_.device_slot_bytes == 0) options_.device_slot_bytes = options_.host_slot_bytes;
  host_stride_ = round_up(options_.host_slot_bytes, kSlotAlignment);
  device_stride_ = round_up(options_.device_slot_bytes, kSlotAlignment);
  const auto slots = static_cast<std::size_t>(options_.slots);
  if (options_.budget != nullptr) {
    const std::uint64_t bytes = footprint(options_).host_bytes;
    std::optional<Reservation> r = options_.budget->try_reserve(bytes, MemoryUse::kPinned);
    if (!r) {
      throw Error(ErrorCode::kOutOfBudget,
                  "transfer ring: " + std::to_string(options_.slots) + " slots of " +
                      format_bytes(options_.host_slot_bytes) + " need " + format_bytes(bytes) +
                      " of pinned memory, but the memory budget has " + format_bytes(options_.budget->available()) +
                      " left of " + format_bytes(options_.budget->limit()) +
                      "; lower the batch size or the prefetch depth, or raise memory_budget");
    }
    reservation_ = std::move(*r);
  }

  DevicePool* pool = options_.pool;
  if (pool == nullptr) {
    own_pool_ = make_caching_pool(options_.device);
    pool = own_pool_.get();
  } else if (pool->device() != options_.device) {
    throw Error(ErrorCode::kInvalidArgument, "transfer ring: the pool is on " + to_string(pool->device()) +
                                                 ", the ring on " + to_string(options_.device));
  }
  host_ = PinnedBuffer(options_.device, host_stride_ * slots, options_.pinned);
  device_ = DeviceBuffer(*pool, device_stride_ * slots);
  copy_stream_ = Stream(options_.device, options_.copy_stream);
  slots_.reserve(slots);
  for (std::size_t i = 0; i < slots; ++i) slots_.push_back(std::make_unique<Slot>(options_.device));
}

TransferRing::~TransferRing() {
  try {
    copy_stream_.synchronize();
    for (const std::unique_ptr<Slot>& s : slots_) {
      if (s->release_pending) s->released.synchronize();
      for (std::size_t i = 0; i < s->streams_pending; ++i) s->stream_released[i].synchronize();
    }
  } catch (...) {  // a broken device: nothing left to wait for
  }
}

TransferRing::Slot& TransferRing::slot_at(int slot) {
  if (slot < 0 || slot >= options_.slots) {
    throw Error(ErrorCode::kInvalidArgument, "transfer ring: no slot " + std::to_string(slot) + " (the ring has " +
                                                 std::to_string(options_.slots) + ")");
  }
  return *slots_[static_cast<std::size_t>(slot)];
}

const TransferRing::Slot& TransferRing::slot_at(int slot) const {
  return const_cast<TransferRing*>(this)->slot_at(slot);
}

std::span<std::uint8_t> TransferRing::host_slot(int slot) {
  slot_at(slot);
  return {host_.data() + static_cast<std::size_t>(slot) * host_stride_, options_.host_slot_bytes};
}

void* TransferRing::device_slot(int slot) const {
  slot_at(slot);
  return static_cast<std::uint8_t*>(device_.data()) + static_cast<std::size_t>(slot) * device_stride_;
}

const Event& TransferRing::ready_event(int slot) const { return slot_at(slot).ready; }

void TransferRing::begin_fill(int slot) {
  Slot& s = slot_at(slot);
  fill_polls_.fetch_add(1, std::memory_order_relaxed);
  if (!s.ready.query()) {
    fill_waits_.fetch_add(1, std::memory_order_relaxed);
    s.ready.synchronize();
  }
}

void TransferRing::submit(int slot, std::size_t bytes, const DeviceNormalizeStep* normalize) {
  {
    std::lock_guard lock(error_mutex_);
    if (!deferred_error_.empty()) {
      throw Error(ErrorCode::kInternal, "transfer ring: an earlier release failed: " + deferred_error_);
    }
  }
  Slot& s = slot_at(slot);
  if (bytes > options_.host_slot_bytes || bytes > options_.device_slot_bytes) {
    throw Error(ErrorCode::kInvalidArgument, "transfer ring: " + std::to_string(bytes) + " bytes do not fit a slot (" +
                                                 std::to_string(options_.host_slot_bytes) + " host, " +
                                                 std::to_string(options_.device_slot_bytes) + " device)");
  }
  if (normalize != nullptr) {
    if (normalize->normalizer == nullptr) throw Error(ErrorCode::kInvalidArgument, "transfer ring: normalize step without a normalizer");
    const GpuNormalizer& n = *normalize->normalizer;
    const std::size_t in = n.input_bytes(normalize->batch, normalize->height, normalize->width);
    const std::size_t out = n.output_bytes(normalize->batch, normalize->height, normalize->width);
    if (normalize->src_offset + in > options_.device_slot_bytes || normalize->dst_offset + out > options_.device_slot_bytes ||
        overlaps(normalize->src_offset, in, normalize->dst_offset, out)) {
      throw Error(ErrorCode::kInvalidArgument,
                  "transfer ring: the normalize step's input [" + std::to_string(normalize->src_offset) + ", +" +
                      std::to_string(in) + ") and output [" + std::to_string(normalize->dst_offset) + ", +" +
                      std::to_string(out) + ") must be disjoint and inside the device slot (" +
                      std::to_string(options_.device_slot_bytes) + " bytes)");
    }
  }
  {
    // The device memory is the consumer's until its work recorded at release has run, on every
    // stream it was read on.
    std::lock_guard lock(consumers_mutex_);
    if (s.release_pending) {
      copy_stream_.wait(s.released);
      s.release_pending = false;
    }
    for (std::size_t i = 0; i < s.streams_pending; ++i) copy_stream_.wait(s.stream_released[i]);
    stream_waits_.fetch_add(s.streams_pending, std::memory_order_relaxed);
    s.streams_pending = 0;
  }
  auto* device = static_cast<std::uint8_t*>(device_slot(slot));
  copy_to_device_async(device, host_slot(slot).data(), bytes, copy_stream_);
  if (normalize != nullptr) {
    normalize->normalizer->run(device + normalize->src_offset, device + normalize->dst_offset, normalize->batch,
                               normalize->height, normalize->width, copy_stream_);
  }
  s.ready.record(copy_stream_);
  submitted_.fetch_add(1, std::memory_order_relaxed);
  bytes_copied_.fetch_add(bytes, std::memory_order_relaxed);
}

void TransferRing::hand_over(int slot, Stream& consumer) { consumer.wait(slot_at(slot).ready); }

void TransferRing::record_stream(int slot, void* native_stream) {
  Slot& s = slot_at(slot);
  streams_recorded_.fetch_add(1, std::memory_order_relaxed);
  if (options_.device.is_host()) return;  // host work is done when it is submitted
  std::lock_guard lock(consumers_mutex_);
  const std::size_t index = s.streams.add(native_stream);
  if (index == s.stream_released.size()) s.stream_released.emplace_back(options_.device);
}

void TransferRing::release(int slot, Stream& consumer) noexcept {
  try {
    Slot& s = slot_at(slot);
    std::lock_guard lock(consumers_mutex_);
    s.released.record(consumer);
    s.release_pending = true;
    // The other streams: after the work queued on them so far. The release stream itself is
    // covered above.
    // stream_released is a pool at least as long as the list (record_stream grew it).
    std::size_t pending = 0;
    for (std::size_t i = 0; i < s.streams.size(); ++i) {
      if (s.streams[i] == consumer.native_handle()) continue;
      Stream other = Stream::wrap(options_.device, s.streams[i]);
      s.stream_released[pending++].record(other);
    }
    s.streams_pending = pending;
    s.streams.clear();
  } catch (const std::exception& e) {
    std::lock_guard lock(error_mutex_);
    if (deferred_error_.empty()) deferred_error_ = e.what();
  }
  released_.fetch_add(1, std::memory_order_relaxed);
}

TransferRingStats TransferRing::stats() const {
  TransferRingStats s;
  s.submitted = submitted_.load(std::memory_order_relaxed);
  s.released = released_.load(std::memory_order_relaxed);
  s.streams_recorded = streams_recorded_.load(std::memory_order_relaxed);
  s.stream_waits = stream_waits_.load(std::memory_order_relaxed);
  s.fill_polls = fill_polls_.load(std::memory_order_relaxed);
  s.fill_waits = fill_waits_.load(std::memory_order_relaxed);
  s.bytes_copied = bytes_copied_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace sluice
