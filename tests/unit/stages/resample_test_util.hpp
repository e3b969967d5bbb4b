// Helpers shared by the resample tests (resample_test.cpp, resample_pillow_test.cpp): an owning
// image, test sources, a one-call resample, and the error statistics the tests report.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "stages/image/resample.hpp"
#include "stages/image/resample_kernels.hpp"
#include "test_support.hpp"

namespace sluice::test {

struct Image {
  int width = 0;
  int height = 0;
  int channels = 0;
  std::vector<std::uint8_t> pixels;  // (height, width, channels), tightly packed

  std::uint8_t at(int x, int y, int c) const {
    return pixels[(static_cast<std::size_t>(y) * width + x) * channels + c];
  }
  ConstImageView view() const { return {pixels.data(), width, height, channels, width * channels}; }
};

inline Image pattern_image(int width, int height, int channels, std::uint32_t seed) {
  return Image{width, height, channels, make_pattern(width, height, channels, seed)};
}

// White noise: every frequency at full strength, the hardest case for rounding differences.
inline Image noise_image(int width, int height, int channels, std::uint32_t seed) {
  Image img{width, height, channels,
            std::vector<std::uint8_t>(static_cast<std::size_t>(width) * height * channels)};
  std::mt19937 rng(seed);
  for (auto& v : img.pixels) v = static_cast<std::uint8_t>(rng() >> 24);
  return img;
}

// A plain resize of one axis: the whole source onto the whole output.
inline stages::AxisMap resize_axis(int in, int out) {
  return stages::AxisMap{0.0, static_cast<double>(in) / out, out, 0, in};
}

// Sets up a Resampler and runs it on the whole of `img` (origin 0, 0).
inline Image resample(const stages::ResampleParams& p, const Image& img,
                      stages::ResampleIsa isa = stages::ResampleIsa::kAuto) {
  stages::Resampler r;
  stages::ResamplerTestPeer::set_isa(r, isa);
  r.setup(p);
  Image out{p.x.out_size, p.y.out_size, p.channels,
            std::vector<std::uint8_t>(static_cast<std::size_t>(p.x.out_size) * p.y.out_size *
                                      p.channels)};
  std::vector<std::uint8_t> scratch(r.scratch_bytes());
  r.run(img.view(), 0, 0,
        ImageView{out.pixels.data(), out.width, out.height, out.channels, out.width * out.channels},
        scratch);
  return out;
}

struct Diff {
  double mae = 0;    // mean absolute difference, in levels
  int max = 0;       // largest absolute difference
  double exact = 0;  // fraction of bytes that are equal
};

inline Diff diff(const Image& a, const Image& b) {
  Diff d;
  EXPECT_EQ(a.pixels.size(), b.pixels.size());
  if (a.pixels.size() != b.pixels.size() || a.pixels.empty()) {
    d.mae = 1e9;
    d.max = 256;
    return d;
  }
  std::uint64_t sum = 0;
  std::size_t equal = 0;
  for (std::size_t i = 0; i < a.pixels.size(); ++i) {
    const int e = std::abs(static_cast<int>(a.pixels[i]) - static_cast<int>(b.pixels[i]));
    sum += static_cast<std::uint64_t>(e);
    equal += e == 0 ? 1 : 0;
    d.max = std::max(d.max, e);
  }
  d.mae = static_cast<double>(sum) / static_cast<double>(a.pixels.size());
  d.exact = static_cast<double>(equal) / static_cast<double>(a.pixels.size());
  return d;
}

}  // namespace sluice::test
