// MixUp and CutMix on a batch against torchvision v2's arithmetic run with torch
// (tests/reference/torch_batch_mix.py; the installed torchvision predates v2's classes, so the
// script runs their lines) for a fixed lambda and box: equal f32 bytes, images and soft labels,
// NCHW and NHWC. Also: the draws are a function of (seed, epoch, batch) alone and follow
// Beta(alpha, alpha); CutMix on u8; f16/bf16 MixUp against the f32 result; bad values refused.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <thread>

#include "sluice/core/error.hpp"
#include "sluice/detail/core/half.hpp"
#include "stages/augment/batch_mix.hpp"
#include "reference_script.hpp"
#include "test_support.hpp"

namespace sluice::stages {
namespace {

constexpr int kN = 5, kC = 3, kH = 12, kW = 17, kClasses = 7;

std::vector<float> random_batch(std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(kN) * kC * kH * kW);
  for (auto& x : v) x = d(rng);
  return v;
}
const std::vector<std::int32_t> kLabels{3, 0, 6, 3, 1};

template <typename T>
std::vector<std::uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<std::uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}
std::vector<float> floats_of(const std::vector<std::uint8_t>& b) {
  std::vector<float> v(b.size() / sizeof(float));
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

struct Reference {
  std::vector<float> batch;
  std::vector<float> labels;
  std::string said;
};

// Runs the reference script on the NCHW batch; center given for CutMix.
Reference reference(const std::vector<float>& batch, const char* kind, double lambda, int cx = 0, int cy = 0) {
  test::TempDir dir;
  test::write_bytes(dir / "in.raw", bytes_of(batch));
  test::write_bytes(dir / "labels.raw", bytes_of(kLabels));
  std::ostringstream weight;
  weight.precision(17);
  weight << lambda;
  std::vector<std::string> args{(dir / "in.raw").string(), std::to_string(kN), std::to_string(kC), std::to_string(kH),
                                std::to_string(kW), std::to_string(kClasses), (dir / "labels.raw").string(), kind,
                                weight.str()};
  if (std::string(kind) == "cutmix") {
    args.push_back(std::to_string(cx));
    args.push_back(std::to_string(cy));
  }
  args.push_back((dir / "out.raw").string());
  args.push_back((dir / "soft.raw").string());
  Reference r;
  const test::ScriptRun run = test::run_reference_script("torch_batch_mix.py", args);
  if (!run.started) return r;
  r.said = run.output;
  EXPECT_TRUE(run.ok()) << "the torch reference failed: " << r.said;
  if (!std::filesystem::exists(dir / "out.raw")) return r;
  r.batch = floats_of(test::read_bytes(dir / "out.raw"));
  r.labels = floats_of(test::read_bytes(dir / "soft.raw"));
  return r;
}

// NCHW -> NHWC of a float batch.
std::vector<float> to_nhwc(const std::vector<float>& v) {
  std::vector<float> out(v.size());
  for (int n = 0; n < kN; ++n)
    for (int c = 0; c < kC; ++c)
      for (int y = 0; y < kH; ++y)
        for (int x = 0; x < kW; ++x)
          out[(((static_cast<std::size_t>(n) * kH + y) * kW + x) * kC) + c] =
              v[((static_cast<std::size_t>(n) * kC + c) * kH + y) * kW + x];
  return out;
}

std::vector<float> run_mix(std::vector<float> batch, Layout layout, const BatchMixParams& p, const BatchMixDraw& d) {
  const BatchBuffer b{batch.data(), DType::kF32, layout, kN, kC, kH, kW};
  std::vector<std::byte> ws(batch_mix_workspace_bytes(b));
  mix_batch(b, p, d, ws);
  return batch;
}

std::vector<float> soft_labels(double w) {
  std::vector<float> out(kLabels.size() * kClasses);
  mix_labels(kLabels, kClasses, w, out);
  return out;
}

TEST(BatchMix, MixUpEqualsTorchvisionV2ForAFixedLambda) {
  const auto batch = random_batch(1);
  for (double lambda : {0.0, 0.3137, 0.5, 0.999}) {
    const Reference want = reference(batch, "mixup", lambda);
    ASSERT_FALSE(want.batch.empty()) << want.said;
    const BatchMixParams p{BatchMixKind::kMixUp, 0.2, kClasses};
    const BatchMixDraw d{lambda, {}, lambda};
    EXPECT_EQ(run_mix(batch, Layout::kNCHW, p, d), want.batch) << "lambda " << lambda;
    EXPECT_EQ(run_mix(to_nhwc(batch), Layout::kNHWC, p, d), to_nhwc(want.batch)) << "lambda " << lambda;
    EXPECT_EQ(soft_labels(lambda), want.labels) << "lambda " << lambda;
  }
}

TEST(BatchMix, CutMixEqualsTorchvisionV2ForAFixedLambdaAndCentre) {
  const auto batch = random_batch(2);
  for (const auto& [lambda, cx, cy] : {std::tuple{0.4, 8, 6}, std::tuple{0.9, 0, 0}, std::tuple{0.05, 16, 11},
                                      std::tuple{1.0, 3, 3}}) {
    const Reference want = reference(batch, "cutmix", lambda, cx, cy);
    ASSERT_FALSE(want.batch.empty()) << want.said;
    const Rect box = cutmix_box(lambda, cx, cy, {kW, kH});
    std::istringstream said(want.said);
    int x1 = 0, y1 = 0, x2 = 0, y2 = 0;
    double lam_adjusted = 0;
    said >> x1 >> y1 >> x2 >> y2 >> lam_adjusted;
    EXPECT_EQ(box, (Rect{x1, y1, x2 - x1, y2 - y1})) << "lambda " << lambda;
    const double label_lambda = 1.0 - static_cast<double>(box.width) * box.height / (kW * kH);
    EXPECT_EQ(label_lambda, lam_adjusted);
    const BatchMixParams p{BatchMixKind::kCutMix, 1.0, kClasses};
    const BatchMixDraw d{lambda, box, label_lambda};
    EXPECT_EQ(run_mix(batch, Layout::kNCHW, p, d), want.batch) << "lambda " << lambda;
    EXPECT_EQ(run_mix(to_nhwc(batch), Layout::kNHWC, p, d), to_nhwc(want.batch)) << "lambda " << lambda;
    EXPECT_EQ(soft_labels(label_lambda), want.labels);
  }
}

TEST(BatchMix, DrawsDependOnSeedEpochAndBatchOnlyAndFollowBeta) {
  const BatchMixParams mixup{BatchMixKind::kMixUp, 0.2, 10};
  const BatchMixParams cutmix{BatchMixKind::kCutMix, 1.0, 10};
  // The same (seed, epoch, batch) gives the same draw on any thread, in any order.
  std::vector<BatchMixDraw> serial;
  for (int b = 0; b < 64; ++b) serial.push_back(draw_batch_mix(cutmix, 42, 3, b, {224, 224}));
  std::vector<BatchMixDraw> parallel(64);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int b = 63 - t; b >= 0; b -= 4) parallel[b] = draw_batch_mix(cutmix, 42, 3, b, {224, 224});
    });
  }
  for (auto& t : threads) t.join();
  for (int b = 0; b < 64; ++b) {
    EXPECT_EQ(serial[b].lambda, parallel[b].lambda);
    EXPECT_EQ(serial[b].box, parallel[b].box);
  }
  EXPECT_NE(draw_batch_mix(mixup, 42, 3, 0, {}).lambda, draw_batch_mix(mixup, 42, 4, 0, {}).lambda);
  EXPECT_NE(draw_batch_mix(mixup, 42, 3, 0, {}).lambda, draw_batch_mix(mixup, 43, 3, 0, {}).lambda);
  // Beta(a, a): mean 1/2, variance 1 / (4 (2a + 1)).
  for (double alpha : {0.2, 1.0, 3.0}) {
    double sum = 0, sq = 0;
    constexpr int kDraws = 20000;
    for (int b = 0; b < kDraws; ++b) {
      const double l = draw_batch_mix({BatchMixKind::kMixUp, alpha, 10}, 7, 0, b, {}).lambda;
      ASSERT_TRUE(l >= 0.0 && l <= 1.0) << l;
      sum += l;
      sq += l * l;
    }
    const double mean = sum / kDraws;
    const double var = sq / kDraws - mean * mean;
    EXPECT_NEAR(mean, 0.5, 0.01) << "alpha " << alpha;
    EXPECT_NEAR(var, 1.0 / (4.0 * (2.0 * alpha + 1.0)), 0.01) << "alpha " << alpha;
  }
}

TEST(BatchMix, CutMixCopiesU8AndHalfMixUpFollowsF32) {
  std::vector<std::uint8_t> u8(static_cast<std::size_t>(kN) * kC * kH * kW);
  for (std::size_t i = 0; i < u8.size(); ++i) u8[i] = static_cast<std::uint8_t>(i * 37);
  const auto before = u8;
  const BatchBuffer b{u8.data(), DType::kU8, Layout::kNCHW, kN, kC, kH, kW};
  std::vector<std::byte> ws(batch_mix_workspace_bytes(b));
  const Rect box{2, 3, 5, 4};
  mix_batch(b, {BatchMixKind::kCutMix, 1.0, kClasses}, {0.5, box, 0.9}, ws);
  const std::size_t sample = static_cast<std::size_t>(kC) * kH * kW;
  for (int n = 0; n < kN; ++n) {
    const int from = (n + kN - 1) % kN;
    for (int c = 0; c < kC; ++c) {
      for (int y = 0; y < kH; ++y) {
        for (int x = 0; x < kW; ++x) {
          const std::size_t at = (static_cast<std::size_t>(c) * kH + y) * kW + x;
          const bool inside = x >= box.x && x < box.x + box.width && y >= box.y && y < box.y + box.height;
          ASSERT_EQ(u8[n * sample + at], before[(inside ? from : n) * sample + at]);
        }
      }
    }
  }
  EXPECT_THROW(mix_batch(b, {BatchMixKind::kMixUp, 1.0, kClasses}, {0.5, {}, 0.5}, ws), Error);
  // f16 and bf16 MixUp: within the dtype's rounding of the f32 result.
  const auto batch = random_batch(3);
  const auto f32 = run_mix(batch, Layout::kNCHW, {BatchMixKind::kMixUp, 1.0, kClasses}, {0.37, {}, 0.37});
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    std::vector<std::uint16_t> half(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) half[i] = dtype == DType::kF16 ? float_to_f16(batch[i]) : float_to_bf16(batch[i]);
    const BatchBuffer hb{half.data(), dtype, Layout::kNCHW, kN, kC, kH, kW};
    std::vector<std::byte> hws(batch_mix_workspace_bytes(hb));
    mix_batch(hb, {BatchMixKind::kMixUp, 1.0, kClasses}, {0.37, {}, 0.37}, hws);
    const double tolerance = dtype == DType::kF16 ? 4e-3 : 3e-2;  // a few ulps at |x| <= 4
    for (std::size_t i = 0; i < half.size(); ++i) {
      const float got = dtype == DType::kF16 ? f16_to_float(half[i]) : bf16_to_float(half[i]);
      ASSERT_NEAR(got, f32[i], tolerance * std::max(1.0f, std::fabs(f32[i]))) << i;
    }
  }
}

TEST(BatchMix, BadValuesAreRefused) {
  EXPECT_THROW(check_batch_mix({BatchMixKind::kMixUp, 0.0, 10}), Error);
  EXPECT_THROW(check_batch_mix({BatchMixKind::kMixUp, std::nan(""), 10}), Error);
  EXPECT_THROW(check_batch_mix({BatchMixKind::kCutMix, 1.0, 0}), Error);
  std::vector<float> out(2 * 3);
  EXPECT_THROW(mix_labels(std::vector<std::int32_t>{0, 3}, 3, 0.5, out), Error);  // label 3 of 3 classes
  EXPECT_THROW(mix_labels(std::vector<std::int32_t>{0, -1}, 3, 0.5, out), Error);
  std::vector<float> small(5);
  EXPECT_THROW(mix_labels(std::vector<std::int32_t>{0, 1}, 3, 0.5, small), Error);
  auto batch = random_batch(4);
  const BatchBuffer b{batch.data(), DType::kF32, Layout::kNCHW, kN, kC, kH, kW};
  std::vector<std::byte> short_ws(batch_mix_workspace_bytes(b) - 1);
  EXPECT_THROW(mix_batch(b, {BatchMixKind::kMixUp, 1.0, kClasses}, {0.5, {}, 0.5}, short_ws), Error);
  // One sample pairs with itself: MixUp leaves it (up to rounding), CutMix copies it onto itself.
  std::vector<float> one(batch.begin(), batch.begin() + kC * kH * kW);
  const auto original = one;
  const BatchBuffer ob{one.data(), DType::kF32, Layout::kNCHW, 1, kC, kH, kW};
  std::vector<std::byte> ows(batch_mix_workspace_bytes(ob));
  mix_batch(ob, {BatchMixKind::kCutMix, 1.0, kClasses}, {0.5, {1, 1, 4, 4}, 0.5}, ows);
  EXPECT_EQ(one, original);
}

}  // namespace
}  // namespace sluice::stages
