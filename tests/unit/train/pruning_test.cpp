// Magnitude pruning: the schedule against TF Model Optimization's PolynomialDecay worked by hand,
// masks that hit their sparsity exactly, pruned weights that stay zero while training goes on,
// the same masks and weights at 1 and 3 threads, and the compressed weights: a bit-exact round
// trip, smaller than dense in memory and on disk, and clear errors for damaged files.
#include <gtest/gtest.h>

#include <cmath>
#include <bit>
#include <cstdio>
#include <cstring>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "model_test_support.hpp"
#include "sluice/core/error.hpp"
#include "sluice/train/weights_file.hpp"
#include "sluice/train/compressed_weights.hpp"
#include "sluice/train/layers.hpp"
#include "sluice/train/pruning.hpp"
#include "sluice/train/trainer.hpp"

namespace sluice::train {
namespace {

namespace fs = std::filesystem;
using test::HostRig;
using test::values_of;

TEST(PolynomialDecay, MatchesTheTfFormulaWorkedByHand) {
  // tfmot.sparsity.keras.PolynomialDecay(initial_sparsity=0.1, final_sparsity=0.8,
  // begin_step=100, end_step=1100, power=3, frequency=100):
  // sparsity = 0.8 + (0.1 - 0.8) * (1 - clamp((step - 100) / 1000, 0, 1))^3.
  const PolynomialDecay s{.initial_sparsity = 0.1, .final_sparsity = 0.8, .begin_step = 100, .end_step = 1100,
                          .power = 3, .frequency = 100};
  EXPECT_DOUBLE_EQ(s.sparsity(0), 0.1);      // before begin: p clamps to 0
  EXPECT_DOUBLE_EQ(s.sparsity(100), 0.1);
  EXPECT_NEAR(s.sparsity(350), 0.8 - 0.7 * 0.421875, 1e-12);  // p = 0.25, (0.75)^3
  EXPECT_NEAR(s.sparsity(600), 0.8 - 0.7 * 0.125, 1e-12);     // p = 0.5
  EXPECT_NEAR(s.sparsity(1000), 0.8 - 0.7 * 0.001, 1e-12);    // p = 0.9
  EXPECT_DOUBLE_EQ(s.sparsity(1100), 0.8);
  EXPECT_DOUBLE_EQ(s.sparsity(5000), 0.8);   // after end: p clamps to 1
  // Power 1 is linear.
  const PolynomialDecay linear{.initial_sparsity = 0.0, .final_sparsity = 0.5, .begin_step = 0, .end_step = 10,
                               .power = 1, .frequency = 1};
  EXPECT_NEAR(linear.sparsity(4), 0.2, 1e-12);
}

TEST(PolynomialDecay, PrunesEveryFrequencyStepsWithinBeginAndEnd) {
  const PolynomialDecay s{.initial_sparsity = 0.0, .final_sparsity = 0.8, .begin_step = 100, .end_step = 1100,
                          .power = 3, .frequency = 100};
  EXPECT_FALSE(s.should_prune(0));
  EXPECT_FALSE(s.should_prune(99));
  EXPECT_TRUE(s.should_prune(100));
  EXPECT_FALSE(s.should_prune(150));
  EXPECT_TRUE(s.should_prune(200));
  EXPECT_TRUE(s.should_prune(1100));
  EXPECT_FALSE(s.should_prune(1200));
}

TEST(PolynomialDecay, RejectsWhatTfRejects) {
  auto bad = [](PolynomialDecay s) { EXPECT_THROW(s.validate(), Error); };
  bad({.final_sparsity = 1.0});
  bad({.initial_sparsity = -0.1});
  bad({.begin_step = -1});
  bad({.begin_step = 10, .end_step = 5});
  bad({.frequency = 0});
  EXPECT_NO_THROW(PolynomialDecay{}.validate());
}

TEST(MagnitudeMask, KeepsExactlyTheLargestAndHitsTheSparsityWithinOneElement) {
  for (const std::int64_t n : {1, 7, 64, 65, 1000, 4099}) {
    const std::vector<float> v = test::random_values(n, static_cast<std::uint64_t>(n));
    for (const double s : {0.0, 0.1, 0.5, 0.8, 0.95, 0.999}) {
      const PruneMask m = magnitude_mask(v.data(), n, s);
      std::int64_t kept = 0;
      float smallest_kept = INFINITY, largest_pruned = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const float a = std::fabs(v[static_cast<std::size_t>(i)]);
        if (m.keeps(i)) {
          ++kept;
          smallest_kept = std::min(smallest_kept, a);
        } else {
          largest_pruned = std::max(largest_pruned, a);
        }
      }
      EXPECT_EQ(kept, m.kept);
      EXPECT_GE(kept, 1);
      if (kept > 1) {
        EXPECT_LE(std::fabs(static_cast<double>(n - kept) - s * static_cast<double>(n)), 1.0) << n << " " << s;
      }
      EXPECT_GE(smallest_kept, largest_pruned) << n << " " << s;
    }
  }
}

TEST(MagnitudeMask, BreaksTiesByIndex) {
  const std::vector<float> v(10, 0.5f);
  const PruneMask m = magnitude_mask(v.data(), 10, 0.7);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(m.keeps(i), i < 3) << i;
}

std::unique_ptr<Sequential> small_cnn(Context& ctx, std::uint64_t seed) {
  auto m = std::make_unique<Sequential>(Shape{1, 8, 8});
  m->add<Conv2D>(ctx, Conv2DOptions{.in_channels = 1, .out_channels = 8});
  m->add<BatchNorm>(ctx, BatchNormOptions{.channels = 8});
  m->add<ReLU>();
  m->add<MaxPool2D>();
  m->add<SeparableConv2D>(ctx, SeparableConv2DOptions{.in_channels = 8, .out_channels = 16});
  m->add<BatchNorm>(ctx, BatchNormOptions{.channels = 16});
  m->add<ReLU>();
  m->add<Flatten>();
  m->add<Dense>(ctx, DenseOptions{.in_features = 16 * 4 * 4, .out_features = 32});
  m->add<ReLU>();
  m->add<Dense>(ctx, DenseOptions{.in_features = 32, .out_features = 4});
  m->initialize(ctx, seed);
  return m;
}

struct PrunedRun {
  std::vector<std::vector<float>> weights;
  std::vector<PruneMask> masks;
};

// Trains the small CNN for `steps` steps with pruning on the schedule, from seed 3.
PrunedRun train_pruned(Context& ctx, Sequential& model, const PolynomialDecay& schedule, int steps, bool adam = false) {
  std::unique_ptr<Optimizer> opt;
  if (adam) {
    opt = std::make_unique<AdamW>(AdamWOptions{.learning_rate = 0.01f});
  } else {
    opt = std::make_unique<Sgd>(SgdOptions{.learning_rate = 0.05f});
  }
  Trainer trainer(ctx, model, *opt);
  MagnitudePruner pruner(model.parameters(), schedule);
  const std::int64_t n = 128, batch = 32;
  test::ToySet set = test::toy_set(n, 1, 8, 4, 99);
  for (int s = 0; s < steps; ++s) {
    const std::int64_t b = (s * batch) % n;
    TensorView view{set.images.data() + b * 64, DType::kF32, {batch, 1, 8, 8}};
    trainer.step(view, std::span<const std::int32_t>(set.labels.data() + b, batch));
    pruner.after_step(ctx, trainer.steps() - 1);
  }
  PrunedRun r;
  for (const Parameter& p : model.parameters()) r.weights.push_back(values_of(ctx, *p.value));
  r.masks = pruner.masks();
  return r;
}

TEST(MagnitudePruner, PrunesOnlyWeightTensorsAndEachToItsTarget) {
  HostRig rig;
  auto model = small_cnn(rig.ctx, 3);
  MagnitudePruner pruner(model->parameters(), PolynomialDecay{});
  // conv, depthwise, pointwise, two dense weights; no bias, no BatchNorm gamma or beta.
  ASSERT_EQ(pruner.masks().size(), 5u);
  for (const PruneMask& m : pruner.masks()) {
    EXPECT_TRUE(m.name.ends_with("weight") || m.name.ends_with("depthwise") || m.name.ends_with("pointwise")) << m.name;
  }
  pruner.update_masks(rig.ctx, 0.8);
  for (const Parameter& p : model->parameters()) {
    const std::vector<float> v = values_of(rig.ctx, *p.value);
    const auto zeros = std::count(v.begin(), v.end(), 0.0f);
    if (is_prunable(p)) {
      EXPECT_LE(std::fabs(static_cast<double>(zeros) - 0.8 * static_cast<double>(v.size())), 1.0) << p.name;
    } else if (p.name.ends_with("bias") || p.name.ends_with("beta")) {
      EXPECT_EQ(zeros, static_cast<long>(v.size())) << p.name;  // they start at zero and stay untouched
    } else {
      EXPECT_EQ(zeros, 0) << p.name;  // BatchNorm's gamma (1)
    }
  }
  EXPECT_NEAR(pruner.sparsity(), 0.8, 0.01);
  EXPECT_NEAR(measured_sparsity(rig.ctx, model->parameters()), pruner.sparsity(), 1e-12);
}

TEST(MagnitudePruner, PrunedWeightsStayZeroWhileTrainingGoesOn) {
  for (const bool adam : {false, true}) {
    HostRig rig;
    auto model = small_cnn(rig.ctx, 3);
    // Masks recomputed at steps 0, 4, 8 (the last at 0.8), then kept for the 11 steps after.
    const PolynomialDecay schedule{.final_sparsity = 0.8, .begin_step = 0, .end_step = 8, .frequency = 4};
    const PrunedRun r = train_pruned(rig.ctx, *model, schedule, 20, adam);
    const std::vector<Parameter> params = model->parameters();
    std::size_t k = 0;
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (!is_prunable(params[i])) continue;
      const PruneMask& m = r.masks[k++];
      EXPECT_LE(std::fabs(static_cast<double>(m.pruned()) - 0.8 * static_cast<double>(m.elements)), 1.0) << m.name;
      std::int64_t nonzero_kept = 0;
      for (std::int64_t e = 0; e < m.elements; ++e) {
        const float w = r.weights[i][static_cast<std::size_t>(e)];
        if (!m.keeps(e)) {
          ASSERT_EQ(std::bit_cast<std::uint32_t>(w), 0u) << m.name << "[" << e << "] adam " << adam;
        } else if (w != 0.0f) {
          ++nonzero_kept;
        }
      }
      EXPECT_EQ(nonzero_kept, m.kept) << m.name;  // the kept ones kept training
    }
  }
}

TEST(MagnitudePruner, SameMasksAndWeightsAtOneAndThreeThreads) {
  const PolynomialDecay schedule{.final_sparsity = 0.7, .begin_step = 2, .end_step = 10, .frequency = 2};
  HostRig one(1), three(3);
  auto m1 = small_cnn(one.ctx, 5);
  auto m3 = small_cnn(three.ctx, 5);
  const PrunedRun a = train_pruned(one.ctx, *m1, schedule, 14);
  const PrunedRun b = train_pruned(three.ctx, *m3, schedule, 14);
  ASSERT_EQ(a.masks.size(), b.masks.size());
  for (std::size_t i = 0; i < a.masks.size(); ++i) EXPECT_EQ(a.masks[i].bits, b.masks[i].bits) << a.masks[i].name;
  EXPECT_EQ(a.weights, b.weights);
}

class CompressedFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sluice_pruning_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    model_ = small_cnn(rig_.ctx, 3);
    MagnitudePruner pruner(model_->parameters(), PolynomialDecay{});
    pruner.update_masks(rig_.ctx, 0.8);
    path_ = (dir_ / "pruned.spw").string();
    save_pruned_weights(rig_.ctx, *model_, path_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<std::uint8_t> bytes() const {
    std::ifstream in(path_, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  void write(const std::vector<std::uint8_t>& b) const {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  }
  std::vector<std::vector<float>> all_values(Sequential& m) {
    std::vector<std::vector<float>> out;
    for (const Parameter& p : m.parameters()) out.push_back(values_of(rig_.ctx, *p.value));
    for (const Buffer& b : m.buffers()) out.push_back(values_of(rig_.ctx, *b.value));
    return out;
  }
  // Loading `path_` into a fresh model fails with `code` and a message containing `text`, and
  // leaves the model's weights as they were.
  void expect_load_error(ErrorCode code, const std::string& text) {
    auto other = small_cnn(rig_.ctx, 11);
    const auto before = all_values(*other);
    try {
      load_pruned_weights(rig_.ctx, *other, path_);
      ADD_FAILURE() << "no error for " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
    EXPECT_EQ(all_values(*other), before);
  }

  HostRig rig_;
  fs::path dir_;
  std::string path_;
  std::unique_ptr<Sequential> model_;
};

TEST_F(CompressedFile, RoundTripRestoresTheMaskedWeightsBitForBit) {
  auto other = small_cnn(rig_.ctx, 11);
  ASSERT_NE(all_values(*other), all_values(*model_));
  load_pruned_weights(rig_.ctx, *other, path_);
  const auto a = all_values(*model_), b = all_values(*other);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size());
    EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].size() * 4), 0) << i;
  }
  // The resident form too.
  const CompressedWeights c = CompressedWeights::from_model(rig_.ctx, *model_);
  auto third = small_cnn(rig_.ctx, 12);
  c.restore(rig_.ctx, *third);
  EXPECT_EQ(all_values(*third), a);
}

TEST_F(CompressedFile, SmallerThanDenseInMemoryAndOnDisk) {
  const CompressedWeights c = CompressedWeights::from_model(rig_.ctx, *model_);
  // 80% sparsity: a pruned tensor keeps n / 8 + 0.8 n of its 4 n bytes.
  EXPECT_LT(static_cast<double>(c.resident_bytes()), 0.4 * static_cast<double>(c.dense_bytes()))
      << c.resident_bytes() << " vs " << c.dense_bytes();
  const std::string dense = (dir_ / "dense.wt").string();
  save_weights(rig_.ctx, *model_, dense);
  EXPECT_LT(static_cast<double>(fs::file_size(path_)), 0.5 * static_cast<double>(fs::file_size(dense)))
      << fs::file_size(path_) << " vs " << fs::file_size(dense);
  for (const CompressedTensor& t : c.tensors()) {
    if (t.sparse) {
      EXPECT_EQ(t.bytes(), t.bitmap.size() * 8 + static_cast<std::size_t>(t.nonzeros()) * 4) << t.name;
    }
  }
}

TEST_F(CompressedFile, AnUnprunedModelStaysDenseAndNoLarger) {
  auto dense = small_cnn(rig_.ctx, 4);
  const CompressedWeights c = CompressedWeights::from_model(rig_.ctx, *dense);
  EXPECT_EQ(c.resident_bytes(), c.dense_bytes());
  for (const CompressedTensor& t : c.tensors()) EXPECT_FALSE(t.sparse) << t.name;
  auto other = small_cnn(rig_.ctx, 5);
  c.restore(rig_.ctx, *other);
  EXPECT_EQ(all_values(*other), all_values(*dense));
}

TEST_F(CompressedFile, Truncated) {
  const auto b = bytes();
  write({b.begin(), b.begin() + 20});
  expect_load_error(ErrorCode::kCorruptData, "truncated");
  write({b.begin(), b.end() - 5});
  expect_load_error(ErrorCode::kCorruptData, "truncated");
}

TEST_F(CompressedFile, CorruptBytes) {
  auto b = bytes();
  b[b.size() - 3] ^= 0x40;  // a value
  write(b);
  expect_load_error(ErrorCode::kCorruptData, "checksum mismatch");
  b = bytes();
  b.push_back(0);
  write(b);
  expect_load_error(ErrorCode::kCorruptData, "after its blob");
}

TEST_F(CompressedFile, BadMagicAndOtherVersion) {
  auto b = bytes();
  b[7] = 'X';
  write(b);
  expect_load_error(ErrorCode::kUnsupportedFormat, "bad magic");
  b[7] = 'P';
  b[8] = 9;
  write(b);
  expect_load_error(ErrorCode::kUnsupportedFormat, "version 9");
}

TEST_F(CompressedFile, AnotherModel) {
  auto m = std::make_unique<Sequential>(Shape{16});
  m->add<Dense>(rig_.ctx, DenseOptions{.in_features = 16, .out_features = 4});
  m->initialize(rig_.ctx, 1);
  EXPECT_THROW(load_pruned_weights(rig_.ctx, *m, path_), Error);
  EXPECT_THROW(load_pruned_weights(rig_.ctx, *m, (dir_ / "missing.spw").string()), Error);
}

}  // namespace
}  // namespace sluice::train
