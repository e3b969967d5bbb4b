// Device delivery: the transfer ring's slot layout, the copy (and device normalisation) of a
// finished batch, and the device view a consumer's Batch gets.
#include "runtime/device_delivery.hpp"

#include "runtime/batch_access.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"
#include "sluice/device/device.hpp"
#include "stages/augment/batch_mix.hpp"

namespace sluice::runtime {

namespace {
constexpr std::size_t round_up_256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }
}  // namespace

bool DeviceDelivery::wanted(const stages::ResolvedPipeline& plan) {
  return plan.to_device && (plan.to_device->device.is_cuda() || plan.to_device->options.stage_through_ring);
}

DeviceDelivery::DeviceDelivery(const stages::ResolvedPipeline& plan, const stages::SampleProgram& program, int slots,
                               MemoryBudget& budget, MemoryBudget* device_budget)
    : to_(*plan.to_device),
      device_normalize_(plan.device_normalize),
      dtype_(program.dtype()),
      sample_shape_(program.sample_shape()),
      output_(program.output_size()),
      channels_(program.channels()),
      sample_bytes_(program.sample_bytes()) {
  require_device(to_.device);  // a clear error at build() when the device is not usable here
  const std::size_t data_bytes = sample_bytes_ * static_cast<std::size_t>(plan.batch_size);
  // A ring slot: labels (rounded to 256 bytes); with mixup() / cutmix() the soft labels and the
  // mix's one sample of scratch (rounded; the worker that completes the batch mixes it in the
  // slot, and the soft labels travel in the same copy, the scratch with them); then the batch as
  // the host assembles it. With normalize_on_device the device slot also holds the normalised
  // output after the u8 input.
  labels_bytes_ = round_up_256(sizeof(std::int32_t) * static_cast<std::size_t>(plan.batch_size));
  if (!plan.batch_mix.choices.empty()) {
    mix_classes_ = plan.batch_mix.choices.front().num_classes;
    mix_bytes_ = round_up_256(stages::batch_mix_slot_bytes(plan.batch_size, mix_classes_, sample_bytes_));
  }
  data_offset_ = labels_bytes_ + mix_bytes_;
  const std::size_t host_bytes = data_offset_ + data_bytes;
  std::size_t device_bytes = host_bytes;
  if (to_.options.normalize_on_device) {
    normalizer_.setup(GpuNormalizeOptions{device_normalize_.mean, device_normalize_.std, device_normalize_.layout,
                                          device_normalize_.dtype},
                      channels_);
    output_offset_ = round_up_256(host_bytes);
    device_bytes = output_offset_ + normalizer_.output_bytes(plan.batch_size, output_.height, output_.width);
  }
  const TransferRingOptions options{.device = to_.device,
                                    .slots = slots,
                                    .host_slot_bytes = host_bytes,
                                    .device_slot_bytes = device_bytes,
                                    .budget = &budget};
  if (device_budget != nullptr && to_.device.is_cuda()) {
    const std::uint64_t bytes = TransferRing::footprint(options).device_bytes;
    std::optional<Reservation> r = device_budget->try_reserve(bytes, MemoryUse::kDeviceBatches, Reclaim::kYes);
    if (!r) {
      throw Error(ErrorCode::kOutOfBudget, "the transfer ring needs " + format_bytes(bytes) + " of " +
                                               to_string(to_.device) + " memory, but its device budget has " +
                                               format_bytes(device_budget->available()) + " left of " +
                                               format_bytes(device_budget->limit()) +
                                               "; lower the batch size or the prefetch depth, or raise the limit");
    }
    device_reservation_ = std::move(*r);
  }
  ring_ = std::make_unique<TransferRing>(options);
  consumer_stream_ = std::make_unique<Stream>(Stream::wrap(to_.device, to_.options.stream));
}

std::int32_t* DeviceDelivery::host_labels(int slot) {
  return reinterpret_cast<std::int32_t*>(ring_->host_slot(slot).data());
}

std::uint8_t* DeviceDelivery::host_data(int slot) { return ring_->host_slot(slot).data() + data_offset_; }

std::byte* DeviceDelivery::host_mix(int slot) {
  return mix_bytes_ == 0 ? nullptr : reinterpret_cast<std::byte*>(ring_->host_slot(slot).data() + labels_bytes_);
}

void DeviceDelivery::begin_fill(int slot) { ring_->begin_fill(slot); }

std::exception_ptr DeviceDelivery::ship(int slot, int samples) noexcept {
  const std::size_t bytes = data_offset_ + sample_bytes_ * static_cast<std::size_t>(samples);
  try {
    if (to_.options.normalize_on_device) {
      const DeviceNormalizeStep step{&normalizer_, data_offset_, output_offset_, samples, output_.height, output_.width};
      ring_->submit(slot, bytes, &step);
    } else {
      ring_->submit(slot, bytes);
    }
    return nullptr;
  } catch (...) {
    return std::current_exception();
  }
}

void DeviceDelivery::hand_over(int slot, int samples, Batch& batch) {
  ring_->hand_over(slot, *consumer_stream_);  // the consumer's stream waits for the copy; the host does not
  auto* base = static_cast<std::uint8_t*>(ring_->device_slot(slot));
  TensorView data{base + data_offset_, dtype_, Shape{samples, sample_shape_[0], sample_shape_[1], sample_shape_[2]}};
  if (to_.options.normalize_on_device) {
    const Shape shape = device_normalize_.layout == Layout::kNCHW ? Shape{samples, channels_, output_.height, output_.width}
                                                                  : Shape{samples, output_.height, output_.width, channels_};
    data = TensorView{base + output_offset_, device_normalize_.dtype, shape};
  }
  BatchAccess::set_device(batch, to_.device, data, reinterpret_cast<const std::int32_t*>(base),
                          ring_->ready_event(slot).native_handle());
  if (mix_classes_ != 0) {
    BatchAccess::set_device_soft_labels(batch, TensorView{base + labels_bytes_, DType::kF32, Shape{samples, mix_classes_}});
  }
}

void DeviceDelivery::record_stream(int slot, void* native_stream) { ring_->record_stream(slot, native_stream); }

void DeviceDelivery::release(int slot) noexcept { ring_->release(slot, *consumer_stream_); }

}  // namespace sluice::runtime
