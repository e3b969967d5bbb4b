// The plain bilinear resize (ResizeOptions::antialias = false, what loader_compare's
// sluice-bilinear compares like for like with OpenCV's INTER_LINEAR) against PyTorch's
// interpolate(mode="bilinear", align_corners=False, antialias=False), torchvision's
// Resize(antialias=False) on tensors, run in float64 by tests/reference/torch_bilinear.py under the
// system interpreter. sluice works in Pillow's fixed point and rounds the horizontal pass to bytes,
// so a byte may differ by one level; nothing more. Down by 1.46 (eval 224 on 500x375), 2.23, 3.7
// and 7.9, up by 1.5, odd sizes, 1 and 3 channels, on noise (the hardest case for rounding) and
// on a photograph-like pattern.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <sstream>
#include <string>

#include "resample_test_util.hpp"

namespace sluice::stages {
namespace {

using test::Image;
using test::resize_axis;

// Runs the reference on each (input, output size) pair in one interpreter; empty on failure, with
// the reason in `error`.
std::vector<Image> torch_bilinear(const std::vector<std::pair<Image, Size2>>& jobs, std::string& error) {
  test::TempDir dir;
  std::ostringstream lines;
  std::vector<std::filesystem::path> outs;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const auto& [img, size] = jobs[i];
    const auto in = dir.path() / ("in" + std::to_string(i) + ".raw");
    outs.push_back(dir.path() / ("out" + std::to_string(i) + ".raw"));
    test::write_bytes(in, img.pixels);
    lines << "in=" << in.string() << " w=" << img.width << " h=" << img.height << " c=" << img.channels
          << " out=" << outs.back().string() << " ow=" << size.width << " oh=" << size.height << "\n";
  }
  const auto job_file = dir.path() / "jobs";
  const std::string text = lines.str();
  test::write_bytes(job_file, std::vector<std::uint8_t>(text.begin(), text.end()));
  const std::string command = std::string("'") + SLUICE_SYSTEM_PYTHON + "' '" + SLUICE_SOURCE_DIR +
                              "/tests/reference/torch_bilinear.py' '" + job_file.string() + "' 2>&1";
  std::string said;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    error = "cannot start " + std::string(SLUICE_SYSTEM_PYTHON);
    return {};
  }
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) said += buf;
  const int status = pclose(pipe);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    error = "tests/reference/torch_bilinear.py failed (install python3-torch): " + said;
    return {};
  }
  std::vector<Image> results;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const Size2 size = jobs[i].second;
    results.push_back(Image{size.width, size.height, jobs[i].first.channels, test::read_bytes(outs[i])});
  }
  return results;
}

TEST(ResampleTorch, PlainBilinearMatchesTorchInterpolateWithoutAntialias) {
  struct Case {
    const char* name;
    int w, h, ow, oh;
  };
  const Case cases[] = {{"eval 500x375 -> 341x256", 500, 375, 341, 256},
                        {"down 2.23x", 500, 375, 224, 168},
                        {"down 3.7x", 500, 375, 135, 101},
                        {"down 7.9x", 1771, 1180, 224, 149},
                        {"up 1.5x", 160, 120, 240, 180},
                        {"odd 97x61 -> 40x33", 97, 61, 40, 33}};
  std::vector<std::pair<Image, Size2>> jobs;
  std::vector<std::string> names;
  for (const Case& k : cases) {
    for (int channels : {1, 3}) {
      for (const bool noise : {true, false}) {
        jobs.emplace_back(noise ? test::noise_image(k.w, k.h, channels, 7) : test::pattern_image(k.w, k.h, channels, 7),
                          Size2{k.ow, k.oh});
        names.push_back(std::string(k.name) + (noise ? " noise" : " pattern") + " c=" + std::to_string(channels));
      }
    }
  }
  std::string error;
  const std::vector<Image> want = torch_bilinear(jobs, error);
  ASSERT_EQ(want.size(), jobs.size()) << error;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const Image& img = jobs[i].first;
    const Size2 size = jobs[i].second;
    const ResampleParams p{resize_axis(img.width, size.width), resize_axis(img.height, size.height), img.channels,
                           Filter::kBilinear, /*antialias=*/false, 0};
    const test::Diff d = test::diff(test::resample(p, img), want[i]);
    std::printf("[ torch bilinear ] %-36s MAE %.4f  max %d  exact %.3f\n", names[i].c_str(), d.mae, d.max, d.exact);
    EXPECT_LE(d.max, 1) << names[i];
    EXPECT_LT(d.mae, 0.3) << names[i];
  }
}

}  // namespace
}  // namespace sluice::stages
