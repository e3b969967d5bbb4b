// TransferRing: one pinned allocation and one device allocation carved into slots, a copy stream,
// and per slot two events: `ready` (recorded on the copy stream after the slot's copy and
// normalize) and `released` (recorded on the consumer's stream when it gives the batch back).
// Host-side reuse waits on `ready` (the copy has read the pinned bytes); device-side reuse is a
// cudaStreamWaitEvent of the copy stream on `released`, so the host never waits for the consumer.
#include "sluice/device/transfer_ring.hpp"

#include <optional>
#include <string>

#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"
#include "sluice/device/copy.hpp"

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
  for (std::size_t i = 0; i < slots; ++i) slots_.push_back(Slot{Event(options_.device), Event(options_.device), false});
}

TransferRing::~TransferRing() {
  try {
    copy_stream_.synchronize();
    for (Slot& s : slots_) {
      if (s.release_pending) s.released.synchronize();
    }
  } catch (...) {  // a broken device: nothing left to wait for
  }
}

TransferRing::Slot& TransferRing::slot_at(int slot) {
  if (slot < 0 || slot >= options_.slots) {
    throw Error(ErrorCode::kInvalidArgument, "transfer ring: no slot " + std::to_string(slot) + " (the ring has " +
                                                 std::to_string(options_.slots) + ")");
  }
  return slots_[static_cast<std::size_t>(slot)];
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
  if (s.release_pending) {
    // The device memory is the consumer's until its work recorded in `released` has run.
    copy_stream_.wait(s.released);
    s.release_pending = false;
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

void TransferRing::release(int slot, Stream& consumer) noexcept {
  try {
    Slot& s = slot_at(slot);
    s.released.record(consumer);
    s.release_pending = true;
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
  s.fill_polls = fill_polls_.load(std::memory_order_relaxed);
  s.fill_waits = fill_waits_.load(std::memory_order_relaxed);
  s.bytes_copied = bytes_copied_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace sluice
