// SampleProgram's row-band path (sample_bands.cpp), the way through an image larger than the
// memory its worker holds: byte for byte the samples of the whole-region path, for every kind of
// geometry (resize and crop, random resized crop with flip, a plain crop, a padded random crop, a
// downscale without antialias that skips source rows, a crop wholly in the padding), every JPEG
// kind, u8 and normalised f32 outputs, and the decoded-image cache's full-scale path.
#include <gtest/gtest.h>

#include <memory>

#include "sluice/core/error.hpp"
#include "sluice/memory/budget.hpp"
#include "stages/source/item_table.hpp"
#include "stages/program/sample_program.hpp"
#include "one_file_table.hpp"
#include "test_support.hpp"

namespace sluice::stages {
namespace {

using Bytes = std::vector<std::uint8_t>;

using test::one_file;

struct Chain {
  const char* name;
  std::vector<GeometryStep> steps;
  Size2 output;
};

std::vector<Chain> chains() {
  return {
      {"eval resize_shorter+center_crop", {{spec::ResizeShorter{256, {}}, 1}, {spec::CenterCrop{224, 224}, 2}}, {224, 224}},
      {"random_resized_crop+flip", {{spec::RandomResizedCrop{160, 160, {}}, 3}, {spec::FlipHorizontal{0.5, {}}, 4}}, {160, 160}},
      {"center_crop only (a copy)", {{spec::CenterCrop{300, 200}, 5}}, {300, 200}},
      {"random_crop with padding", {{spec::RandomCrop{240, 240, {.padding = 40, .fill = 7}}, 6}}, {240, 240}},
      {"resize without antialias (skips rows)", {{spec::Resize{70, 50, {.antialias = false}}, 7}}, {70, 50}},
      {"crop wholly in the padding", {{spec::RandomCrop{8, 8, {.padding = 5000, .fill = 9}}, 8}}, {8, 8}},
  };
}

struct Output {
  const char* name;
  NormalizeOptions options;
};

struct SampleRun {
  Bytes sample;
  std::size_t decoded_capacity = 0;
};

// One sample of `jpeg` through `program`, with the workspace's buffers attached to `budget` (or
// not, when null), for several epochs so random crops vary.
SampleRun run(const SampleProgram& program, SampleProgram::Workspace& ws, const std::string& path, std::int64_t epoch) {
  SampleRun r;
  r.sample.resize(program.sample_bytes());
  program.run(one_file(path), 0, SampleKey{epoch, 3, 0}, ws, r.sample.data());
  r.decoded_capacity = ws.decoded.capacity();
  return r;
}

TEST(SampleBands, BandPathEqualsTheWholeRegionPathByteForByte) {
  test::TempDir dir;
  struct File {
    const char* name;
    Bytes jpeg;
  };
  const int w = 1603, h = 1201;
  const std::vector<File> files = {
      {"4:2:0", test::encode_jpeg(test::make_pattern(w, h, 3, 1), w, h, 3, {.quality = 85})},
      {"progressive 4:4:4", test::encode_jpeg(test::make_pattern(w, h, 3, 2), w, h, 3,
                                              {.quality = 85, .subsampling = 0, .progressive = true})},
      {"grey", test::encode_jpeg(test::make_pattern(w, h, 1, 3), w, h, 1, {.quality = 85, .subsampling = 3})},
      {"CMYK", test::encode_jpeg(test::make_pattern(w, h, 4, 4), w, h, 4, {.quality = 85, .cmyk = true})},
  };
  const std::vector<Output> outputs = {
      {"u8 NHWC", {.mean = {}, .std = {}, .layout = Layout::kNHWC, .dtype = DType::kU8}},
      {"f32 NCHW", {.mean = {0.5f, 0.4f, 0.3f}, .std = {0.2f, 0.25f, 0.3f}, .layout = Layout::kNCHW, .dtype = DType::kF32}},
  };
  int banded = 0;
  for (const File& f : files) {
    const std::string path = (dir / (std::string("img") + std::to_string(&f - files.data()) + ".jpg")).string();
    test::write_bytes(path, f.jpeg);
    for (const Chain& chain : chains()) {
      for (const Output& output : outputs) {
        SampleProgramConfig config;
        config.geometry = chain.steps;
        config.normalize = output.options;
        config.output = chain.output;
        const SampleProgram program(config);
        auto whole = program.make_workspace();
        // A share far below any region of this image, and nothing else free.
        MemoryBudget budget(64 << 20);
        WorkspaceShare share{.file = 4 << 20, .decoded = 64 << 10, .resized = 1 << 20, .scratch = 1 << 20,
                             .decoder = {.planes = 0, .coefficients = 64 << 20 >> 1}};
        auto tight = program.make_workspace(budget, share);
        auto rest = budget.try_reserve(budget.available(), MemoryUse::kBatches);
        ASSERT_TRUE(rest);
        for (const std::int64_t epoch : {0, 1, 2}) {
          const std::string what = std::string(f.name) + ", " + chain.name + ", " + output.name + ", epoch " +
                                   std::to_string(epoch);
          const SampleRun want = run(program, *whole, path, epoch);
          const SampleRun got = run(program, *tight, path, epoch);
          ASSERT_TRUE(got.sample == want.sample) << what;
          EXPECT_LE(got.decoded_capacity, std::size_t{64} << 10) << what << ": grew past the share";
          banded += want.decoded_capacity > got.decoded_capacity;
        }
      }
    }
  }
  EXPECT_GE(banded, 4 * 5 * 2 * 3) << "the band path did not run";
}

// With a decoded-image cache the samples come from the whole image at full scale; one too large
// for the worker is decoded at full scale in bands and not cached, with the cached path's bytes.
TEST(SampleBands, DecodedCacheFallsBackToFullScaleBandsWithTheSameSample) {
  test::TempDir dir;
  const int w = 1203, h = 905;
  const std::string path = (dir / "big.jpg").string();
  test::write_bytes(path, test::encode_jpeg(test::make_pattern(w, h, 3, 9), w, h, 3, {.quality = 85}));
  SampleProgramConfig config;
  config.cache_point = CachePoint::kDecoded;
  config.geometry = chains()[1].steps;
  config.normalize = {.mean = {}, .std = {}, .layout = Layout::kNHWC, .dtype = DType::kU8};
  config.output = chains()[1].output;
  MemoryBudget cache_budget(0);
  MemoryCacheStore cache(8, 0, cache_budget);
  const SampleProgram program(config, SampleCaches{&cache, nullptr});
  auto whole = program.make_workspace();
  MemoryBudget budget(32 << 20);
  auto tight = program.make_workspace(budget, WorkspaceShare{.file = 4 << 20, .decoded = 64 << 10,
                                                             .resized = 1 << 20, .scratch = 1 << 20, .decoder = {}});
  auto rest = budget.try_reserve(budget.available(), MemoryUse::kBatches);
  for (const std::int64_t epoch : {0, 1}) {
    const SampleRun banded = run(program, *tight, path, epoch);  // first: nothing cached yet
    const SampleRun cached = run(program, *whole, path, epoch);
    EXPECT_TRUE(banded.sample == cached.sample) << "epoch " << epoch;
  }
  EXPECT_LE(tight->decoded.capacity(), std::size_t{64} << 10);
}

// A band that cannot fit: an image whose every row is wider than the budget can ever give fails
// the sample with kTooLarge (skippable) naming the bytes, at once.
TEST(SampleBands, ARowWiderThanTheBudgetIsTooLarge) {
  test::TempDir dir;
  const std::string path = (dir / "wide.jpg").string();
  test::write_bytes(path, test::encode_jpeg(test::make_pattern(16000, 16, 3, 2), 16000, 16, 3, {.quality = 80}));
  SampleProgramConfig config;
  config.geometry = {{spec::Resize{64, 64, {}}, 1}};
  config.decode.dct_scaling = false;
  config.normalize = {.mean = {}, .std = {}, .layout = Layout::kNHWC, .dtype = DType::kU8};
  config.output = {64, 64};
  const SampleProgram program(config);
  MemoryBudget budget(8 << 20);
  auto ws = program.make_workspace(budget, WorkspaceShare{.file = 1 << 20, .decoded = 16 << 10, .resized = 64 << 10,
                                                          .scratch = 64 << 10, .decoder = {}});
  auto rest = budget.try_reserve(budget.available(), MemoryUse::kBatches);
  Bytes out(program.sample_bytes());
  try {
    program.run(one_file(path), 0, SampleKey{}, *ws, out.data());
    FAIL() << "decoded without the memory";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTooLarge) << e.what();
    EXPECT_EQ(e.path(), path);
    EXPECT_NE(e.cause().find("raise the budget by at least"), std::string::npos) << e.cause();
  }
}

}  // namespace
}  // namespace sluice::stages
