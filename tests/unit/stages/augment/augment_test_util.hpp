// Helpers shared by the augment kernels' tests: an owning image, generated sources, the error
// statistics the parity tests report, and torchvision (tests/reference/torchvision_augment.py) run
// once per test in the system interpreter on queued jobs.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "sluice/detail/core/image.hpp"
#include "test_support.hpp"
#include "reference_script.hpp"

namespace sluice::test {

struct Img {
  int width = 0;
  int height = 0;
  int channels = 0;
  std::vector<std::uint8_t> pixels;  // (height, width, channels), tightly packed

  Img() = default;
  Img(int w, int h, int c) : width(w), height(h), channels(c), pixels(static_cast<std::size_t>(w) * h * c) {}
  ConstImageView view() const { return {pixels.data(), width, height, channels, static_cast<std::ptrdiff_t>(width) * channels}; }
  ImageView mut() { return {pixels.data(), width, height, channels, static_cast<std::ptrdiff_t>(width) * channels}; }
};

// Smooth gradients with texture (make_pattern) or white noise (every level, every edge).
inline Img pattern(int w, int h, int c, std::uint32_t seed) {
  Img img(w, h, c);
  img.pixels = make_pattern(w, h, c, seed);
  return img;
}
inline Img noise(int w, int h, int c, std::uint32_t seed) {
  Img img(w, h, c);
  std::mt19937 rng(seed);
  for (auto& v : img.pixels) v = static_cast<std::uint8_t>(rng() >> 24);
  return img;
}
// A low-contrast image (levels 60..140), where autocontrast and equalize have work to do.
inline Img dull(int w, int h, int c, std::uint32_t seed) {
  Img img = pattern(w, h, c, seed);
  for (auto& v : img.pixels) v = static_cast<std::uint8_t>(60 + v * 80 / 255);
  return img;
}

struct Diff {
  int max = 0;         // largest absolute difference
  double exact = 1.0;  // fraction of bytes that are equal
};
inline Diff diff(const Img& a, const Img& b) {
  Diff d;
  EXPECT_EQ(a.pixels.size(), b.pixels.size());
  if (a.pixels.size() != b.pixels.size()) return {256, 0.0};
  if (a.pixels.empty()) return d;
  std::size_t equal = 0;
  for (std::size_t i = 0; i < a.pixels.size(); ++i) {
    const int e = std::abs(static_cast<int>(a.pixels[i]) - static_cast<int>(b.pixels[i]));
    equal += e == 0 ? 1 : 0;
    d.max = std::max(d.max, e);
  }
  d.exact = static_cast<double>(equal) / static_cast<double>(a.pixels.size());
  return d;
}

// Queues torchvision jobs, runs them in one interpreter, hands back the outputs.
class Torchvision {
 public:
  // Returns the index of the output; `args` are the job's extra key=value tokens.
  int add(const std::string& op, const Img& in, const std::string& args = "") {
    const std::string input = (dir_ / ("in" + std::to_string(outputs_.size()) + ".raw")).string();
    write_bytes(input, in.pixels);
    const int index = static_cast<int>(outputs_.size());
    const std::string out = (dir_ / ("out" + std::to_string(index) + ".raw")).string();
    jobs_ << "op=" << op << " in=" << input << " w=" << in.width << " h=" << in.height
          << " mode=" << (in.channels == 1 ? "L" : "RGB") << " out=" << out << " " << args << "\n";
    outputs_.push_back(Img(in.width, in.height, in.channels));
    paths_.push_back(out);
    return index;
  }
  // Runs the queued jobs; false (with error()) when the reference could not run.
  bool run() {
    const auto jobs = dir_ / "jobs.txt";
    const std::string text = jobs_.str();
    write_bytes(jobs, std::vector<std::uint8_t>(text.begin(), text.end()));
    run_script(jobs.string());
    if (!error_.empty()) return false;
    for (std::size_t i = 0; i < outputs_.size(); ++i) outputs_[i].pixels = read_bytes(paths_[i]);
    return true;
  }
  // Decodes an image file with Pillow (now, on its own) into `channels` channels.
  Img decode(const std::string& file, int channels) {
    const auto jobs = dir_ / "decode.txt";
    const std::string out = (dir_ / "decoded.raw").string();
    const std::string line = "op=decode in=" + file + " mode=" + (channels == 1 ? "L" : "RGB") + " out=" + out + "\n";
    write_bytes(jobs, std::vector<std::uint8_t>(line.begin(), line.end()));
    std::istringstream said(run_script(jobs.string()));
    Img img;
    img.channels = channels;
    said >> img.width >> img.height;
    if (error_.empty()) img.pixels = read_bytes(out);
    return img;
  }
  const Img& output(int index) const { return outputs_[static_cast<std::size_t>(index)]; }
  const std::string& error() const { return error_; }

 private:
  std::string run_script(const std::string& jobs) {
    const std::string python = SLUICE_SYSTEM_PYTHON;
    const ScriptRun run = run_reference_script("torchvision_augment.py", {jobs});
    const std::string& output = run.output;
    if (!run.started) {
      error_ = "cannot start " + python;
      return output;
    }
    const int code = run.exit_code;
    if (code == 3 || code == 127 || python.find("NOTFOUND") != std::string::npos) {
      error_ = "torchvision not found at " + python + ": install python3-torchvision and python3-pil. " + output;
    } else if (code != 0) {
      error_ = "the torchvision reference script failed (exit " + std::to_string(code) + "): " + output;
    }
    return output;
  }

  TempDir dir_;
  std::ostringstream jobs_;
  std::vector<Img> outputs_;
  std::vector<std::string> paths_;
  std::string error_;
};

// Runs the queued jobs or fails the test (the reference is part of the test machine's setup).
#define SLUICE_RUN_REFERENCE(tv) ASSERT_TRUE((tv).run()) << (tv).error()

}  // namespace sluice::test
