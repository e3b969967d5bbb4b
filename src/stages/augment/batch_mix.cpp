// MixUp and CutMix on a finished batch: the draw (Beta from two gamma variates, CutMix's centre),
// the in-place blend or box copy from the previous sample (walking from the last sample down, so
// each reads a neighbour not yet mixed, the first reading a saved copy of the last), and the soft
// labels.
#include "stages/augment/batch_mix.hpp"

#include <cmath>
#include <cstring>
#include <numbers>
#include <string>

#include "sluice/core/error.hpp"
#include "sluice/core/rng.hpp"
#include "sluice/detail/core/half.hpp"

namespace sluice::stages {
namespace {

// The stream of the batch-mix draws, apart from every per-sample stream of the same seed.
constexpr std::uint64_t kBatchMixStream = 0x6d69787570637574ULL;        // "mixupcut"
constexpr std::uint64_t kBatchMixChoiceStream = 0x6d697863686f6963ULL;  // "mixchoic"

double normal(CounterRng& rng) {
  const double u1 = 1.0 - rng.uniform();  // (0, 1]
  const double u2 = rng.uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// Gamma(shape, 1): Marsaglia and Tsang's method, boosted for shape < 1.
double gamma(CounterRng& rng, double shape) {
  if (shape < 1.0) {
    const double u = rng.uniform();
    return gamma(rng, shape + 1.0) * std::pow(u, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    const double x = normal(rng);
    double v = 1.0 + c * x;
    if (v <= 0.0) continue;
    v = v * v * v;
    const double u = rng.uniform();
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (u > 0.0 && std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

double beta(CounterRng& rng, double alpha) {
  const double x = gamma(rng, alpha);
  const double y = gamma(rng, alpha);
  if (x + y == 0.0) return rng.bernoulli(0.5) ? 1.0 : 0.0;  // both underflowed: alpha is tiny
  return x / (x + y);
}

std::size_t sample_values(const BatchBuffer& b) {
  return static_cast<std::size_t>(b.channels) * static_cast<std::size_t>(b.height) * static_cast<std::size_t>(b.width);
}

// x = rolled * a + x * b for one value in the batch's dtype, rounded as torch rounds each op.
template <typename T>
void blend_values(T* x, const T* rolled, std::size_t n, float a, float b);

template <>
void blend_values<float>(float* x, const float* rolled, std::size_t n, float a, float b) {
  for (std::size_t i = 0; i < n; ++i) {
    const float p = rolled[i] * a;
    const float q = x[i] * b;
    x[i] = p + q;
  }
}

template <bool kHalf>
void blend_u16(std::uint16_t* x, const std::uint16_t* rolled, std::size_t n, float a, float b) {
  const auto load = [](std::uint16_t v) { return kHalf ? f16_to_float(v) : bf16_to_float(v); };
  const auto store = [](float v) { return kHalf ? float_to_f16(v) : float_to_bf16(v); };
  for (std::size_t i = 0; i < n; ++i) {
    const float p = load(store(load(rolled[i]) * a));
    const float q = load(store(load(x[i]) * b));
    x[i] = store(p + q);
  }
}

void blend_sample(const BatchBuffer& batch, std::byte* x, const std::byte* rolled, float a, float b) {
  const std::size_t n = sample_values(batch);
  switch (batch.dtype) {
    case DType::kF32:
      blend_values(reinterpret_cast<float*>(x), reinterpret_cast<const float*>(rolled), n, a, b);
      break;
    case DType::kF16:
      blend_u16<true>(reinterpret_cast<std::uint16_t*>(x), reinterpret_cast<const std::uint16_t*>(rolled), n, a, b);
      break;
    case DType::kBF16:
      blend_u16<false>(reinterpret_cast<std::uint16_t*>(x), reinterpret_cast<const std::uint16_t*>(rolled), n, a, b);
      break;
    default:
      check_batch_mix_dtype(BatchMixKind::kMixUp, batch.dtype);
  }
}

// Copies the box of `rolled` into `x` (one sample).
void copy_box(const BatchBuffer& batch, std::byte* x, const std::byte* rolled, Rect box) {
  const std::size_t value = size_of(batch.dtype);
  const auto w = static_cast<std::size_t>(batch.width);
  const auto h = static_cast<std::size_t>(batch.height);
  const auto c = static_cast<std::size_t>(batch.channels);
  if (batch.layout == Layout::kNHWC) {
    const std::size_t run = static_cast<std::size_t>(box.width) * c * value;
    for (int y = box.y; y < box.y + box.height; ++y) {
      const std::size_t at = ((static_cast<std::size_t>(y) * w + static_cast<std::size_t>(box.x)) * c) * value;
      std::memcpy(x + at, rolled + at, run);
    }
    return;
  }
  const std::size_t run = static_cast<std::size_t>(box.width) * value;
  for (std::size_t k = 0; k < c; ++k) {
    for (int y = box.y; y < box.y + box.height; ++y) {
      const std::size_t at = ((k * h + static_cast<std::size_t>(y)) * w + static_cast<std::size_t>(box.x)) * value;
      std::memcpy(x + at, rolled + at, run);
    }
  }
}

}  // namespace

void check_batch_mix(const BatchMixParams& p) {
  if (!(p.alpha > 0.0) || !std::isfinite(p.alpha)) {
    throw Error(ErrorCode::kInvalidArgument, "mixup/cutmix: alpha must be > 0 and finite, got " + std::to_string(p.alpha));
  }
  if (p.num_classes < 1) {
    throw Error(ErrorCode::kInvalidArgument, "mixup/cutmix: num_classes must be at least 1, got " + std::to_string(p.num_classes));
  }
}

void check_batch_mix_dtype(BatchMixKind kind, DType dtype) {
  if (kind == BatchMixKind::kMixUp && dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string("mixup blends pixel values and needs a float batch (normalize to f32, f16 or bf16), not ") +
                    std::string(to_string(dtype)));
  }
  if (dtype == DType::kI32) throw Error(ErrorCode::kInvalidArgument, "cutmix: an i32 batch is not an image batch");
}

Rect cutmix_box(double lambda, int center_x, int center_y, Size2 image) {
  const double r = 0.5 * std::sqrt(1.0 - lambda);
  const int r_w_half = static_cast<int>(r * image.width);
  const int r_h_half = static_cast<int>(r * image.height);
  const int x1 = std::max(center_x - r_w_half, 0);
  const int y1 = std::max(center_y - r_h_half, 0);
  const int x2 = std::min(center_x + r_w_half, image.width);
  const int y2 = std::min(center_y + r_h_half, image.height);
  return Rect{x1, y1, x2 - x1, y2 - y1};
}

BatchMixDraw draw_batch_mix(const BatchMixParams& params, std::uint64_t seed, std::int64_t epoch,
                            std::int64_t batch_index, Size2 image) {
  check_batch_mix(params);
  CounterRng rng(derive_key(seed, kBatchMixStream), static_cast<std::uint64_t>(epoch),
                 static_cast<std::uint32_t>(batch_index));
  BatchMixDraw d;
  d.lambda = beta(rng, params.alpha);
  d.label_lambda = d.lambda;
  if (params.kind == BatchMixKind::kCutMix && image.width > 0 && image.height > 0) {
    const int cx = static_cast<int>(rng.below(static_cast<std::uint64_t>(image.width)));
    const int cy = static_cast<int>(rng.below(static_cast<std::uint64_t>(image.height)));
    d.box = cutmix_box(d.lambda, cx, cy, image);
    d.label_lambda = 1.0 - static_cast<double>(d.box.width) * d.box.height /
                               (static_cast<double>(image.width) * image.height);
  }
  return d;
}

std::pair<BatchMixParams, BatchMixDraw> draw_batch_mix(const BatchMixPlan& plan, std::int64_t epoch,
                                                       std::int64_t batch_index, Size2 image) {
  if (plan.choices.empty()) throw Error(ErrorCode::kInternal, "draw_batch_mix: no mixing stage");
  std::size_t pick = 0;
  if (plan.choices.size() > 1) {
    CounterRng rng(derive_key(plan.seed, kBatchMixChoiceStream), static_cast<std::uint64_t>(epoch),
                   static_cast<std::uint32_t>(batch_index));
    pick = static_cast<std::size_t>(rng.below(plan.choices.size()));
  }
  const BatchMixParams& params = plan.choices[pick];
  return {params, draw_batch_mix(params, plan.seed, epoch, batch_index, image)};
}

std::size_t batch_mix_label_bytes(int batch_size, int num_classes) {
  const std::size_t bytes = static_cast<std::size_t>(batch_size) * static_cast<std::size_t>(num_classes) * sizeof(float);
  return (bytes + 63) / 64 * 64;
}

std::size_t batch_mix_slot_bytes(int batch_size, int num_classes, std::size_t sample_bytes) {
  return batch_mix_label_bytes(batch_size, num_classes) + sample_bytes;
}

std::size_t batch_mix_workspace_bytes(const BatchBuffer& batch) { return sample_values(batch) * size_of(batch.dtype); }

void mix_batch(const BatchBuffer& batch, const BatchMixParams& params, const BatchMixDraw& draw,
               std::span<std::byte> workspace) {
  check_batch_mix_dtype(params.kind, batch.dtype);
  if (batch.samples <= 0 || sample_values(batch) == 0) return;
  const std::size_t bytes = batch_mix_workspace_bytes(batch);
  if (workspace.size() < bytes) {
    throw Error(ErrorCode::kInvalidArgument, "mixup/cutmix: workspace smaller than batch_mix_workspace_bytes()");
  }
  if (params.kind == BatchMixKind::kCutMix && (draw.box.width <= 0 || draw.box.height <= 0)) return;
  auto* base = static_cast<std::byte*>(batch.data);
  const auto sample = [&](int i) { return base + static_cast<std::size_t>(i) * bytes; };
  std::memcpy(workspace.data(), sample(batch.samples - 1), bytes);  // what sample 0 pairs with
  const float a = static_cast<float>(1.0 - draw.lambda);
  const float b = static_cast<float>(draw.lambda);
  for (int i = batch.samples - 1; i >= 0; --i) {
    const std::byte* rolled = i > 0 ? sample(i - 1) : workspace.data();
    if (params.kind == BatchMixKind::kMixUp) {
      blend_sample(batch, sample(i), rolled, a, b);
    } else {
      copy_box(batch, sample(i), rolled, draw.box);
    }
  }
}

void mix_labels(std::span<const std::int32_t> labels, int num_classes, double label_lambda, std::span<float> out) {
  const std::size_t n = labels.size();
  const auto k = static_cast<std::size_t>(num_classes);
  if (num_classes < 1 || out.size() < n * k) {
    throw Error(ErrorCode::kInvalidArgument, "mixup/cutmix: the soft labels need labels x num_classes floats");
  }
  for (std::int32_t l : labels) {
    if (l < 0 || l >= num_classes) {
      throw Error(ErrorCode::kInvalidArgument, "mixup/cutmix: label " + std::to_string(l) + " is outside [0, num_classes = " +
                                                   std::to_string(num_classes) + ")");
    }
  }
  const float a = static_cast<float>(1.0 - label_lambda);
  const float b = static_cast<float>(label_lambda);
  for (std::size_t i = 0; i < n; ++i) {
    float* row = out.data() + i * k;
    const auto rolled = static_cast<std::size_t>(labels[i > 0 ? i - 1 : n - 1]);
    const auto own = static_cast<std::size_t>(labels[i]);
    for (std::size_t j = 0; j < k; ++j) {
      const float p = (j == rolled ? 1.0f : 0.0f) * a;
      const float q = (j == own ? 1.0f : 0.0f) * b;
      row[j] = p + q;
    }
  }
}

}  // namespace sluice::stages
