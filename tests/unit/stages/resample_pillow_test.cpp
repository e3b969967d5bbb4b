// The resize kernel against Pillow, its reference: BILINEAR and BOX resizes down and up, the fused
// resize-then-crop (Pillow's resize(size, box=...): taps may use the whole image) and
// crop-then-resize (crop(box).resize(size): taps stay inside the crop) on a real JPEG. Pillow runs
// in the system interpreter through tests/reference/pillow_resize.py; both sides get the same
// pixels, so only resampling is compared. Each case prints its MAE and max |diff|.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>

#include "resample_test_util.hpp"

namespace sluice::stages {
namespace {

using test::Image;
using test::resize_axis;

const char* pillow_mode(int channels) {
  return channels == 1 ? "L" : (channels == 3 ? "RGB" : "CMYK");  // CMYK: 4 plain channels
}

// Queues jobs for the reference script, runs them in one interpreter, hands back the outputs.
class Pillow {
 public:
  std::string add_input(const Image& img) {
    const auto path = dir_ / ("in" + std::to_string(inputs_++) + ".raw");
    test::write_bytes(path, img.pixels);
    return path.string();
  }
  // Returns the index of the output image.
  int resize(const std::string& in, const Image& like, int ow, int oh, const char* filter,
             std::optional<std::array<float, 4>> box = {},
             std::optional<std::array<int, 4>> crop = {}) {
    const int index = static_cast<int>(outputs_.size());
    const std::string out = (dir_ / ("out" + std::to_string(index) + ".raw")).string();
    jobs_ << "op=resize in=" << in << " w=" << like.width << " h=" << like.height
          << " mode=" << pillow_mode(like.channels) << " out=" << out << " ow=" << ow
          << " oh=" << oh << " filter=" << filter;
    if (box) {
      char text[128];
      std::snprintf(text, sizeof text, " box=%.9g,%.9g,%.9g,%.9g", (*box)[0], (*box)[1], (*box)[2],
                    (*box)[3]);
      jobs_ << text;
    }
    if (crop)
      jobs_ << " crop=" << (*crop)[0] << "," << (*crop)[1] << "," << (*crop)[2] << ","
            << (*crop)[3];
    jobs_ << "\n";
    outputs_.push_back(Image{ow, oh, like.channels, {}});
    paths_.push_back(out);
    return index;
  }
  // Decodes a JPEG with Pillow (now, on its own) into `channels` channels.
  Image decode(const std::string& jpeg, int channels) {
    const auto jobs = dir_ / "decode.jobs";
    const std::string out = (dir_ / ("decoded" + std::to_string(channels) + ".raw")).string();
    const std::string line =
        "op=decode in=" + jpeg + " mode=" + pillow_mode(channels) + " out=" + out + "\n";
    test::write_bytes(jobs, std::vector<std::uint8_t>(line.begin(), line.end()));
    std::istringstream said(run_script(jobs.string()));
    std::string name;
    Image img{0, 0, channels, {}};
    said >> name >> img.width >> img.height;
    if (!error_.empty()) return img;
    img.pixels = test::read_bytes(out);
    return img;
  }
  // Runs the queued resizes; false (with error()) when the reference could not run.
  bool run() {
    const auto jobs = dir_ / "resize.jobs";
    const std::string text = jobs_.str();
    test::write_bytes(jobs, std::vector<std::uint8_t>(text.begin(), text.end()));
    run_script(jobs.string());
    if (!error_.empty()) return false;
    for (std::size_t i = 0; i < outputs_.size(); ++i)
      outputs_[i].pixels = test::read_bytes(paths_[i]);
    return true;
  }
  const Image& output(int index) const { return outputs_[index]; }
  const std::string& error() const { return error_; }

 private:
  std::string run_script(const std::string& jobs) {
    const std::string python = SLUICE_SYSTEM_PYTHON;
    const std::string script = std::string(SLUICE_SOURCE_DIR) + "/tests/reference/pillow_resize.py";
    const std::string command = "'" + python + "' '" + script + "' '" + jobs + "' 2>&1";
    std::string output;
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) {
      error_ = "cannot start " + python;
      return output;
    }
    char buf[4096];
    while (std::fgets(buf, sizeof buf, pipe) != nullptr) output += buf;
    const int status = pclose(pipe);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (code == 3 || code == 127 || python.find("NOTFOUND") != std::string::npos) {
      error_ = "Pillow not found at " + python +
               ": install the Debian package python3-pil (apt-get install python3-pil). " + output;
    } else if (code != 0) {
      error_ = "the Pillow reference script failed (exit " + std::to_string(code) + "): " + output;
    }
    return output;
  }

  test::TempDir dir_;
  std::ostringstream jobs_;
  std::vector<Image> outputs_;
  std::vector<std::string> paths_;
  int inputs_ = 0;
  std::string error_;
};

void report(const char* group, const std::string& name, const Image& got, const Image& want,
            double* worst_mae = nullptr) {
  const test::Diff d = test::diff(got, want);
  std::printf("[ vs Pillow ] %-14s %-34s MAE %.4f  max %d  exact %.2f%%\n", group, name.c_str(),
              d.mae, d.max, 100.0 * d.exact);
  EXPECT_LT(d.mae, 1.0) << name;
  EXPECT_LE(d.max, 1) << name;
  EXPECT_GT(d.exact, 0.99) << name;  // the arithmetic is Pillow's: expect every byte equal
  if (worst_mae != nullptr) *worst_mae = std::max(*worst_mae, d.mae);
}

TEST(ResampleVsPillow, BilinearAndBoxDownAndUpscale) {
  struct Case {
    const char* name;
    int sw, sh, ow, oh;
  };
  const Case cases[] = {
      {"down1.3x 500x375->385x288", 500, 375, 385, 288},
      {"down2x 500x376->250x188", 500, 376, 250, 188},
      {"down2.23x 500x375->224x168", 500, 375, 224, 168},
      {"down3.7x 500x375->135x101", 500, 375, 135, 101},
      {"down8x 512x384->64x48", 512, 384, 64, 48},
      {"non-uniform 500x375->300x100", 500, 375, 300, 100},
      {"mixed 500x375->180x400", 500, 375, 180, 400},
      {"up1.5x 160x120->240x180", 160, 120, 240, 180},
      {"up2x 160x120->320x240", 160, 120, 320, 240},
  };
  struct Run {
    std::string name;
    ResampleParams params;
    Image src;
    int index;
  };
  Pillow pillow;
  std::vector<Run> runs;
  for (const Case& k : cases) {
    for (int channels : {1, 3, 4}) {
      for (int kind = 0; kind < 2; ++kind) {  // a photo-like pattern and white noise
        Image src = kind == 0 ? test::pattern_image(k.sw, k.sh, channels, 11)
                              : test::noise_image(k.sw, k.sh, channels, 12);
        const std::string in = pillow.add_input(src);
        for (Filter filter : {Filter::kBilinear, Filter::kArea}) {
          const char* fname = filter == Filter::kBilinear ? "bilinear" : "box";
          ResampleParams p{
              resize_axis(k.sw, k.ow), resize_axis(k.sh, k.oh), channels, filter, true, 0};
          const int index = pillow.resize(in, src, k.ow, k.oh, fname);
          runs.push_back(Run{std::string(k.name) + " " + fname + " c" + std::to_string(channels) +
                                 (kind == 0 ? " pattern" : " noise"),
                             p, src, index});
        }
      }
    }
  }
  ASSERT_TRUE(pillow.run()) << pillow.error();
  double worst = 0;
  for (const Run& r : runs) {
    report("resize", r.name, test::resample(r.params, r.src), pillow.output(r.index), &worst);
  }
  std::printf("[ vs Pillow ] resize: %zu cases, worst MAE %.4f\n", runs.size(), worst);
}

// Pillow's box arrives as float32: use the same floats, and its float subtraction for the scale.
AxisMap box_axis(float x0, float x1, int out, int image_size) {
  return AxisMap{static_cast<double>(x0), static_cast<double>(x1 - x0) / out, out, 0, image_size};
}

TEST(ResampleVsPillow, FusedResizeThenCropEqualsResizeWithBox_JPEG) {
  SLUICE_REQUIRE_DATASET(jpeg, "wallpaper-crops/photo_0000.jpg");
  for (int channels : {1, 3}) {
    Pillow pillow;
    const Image img = pillow.decode(jpeg.string(), channels);
    ASSERT_TRUE(pillow.error().empty()) << pillow.error();
    ASSERT_GT(img.width, 64);
    const std::string in = pillow.add_input(img);
    // resize_shorter(256) then center_crop(224), as one box on the source; then a
    // random-resized-crop-like box with fractional edges; then a box reaching the image's edges.
    const double s = std::min(img.width, img.height) / 256.0;
    const int rw = static_cast<int>(img.width / s);
    const int rh = static_cast<int>(img.height / s);
    const double left = std::nearbyint((rw - 224) / 2.0);  // torchvision: round half to even
    const double top = std::nearbyint((rh - 224) / 2.0);
    struct Case {
      std::string name;
      std::array<float, 4> box;
      int ow, oh;
    };
    const Case cases[] = {
        {"shorter256+center224",
         {static_cast<float>(left * s), static_cast<float>(top * s),
          static_cast<float>((left + 224) * s), static_cast<float>((top + 224) * s)},
         224,
         224},
        {"rrc-like box->224", {37.25f, 20.5f, 401.75f, 300.0f}, 224, 224},
        {"edge box up->224x168", {0.0f, 100.5f, 120.0f, static_cast<float>(img.height)}, 224, 168},
    };
    std::vector<std::pair<int, ResampleParams>> runs;
    for (const Case& k : cases) {
      ResampleParams p{box_axis(k.box[0], k.box[2], k.ow, img.width),
                       box_axis(k.box[1], k.box[3], k.oh, img.height),
                       channels,
                       Filter::kBilinear,
                       true,
                       0};
      runs.emplace_back(pillow.resize(in, img, k.ow, k.oh, "bilinear", k.box), p);
    }
    ASSERT_TRUE(pillow.run()) << pillow.error();
    for (std::size_t i = 0; i < runs.size(); ++i) {
      report("resize+crop", cases[i].name + " c" + std::to_string(channels),
             test::resample(runs[i].second, img), pillow.output(runs[i].first));
    }
    // The taps of a fused resize-then-crop reach outside the box, into the rest of the image.
    Resampler r;
    r.setup(runs[0].second);
    EXPECT_LT(r.footprint().x, cases[0].box[0]);
    EXPECT_GT(r.footprint().x + r.footprint().width, cases[0].box[2]);
  }
}

TEST(ResampleVsPillow, CropThenResizeEqualsCropThenResize_JPEG) {
  SLUICE_REQUIRE_DATASET(jpeg, "wallpaper-crops/photo_0000.jpg");
  for (int channels : {1, 3}) {
    Pillow pillow;
    const Image img = pillow.decode(jpeg.string(), channels);
    ASSERT_TRUE(pillow.error().empty()) << pillow.error();
    ASSERT_GE(img.width, 401);
    ASSERT_GE(img.height, 296);
    const std::string in = pillow.add_input(img);
    struct Case {
      std::string name;
      std::array<int, 4> crop;  // left, top, right, bottom
      int ow, oh;
      Filter filter;
    };
    const Case cases[] = {
        {"341x256 crop->224", {60, 40, 401, 296}, 224, 224, Filter::kBilinear},
        {"341x256 crop->224 box", {60, 40, 401, 296}, 224, 224, Filter::kArea},
        {"64x48 crop up->224x168", {100, 100, 164, 148}, 224, 168, Filter::kBilinear},
        {"corner crop->100x37", {0, 0, 300, 111}, 100, 37, Filter::kBilinear},
    };
    std::vector<std::pair<int, ResampleParams>> runs;
    for (const Case& k : cases) {
      const auto [l, t, r, b] = k.crop;
      ResampleParams p{
          AxisMap{static_cast<double>(l), static_cast<double>(r - l) / k.ow, k.ow, l, r},
          AxisMap{static_cast<double>(t), static_cast<double>(b - t) / k.oh, k.oh, t, b},
          channels,
          k.filter,
          true,
          0};
      const char* fname = k.filter == Filter::kBilinear ? "bilinear" : "box";
      runs.emplace_back(pillow.resize(in, img, k.ow, k.oh, fname, std::nullopt, k.crop), p);
    }
    ASSERT_TRUE(pillow.run()) << pillow.error();
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const ResampleParams& p = runs[i].second;
      report("crop+resize", cases[i].name + " c" + std::to_string(channels), test::resample(p, img),
             pillow.output(runs[i].first));
      Resampler r;  // and the taps stay inside the crop
      r.setup(p);
      const Rect fp = r.footprint();
      EXPECT_GE(fp.x, p.x.valid_lo);
      EXPECT_LE(fp.x + fp.width, p.x.valid_hi);
      EXPECT_GE(fp.y, p.y.valid_lo);
      EXPECT_LE(fp.y + fp.height, p.y.valid_hi);
    }
  }
}

}  // namespace
}  // namespace sluice::stages
