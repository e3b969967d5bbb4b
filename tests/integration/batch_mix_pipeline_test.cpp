// mixup() and cutmix() in a pipeline: each delivered batch equals the unmixed pipeline's batch
// mixed by the kernel with the batch's draw (so the loader mixes the complete batch once, with the
// draw of (seed, epoch, batch index)); soft labels f32 (N, num_classes) in outputs() and on the
// batch; the same bytes at 1 and 3 threads; a resumed run delivers the uninterrupted run's batches;
// through the transfer ring (to_device(host()) staged through it, the CPU stand-in for a GPU) the
// delivered batch and soft labels equal the host ring's, normalised on the device too (CutMix);
// the JSON form; what cannot run is refused at build with the stage's name.
#include <gtest/gtest.h>

#include <cstring>

#include "pipeline_support.hpp"
#include "sluice/pipeline/json_spec.hpp"
#include "stages/augment/batch_mix.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

constexpr int kItems = 30;
constexpr int kBatch = 8;

struct MixCase {
  bool mixup = true;
  bool cutmix = false;
  DType dtype = DType::kF32;
};

class BatchMixPipeline : public ::testing::Test {
 protected:
  void SetUp() override { items_ = test::make_coded_items(dir_.path(), kItems); }
  Pipeline pipeline(const MixCase& c, bool mixing = true) const {
    Pipeline p = Pipeline::from_items(items_).shuffle_files(4).read().decode_jpeg().resize(12, 10).flip_horizontal();
    p.normalize({.mean = {}, .std = {}, .layout = Layout::kNCHW, .dtype = c.dtype}).batch(kBatch);
    if (mixing && c.mixup) p.mixup(0.4, kItems);
    if (mixing && c.cutmix) p.cutmix(1.0, kItems);
    return p;
  }
  test::TempDir dir_;
  std::vector<Item> items_;
};

std::uint64_t hash_bytes(const void* data, std::size_t n, std::uint64_t h) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}
std::uint64_t hash_batch(const Batch& b) {
  std::uint64_t h = hash_bytes(b.data().data, b.data().bytes(), 1469598103934665603ULL);
  return hash_bytes(b.soft_labels().data, b.soft_labels().bytes(), h);
}

TEST_F(BatchMixPipeline, OutputsDescribeSoftLabels) {
  Loader loader = pipeline({}).build({.threads = 1, .seed = 3});
  const auto outputs = loader.outputs();
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[1].name, "labels");
  EXPECT_EQ(outputs[1].shape, (Shape{kBatch, kItems}));
  EXPECT_EQ(outputs[1].dtype, DType::kF32);
  EXPECT_EQ(outputs[1].layout, "NC");
}

// Each batch is the unmixed batch mixed with (seed, epoch, batch)'s draw; both stages: each batch
// uses the one the plan picks.
void expect_batches_are_mixed(Loader& mixed, Loader& plain, const stages::BatchMixPlan& plan) {
  struct Copy {
    std::vector<std::uint8_t> data;
    std::vector<std::int32_t> labels;
    DType dtype;
    Shape shape;
  };
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<Copy> plain_batches;
    for (Batch& b : plain.epoch(epoch)) {
      const auto* p = static_cast<const std::uint8_t*>(b.data().data);
      plain_batches.push_back({{p, p + b.data().bytes()}, {b.labels().begin(), b.labels().end()}, b.data().dtype, b.data().shape});
    }
    std::size_t k = 0;
    for (Batch& b : mixed.epoch(epoch)) {
      ASSERT_LT(k, plain_batches.size());
      Copy& ref = plain_batches[k++];
      const auto [params, draw] = stages::draw_batch_mix(plan, epoch, b.index(), {12, 10});
      const Shape& s = ref.shape;  // (N, C, H, W)
      const stages::BatchBuffer buffer{ref.data.data(), ref.dtype, Layout::kNCHW, static_cast<int>(s[0]),
                                       static_cast<int>(s[1]), static_cast<int>(s[2]), static_cast<int>(s[3])};
      std::vector<std::byte> ws(stages::batch_mix_workspace_bytes(buffer));
      stages::mix_batch(buffer, params, draw, ws);
      ASSERT_EQ(b.data().bytes(), ref.data.size());
      EXPECT_EQ(std::memcmp(b.data().data, ref.data.data(), ref.data.size()), 0) << "epoch " << epoch << " batch " << b.index();
      std::vector<float> soft(static_cast<std::size_t>(b.size()) * kItems);
      stages::mix_labels(ref.labels, kItems, draw.label_lambda, soft);
      ASSERT_EQ(b.soft_labels().shape, (Shape{b.size(), kItems}));
      EXPECT_EQ(std::memcmp(b.soft_labels().data, soft.data(), soft.size() * sizeof(float)), 0);
      EXPECT_TRUE(std::equal(b.labels().begin(), b.labels().end(), ref.labels.begin()));
    }
    EXPECT_EQ(k, plain_batches.size());
  }
}

TEST_F(BatchMixPipeline, MixUpBatchesAreTheKernelOnTheUnmixedBatch) {
  Loader mixed = pipeline({}).build({.threads = 2, .seed = 3});
  Loader plain = pipeline({}, false).build({.threads = 2, .seed = 3});
  expect_batches_are_mixed(mixed, plain, {{{stages::BatchMixKind::kMixUp, 0.4, kItems}}, 3});
}

TEST_F(BatchMixPipeline, MixUpOrCutMixPerBatchOnBf16) {
  const MixCase c{true, true, DType::kBF16};
  Loader mixed = pipeline(c).build({.threads = 2, .seed = 5});
  Loader plain = pipeline(c, false).build({.threads = 2, .seed = 5});
  expect_batches_are_mixed(mixed, plain,
                           {{{stages::BatchMixKind::kMixUp, 0.4, kItems}, {stages::BatchMixKind::kCutMix, 1.0, kItems}}, 5});
}

TEST_F(BatchMixPipeline, CutMixOnU8Batches) {
  const MixCase c{false, true, DType::kU8};
  Loader mixed = pipeline(c).build({.threads = 1, .seed = 6});
  Loader plain = pipeline(c, false).build({.threads = 1, .seed = 6});
  expect_batches_are_mixed(mixed, plain, {{{stages::BatchMixKind::kCutMix, 1.0, kItems}}, 6});
}

TEST_F(BatchMixPipeline, SameBatchesAtOneAndThreeThreads) {
  const MixCase c{true, true, DType::kF32};
  std::vector<std::uint64_t> one, three;
  Loader a = pipeline(c).build({.threads = 1, .seed = 8});
  Loader b = pipeline(c).build({.threads = 3, .seed = 8});
  for (int e = 0; e < 2; ++e) {
    for (Batch& x : a.epoch(e)) one.push_back(hash_batch(x));
    for (Batch& x : b.epoch(e)) three.push_back(hash_batch(x));
  }
  EXPECT_EQ(one, three);
}

TEST_F(BatchMixPipeline, ResumedRunDeliversTheUninterruptedRunsBatches) {
  const MixCase c{true, true, DType::kF32};
  std::vector<std::uint64_t> full;
  {
    Loader loader = pipeline(c).build({.threads = 2, .seed = 9});
    for (int e = 0; e < 2; ++e) {
      for (Batch& b : loader.epoch(e)) full.push_back(hash_batch(b));
    }
  }
  std::vector<std::uint8_t> state;
  {
    Loader first = pipeline(c).build({.threads = 2, .seed = 9});
    int n = 0;
    for (Batch& b : first.epoch(0)) {
      (void)b;
      if (++n == 2) break;
    }
    state = first.state();
  }
  Loader second = pipeline(c).build({.threads = 2, .seed = 9});
  second.restore(state);
  std::vector<std::uint64_t> tail;
  for (std::int64_t e = second.resume_epoch(); e < 2; ++e) {
    for (Batch& b : second.epoch(e)) tail.push_back(hash_batch(b));
  }
  EXPECT_EQ(tail, std::vector<std::uint64_t>(full.begin() + 2, full.end()));
}

// What the transfer ring delivers (device_data, device_soft_labels: host memory here) equals what
// the batch ring delivers, at 1 and 2 threads, over more batches than the ring has slots.
void expect_same_as_host_ring(Loader& host_ring, Loader& transfer_ring) {
  std::vector<std::vector<std::uint8_t>> data;
  std::vector<std::vector<float>> soft;
  for (Batch& b : host_ring.epoch(1)) {
    const auto* p = static_cast<const std::uint8_t*>(b.data().data);
    data.emplace_back(p, p + b.data().bytes());
    const auto* f = static_cast<const float*>(b.soft_labels().data);
    soft.emplace_back(f, f + b.soft_labels().shape.elements());
  }
  std::size_t k = 0;
  for (Batch& b : transfer_ring.epoch(1)) {
    ASSERT_TRUE(b.on_device());
    ASSERT_LT(k, data.size());
    ASSERT_EQ(b.device_soft_labels().shape, (Shape{b.size(), kItems}));
    ASSERT_EQ(b.device_soft_labels().dtype, DType::kF32);
    const auto* p = static_cast<const std::uint8_t*>(b.device_data().data);
    const auto* f = static_cast<const float*>(b.device_soft_labels().data);
    EXPECT_EQ(std::vector<std::uint8_t>(p, p + b.device_data().bytes()), data[k]) << "batch " << k;
    EXPECT_EQ(std::vector<float>(f, f + b.device_soft_labels().shape.elements()), soft[k]) << "batch " << k;
    ++k;
  }
  EXPECT_EQ(k, data.size());
}

TEST_F(BatchMixPipeline, ThroughTheTransferRingTheSoftLabelsTravelWithTheBatch) {
  for (int threads : {1, 2}) {
    const MixCase c{true, true, DType::kF32};
    Loader host_ring = pipeline(c).build({.threads = threads, .seed = 4});
    Loader transfer = pipeline(c).to_device(host(), {.stage_through_ring = true}).build({.threads = threads, .seed = 4});
    const auto outputs = transfer.outputs();
    ASSERT_EQ(outputs.size(), 2u);
    EXPECT_EQ(outputs[1].shape, (Shape{kBatch, kItems}));
    EXPECT_EQ(outputs[1].dtype, DType::kF32);
    expect_same_as_host_ring(host_ring, transfer);
  }
}

// CutMix copies boxes and normalising is per pixel, so mixing the u8 batch on the host and
// normalising it on the device gives the host pipeline's normalised, mixed batch.
TEST_F(BatchMixPipeline, CutMixThenNormalizeOnDeviceEqualsTheHostPipeline) {
  const NormalizeOptions norm{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}, Layout::kNCHW, DType::kF32};
  const auto base = [&] {
    return Pipeline::from_items(items_).shuffle_files(4).read().decode_jpeg().resize(12, 10).normalize(norm).batch(kBatch);
  };
  Loader host_ring = base().cutmix(1.0, kItems).build({.threads = 2, .seed = 7});
  Loader transfer = base().cutmix(1.0, kItems).to_device(host(), {.normalize_on_device = true, .stage_through_ring = true})
                        .build({.threads = 2, .seed = 7});
  expect_same_as_host_ring(host_ring, transfer);
}

// A slot holds the soft labels and one sample of scratch besides the batch, and the memory plan
// (which build() checks against the budget) counts them.
TEST_F(BatchMixPipeline, TheMemoryPlanCountsTheSoftLabelsAndScratch) {
  const std::uint64_t plain = pipeline({}, false).plan_memory({.threads = 1}).slot_bytes;
  const std::uint64_t mixed = pipeline({}).plan_memory({.threads = 1}).slot_bytes;
  const std::size_t sample = 3 * 10 * 12 * sizeof(float);
  const std::size_t mix = stages::batch_mix_slot_bytes(kBatch, kItems, sample);
  EXPECT_GT(mixed, plain);
  EXPECT_GE(mixed, kBatch * sample + mix);        // the slot holds the batch and the mixing area
  EXPECT_LE(mixed, plain + mix + 64 + 2 * 4096);  // the batch's alignment, a page's rounding each
  EXPECT_EQ(stages::batch_mix_slot_bytes(kBatch, kItems, sample), (kBatch * kItems * 4 + 63) / 64 * 64 + sample);
}

TEST_F(BatchMixPipeline, JsonFormRoundTrips) {
  const std::string text = R"({"source": {"items": []}, "stages": ["read", "decode",
      {"normalize": {}}, {"batch": {"size": 4}}, {"mixup": {"alpha": 0.2, "num_classes": 10, "seed": 7}},
      {"cutmix": {"num_classes": 10}}]})";
  const PipelineDocument doc = parse_pipeline_json(text);
  ASSERT_EQ(doc.spec.stages.size(), 6u);
  const auto& m = std::get<spec::MixUp>(doc.spec.stages[4]);
  EXPECT_EQ(m.alpha, 0.2);
  EXPECT_EQ(m.num_classes, 10);
  EXPECT_EQ(m.seed, 7u);
  EXPECT_EQ(std::get<spec::CutMix>(doc.spec.stages[5]).alpha, 1.0);
  EXPECT_EQ(to_json(parse_pipeline_json(to_json(doc))), to_json(doc));
  EXPECT_THROW(parse_pipeline_json(R"({"source": {"items": []}, "stages": [{"mixup": {"alpha": 0.2}}]})"), Error);
  EXPECT_THROW(parse_pipeline_json(R"({"source": {"items": []}, "stages": [{"mixup": {"alpha": -1, "num_classes": 3}}]})"),
               Error);
}

TEST_F(BatchMixPipeline, WhatCannotRunIsRefusedAtBuild) {
  const auto refused = [](const Pipeline& p, const std::string& words) {
    try {
      (void)p.build({.threads = 1});
      ADD_FAILURE() << "built; expected a refusal naming " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << words << ": " << e.what();
    }
  };
  refused(pipeline({true, false, DType::kU8}), "float batch");                 // mixup blends values
  // normalize_on_device leaves a u8 batch on the host, where mixup would run.
  refused(pipeline({}).to_device(host(), {.normalize_on_device = true, .stage_through_ring = true}),
          "with normalize_on_device the host batch is u8");
  refused(Pipeline::from_items(items_).read().decode_jpeg().normalize().batch(4).mixup(1.0, kItems - 1), "has label");
  refused(Pipeline::from_items(items_).read().decode_jpeg().normalize().batch(4).mixup(1.0, kItems).cutmix(1.0, 5),
          "same num_classes");
  refused(Pipeline::from_items(items_).read().decode_jpeg().mixup(1.0, kItems).batch(4), "after batch()");
  refused(Pipeline::from_items(items_).read().decode_jpeg().normalize().batch(4).mixup(0, kItems), "alpha");
  refused(Pipeline::from_items(items_).read().decode_jpeg().normalize().batch(4).mixup(1, kItems).mixup(1, kItems),
          "only one");
}

}  // namespace
}  // namespace sluice
