// Batch-level MixUp and CutMix, torchvision.transforms.v2.MixUp / CutMix on a finished batch: one
// lambda per batch from Beta(alpha, alpha), drawn from (seed, epoch, batch index) so the same batch
// mixes the same way at any thread count and after a resume; each sample pairs with the previous
// one (the batch rolled by one, the first with the last, as v2 does), and the labels become soft:
// one-hot rows mixed with the same weight, f32 (N, num_classes).
//
// MixUp: x = rolled * (1 - lambda) + x * lambda, in the batch's dtype as torch computes it (each
// product and the sum rounded to the dtype); labels with lambda. CutMix: a box of area about
// (1 - lambda) of the image, centred on a uniform point and clipped to the image, is copied from the
// rolled batch; labels with 1 - box area / image area (v2's lam_adjusted).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "sluice/core/dtype.hpp"
#include "sluice/detail/core/image.hpp"

namespace sluice::stages {

enum class BatchMixKind : std::uint8_t { kMixUp, kCutMix };

struct BatchMixParams {
  BatchMixKind kind = BatchMixKind::kMixUp;
  double alpha = 1.0;   // > 0: Beta(alpha, alpha)
  int num_classes = 0;  // > 0: the soft labels' width
};

// Throws kInvalidArgument naming the value: alpha not > 0 and finite, num_classes < 1.
void check_batch_mix(const BatchMixParams& params);

// What one batch draws: the image weight, the CutMix box (empty for MixUp) and the label weight.
struct BatchMixDraw {
  double lambda = 1.0;
  Rect box;                    // [x, x + width) x [y, y + height), in the image's pixels
  double label_lambda = 1.0;  // MixUp: lambda; CutMix: 1 - box area / image area
};

// The draw of batch `batch_index` of `epoch` under `seed` for images of `image` size.
BatchMixDraw draw_batch_mix(const BatchMixParams& params, std::uint64_t seed, std::int64_t epoch,
                            std::int64_t batch_index, Size2 image);

// CutMix's box from a lambda and a centre, exactly as v2 computes it (exposed for tests).
Rect cutmix_box(double lambda, int center_x, int center_y, Size2 image);

// A batch buffer as the loader lays it out: `samples` samples of channels x height x width.
struct BatchBuffer {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Layout layout = Layout::kNCHW;
  int samples = 0;
  int channels = 0;
  int height = 0;
  int width = 0;
};

// A pipeline's batch-mix stages: each batch uses one of `choices` (with equal odds when there are
// two, as torchvision's reference recipe's RandomChoice([MixUp, CutMix])), drawn under `seed`.
struct BatchMixPlan {
  std::vector<BatchMixParams> choices;
  std::uint64_t seed = 0;
};

// The stage batch `batch_index` of `epoch` uses, and its draw. plan.choices is not empty.
std::pair<BatchMixParams, BatchMixDraw> draw_batch_mix(const BatchMixPlan& plan, std::int64_t epoch,
                                                       std::int64_t batch_index, Size2 image);

// Bytes a batch slot adds for mixing: the soft labels (batch x num_classes f32, rounded up to 64
// bytes) and one sample of scratch (mix_batch's workspace). The soft labels come first.
std::size_t batch_mix_label_bytes(int batch_size, int num_classes);
std::size_t batch_mix_slot_bytes(int batch_size, int num_classes, std::size_t sample_bytes);

// Throws kInvalidArgument where `kind` cannot run on `dtype`: MixUp blends values, so it needs a
// float batch (f32, f16, bf16; torch refuses to blend u8 in place too); CutMix copies and takes any.
void check_batch_mix_dtype(BatchMixKind kind, DType dtype);

// Bytes of scratch mix_batch needs: one sample (the last, which the first pairs with).
std::size_t batch_mix_workspace_bytes(const BatchBuffer& batch);

// Mixes the batch in place with `draw`.
void mix_batch(const BatchBuffer& batch, const BatchMixParams& params, const BatchMixDraw& draw,
               std::span<std::byte> workspace);

// The soft labels: out[i, k] = onehot(labels[i-1])[k] * (1 - w) + onehot(labels[i])[k] * w in f32
// with w = label_lambda (row 0 pairs with the last). out has labels.size() * num_classes floats.
// Throws kInvalidArgument for a label outside [0, num_classes) (torch's one_hot refuses it too).
void mix_labels(std::span<const std::int32_t> labels, int num_classes, double label_lambda, std::span<float> out);

}  // namespace sluice::stages
