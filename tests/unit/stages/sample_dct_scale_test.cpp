// The DCT scale a sample is decoded at: the eval transform at 224
// (Resize(256) of the shorter side, CenterCrop(224)) on a large photograph decodes at 1/4 or 1/8,
// the largest scale that still leaves at least one decoded pixel per output pixel, and the sample
// it gives stays close to the one decoded at full size. Checked on the plan (choose_denom) and on
// what SampleProgram really decodes (its decode counter's bytes).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "stages/decode/jpeg_decoder.hpp"
#include "stages/source/item_table.hpp"
#include "stages/program/sample_program.hpp"
#include "one_file_table.hpp"
#include "test_support.hpp"

namespace sluice::stages {
namespace {

using Bytes = std::vector<std::uint8_t>;

using test::one_file;

std::vector<GeometryStep> eval_chain() {
  return {{spec::ResizeShorter{256, {}}, 1}, {spec::CenterCrop{224, 224}, 2}};
}

int planned_denom(Size2 image) { return choose_denom(plan_geometry(eval_chain(), image, {})); }

TEST(SampleDctScale, EvalAt224PicksTheLargestScaleThatKeepsAPixelPerOutputPixel) {
  // Shorter side / 256 is the decoded pixels per output pixel at full size.
  EXPECT_EQ(planned_denom({500, 375}), 1);    // 1.46
  EXPECT_EQ(planned_denom({1024, 768}), 2);   // 3.0
  EXPECT_EQ(planned_denom({3000, 2000}), 4);  // 7.8: 1/8 would leave 250 rows for 256
  EXPECT_EQ(planned_denom({2000, 3000}), 4);  // portrait: the shorter side decides
  EXPECT_EQ(planned_denom({3072, 2048}), 8);  // exactly 8
  EXPECT_EQ(planned_denom({6000, 4000}), 8);  // 1/8 is libjpeg's smallest
}

struct Decoded {
  Bytes sample;
  std::int64_t decoded_bytes = 0;  // the decode counter: pixels the decoder produced x channels
};

Decoded run_eval(const std::filesystem::path& file, bool dct_scaling) {
  SampleProgramConfig config;
  config.geometry = eval_chain();
  config.decode.dct_scaling = dct_scaling;
  config.normalize = {.mean = {}, .std = {}, .layout = Layout::kNHWC, .dtype = DType::kU8};
  config.output = {224, 224};
  const SampleProgram program(config);
  auto ws = program.make_workspace();
  Decoded out;
  out.sample.resize(program.sample_bytes());
  program.run(one_file(file.string()), 0, SampleKey{}, *ws, out.sample.data());
  out.decoded_bytes = ws->counters.bytes[StageCounters::kDecode].load();
  return out;
}

TEST(SampleDctScale, EvalOnA3000x2000PhotoDecodesAtAQuarter) {
  test::TempDir dir;
  const int width = 3000, height = 2000;
  const auto file = dir.path() / "large.jpg";
  test::write_bytes(file, test::encode_jpeg(test::make_pattern(width, height, 3, 18), width, height, 3));

  const Decoded scaled = run_eval(file, /*dct_scaling=*/true);
  const Decoded full = run_eval(file, /*dct_scaling=*/false);
  // At 1/4 the image is 750x500; the centre crop needs rows 31-469 and columns 156-594 of it, plus
  // the filter's reach. At most the whole quarter-scale image, and more than an eighth-scale
  // image holds (375x250): the decoder produced 1/4-scale pixels.
  EXPECT_LE(scaled.decoded_bytes, std::int64_t{750} * 500 * 3);
  EXPECT_GT(scaled.decoded_bytes, std::int64_t{375} * 250 * 3);
  // The same region at full size is 16 times as many pixels.
  EXPECT_GT(full.decoded_bytes, 12 * scaled.decoded_bytes);

  // One decoded pixel per output pixel or more: the sample stays close to the full-size decode's
  // (the residue is the DCT's own rounding and the resampler's shorter filter).
  double sum = 0;
  int worst = 0;
  for (std::size_t i = 0; i < full.sample.size(); ++i) {
    const int d = std::abs(static_cast<int>(scaled.sample[i]) - static_cast<int>(full.sample[i]));
    sum += d;
    worst = std::max(worst, d);
  }
  const double mae = sum / static_cast<double>(full.sample.size());
  std::printf("[ dct 1/4 vs 1/1 ] MAE %.3f  max %d\n", mae, worst);
  EXPECT_LT(mae, 1.5);
}

}  // namespace
}  // namespace sluice::stages
