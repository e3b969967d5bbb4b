// Nearest (merged) chroma upsampling asked per decode (JpegRequest::fast_upsample, behind
// DecodeOptions::fast_upsample_when_shrunk): a whole image equals tjDecompress2 with
// TJFLAG_FASTUPSAMPLE byte for byte; regions, which libjpeg reaches with jpeg_crop_scanline and
// jpeg_skip_scanlines, equal the same pixels of that whole decode at every scale, odd heights
// included (libjpeg-turbo 2.1.5's skip with the merged upsampler has known bugs: the stale
// rows_to_go of libjpeg-turbo issue 915 on odd-height 4:2:0 images is the case that needs it); and
// SampleProgram asks for it only for samples the resampler shrinks.
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <cstdlib>
#include <random>

#include "stages/decode/jpeg_decoder.hpp"
#include "stages/source/item_table.hpp"
#include "stages/program/sample_program.hpp"
#include "one_file_table.hpp"
#include "test_support.hpp"

namespace sluice::stages {
namespace {

using Bytes = std::vector<std::uint8_t>;

using test::one_file;

struct Pixels {
  int width = 0, height = 0;
  Bytes data;
};

Pixels decode(JpegDecoder& decoder, const Bytes& jpeg, const JpegRequest& request) {
  const JpegHeader header = decoder.read_header(jpeg);
  const Rect r = decoder.decoded_region(header, request);
  Pixels p{r.width, r.height, Bytes(static_cast<std::size_t>(r.width) * r.height * 3)};
  decoder.decode(jpeg, header, request, ImageView{p.data.data(), r.width, r.height, 3, std::ptrdiff_t{r.width} * 3});
  return p;
}

Pixels turbo_fast_upsample(const Bytes& jpeg) {
  tjhandle tj = tjInitDecompress();
  int w = 0, h = 0, subsampling = 0, space = 0;
  tjDecompressHeader3(tj, jpeg.data(), jpeg.size(), &w, &h, &subsampling, &space);
  Pixels p{w, h, Bytes(static_cast<std::size_t>(w) * h * 3)};
  EXPECT_EQ(tjDecompress2(tj, jpeg.data(), jpeg.size(), p.data.data(), w, 0, h, TJPF_RGB, TJFLAG_FASTUPSAMPLE), 0);
  tjDestroy(tj);
  return p;
}

// The fancy default decoder, asked for fast upsampling per request.
DecodeOptions fancy() { return DecodeOptions{}; }

TEST(JpegFastUpsample, WholeImagesEqualTurboJpegFastUpsample) {
  for (const int subsampling : {0, 1, 2}) {  // 4:4:4 has nothing to upsample: the same either way
    for (const auto& [w, h] : {std::pair{97, 61}, std::pair{500, 375}, std::pair{33, 47}}) {
      const Bytes jpeg = test::encode_jpeg(test::make_pattern(w, h, 3, 7), w, h, 3, {.subsampling = subsampling});
      JpegDecoder decoder(fancy());
      const Pixels ours = decode(decoder, jpeg, JpegRequest{.scale_denom = 1, .region = {}, .fast_upsample = true});
      const Pixels turbo = turbo_fast_upsample(jpeg);
      EXPECT_EQ(ours.data, turbo.data) << w << "x" << h << " subsampling " << subsampling;
    }
  }
}

TEST(JpegFastUpsample, RegionsEqualTheWholeDecodeAtEveryScaleAndOddHeight) {
  std::mt19937 rng(915);
  int checked = 0;
  for (const int subsampling : {1, 2}) {
    for (const auto& [w, h] : {std::pair{33, 47}, std::pair{97, 61}, std::pair{130, 99}, std::pair{341, 257}}) {
      const Bytes jpeg = test::encode_jpeg(test::make_pattern(w, h, 3, 3), w, h, 3, {.subsampling = subsampling});
      JpegDecoder decoder(fancy());
      for (const int denom : {1, 2, 4, 8}) {
        const Pixels whole =
            decode(decoder, jpeg, JpegRequest{.scale_denom = denom, .region = {}, .fast_upsample = true});
        std::vector<Rect> regions;
        // Skips that end on an iMCU row boundary and regions that reach the (odd) last row: the
        // cases of libjpeg-turbo issue 915; then random ones.
        for (const int y : {1, 2, 7, 8, 9, 15, 16, 17}) {
          if (y >= whole.height) continue;
          regions.push_back({0, y, whole.width, whole.height - y});
          regions.push_back({whole.width / 3, y, whole.width - whole.width / 3, whole.height - y});
        }
        for (int k = 0; k < 12; ++k) {
          const int rw = 1 + static_cast<int>(rng() % whole.width);
          const int rh = 1 + static_cast<int>(rng() % whole.height);
          regions.push_back({static_cast<int>(rng() % (whole.width - rw + 1)),
                             static_cast<int>(rng() % (whole.height - rh + 1)), rw, rh});
        }
        for (const Rect& request : regions) {
          const JpegRequest req{.scale_denom = denom, .region = request, .fast_upsample = true};
          const JpegHeader header = decoder.read_header(jpeg);
          const Rect r = decoder.decoded_region(header, req);
          const Pixels part = decode(decoder, jpeg, req);
          for (int y = 0; y < r.height; ++y) {
            const std::uint8_t* got = part.data.data() + static_cast<std::size_t>(y) * r.width * 3;
            const std::uint8_t* want = whole.data.data() + (static_cast<std::size_t>(r.y + y) * whole.width + r.x) * 3;
            ASSERT_TRUE(std::equal(got, got + std::ptrdiff_t{r.width} * 3, want))
                << w << "x" << h << " subsampling " << subsampling << " 1/" << denom << ": row " << y << " of "
                << r.width << "x" << r.height << "+" << r.x << "+" << r.y;
          }
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 500);
}

// SampleProgram: fast_upsample_when_shrunk gives the bytes of fast_upsample where the resampler
// shrinks the sample, and of the fancy default where it does not.
Bytes run_sample(const std::filesystem::path& file, const std::vector<GeometryStep>& chain, Size2 output,
                 DecodeOptions decode) {
  SampleProgramConfig config;
  config.geometry = chain;
  config.decode = decode;
  config.normalize = {.mean = {}, .std = {}, .layout = Layout::kNHWC, .dtype = DType::kU8};
  config.output = output;
  const SampleProgram program(config);
  auto ws = program.make_workspace();
  Bytes out(program.sample_bytes());
  program.run(one_file(file.string()), 0, SampleKey{}, *ws, out.data());
  return out;
}

TEST(JpegFastUpsample, SampleProgramUsesItOnlyForShrunkSamples) {
  test::TempDir dir;
  const auto file = dir.path() / "photo.jpg";
  test::write_bytes(file, test::encode_jpeg(test::make_pattern(500, 375, 3, 11), 500, 375, 3, {.subsampling = 2}));
  const DecodeOptions when_shrunk{.fast_upsample_when_shrunk = true};
  const DecodeOptions always{.fast_upsample = true};
  const DecodeOptions never{};

  // Eval at 224: Resize(256) of 375 rows shrinks 1.46x.
  const std::vector<GeometryStep> eval = {{spec::ResizeShorter{256, {}}, 1}, {spec::CenterCrop{224, 224}, 2}};
  const Bytes shrunk = run_sample(file, eval, {224, 224}, when_shrunk);
  EXPECT_EQ(shrunk, run_sample(file, eval, {224, 224}, always));
  const Bytes shrunk_fancy = run_sample(file, eval, {224, 224}, never);
  EXPECT_NE(shrunk, shrunk_fancy);
  double sum = 0;
  for (std::size_t i = 0; i < shrunk.size(); ++i) sum += std::abs(int{shrunk[i]} - int{shrunk_fancy[i]});
  EXPECT_LT(sum / static_cast<double>(shrunk.size()), 1.0);  // a few levels at chroma edges only

  // Enlarged (and a plain crop, and a downscale without antialiasing): fancy, as by default.
  const std::vector<GeometryStep> enlarge = {{spec::Resize{600, 450, {}}, 1}};
  EXPECT_EQ(run_sample(file, enlarge, {600, 450}, when_shrunk), run_sample(file, enlarge, {600, 450}, never));
  const std::vector<GeometryStep> crop = {{spec::CenterCrop{200, 200}, 1}};
  EXPECT_EQ(run_sample(file, crop, {200, 200}, when_shrunk), run_sample(file, crop, {200, 200}, never));
  const std::vector<GeometryStep> plain = {{spec::Resize{300, 200, {.antialias = false}}, 1}};
  EXPECT_EQ(run_sample(file, plain, {300, 200}, when_shrunk), run_sample(file, plain, {300, 200}, never));
}

}  // namespace
}  // namespace sluice::stages
