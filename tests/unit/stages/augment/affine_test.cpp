// The affine warps against torchvision on PIL images (F.affine and F.rotate, which call Pillow's
// Image.transform and Image.rotate): equal bytes, nearest and bilinear, with and without fill and
// center, on generated images (1 and 3 channels, square and not) and a real photo; extreme angles,
// shears, scales and translations (Pillow's fixed-point and floating-point paths); the same bytes
// from several threads; bad input refused; zero-size and one-pixel images.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "augment_test_util.hpp"
#include "sluice/core/error.hpp"
#include "stages/augment/affine.hpp"

namespace sluice::stages {
namespace {

using test::Img;

struct Warp {
  bool rotate_only = false;  // F.rotate, else F.affine
  AffineParams p;
  WarpInterpolation interp = WarpInterpolation::kNearest;
  std::vector<std::uint8_t> fill;  // empty: torchvision's default (0)
  bool center = false;             // pass p.center_x/y (integers, as torchvision takes them)
};

std::string job_args(const Warp& w) {
  std::ostringstream s;
  s.precision(17);
  s << "angle=" << w.p.angle << " interp=" << (w.interp == WarpInterpolation::kNearest ? "nearest" : "bilinear");
  if (!w.rotate_only) {
    s << " translate=" << w.p.translate_x << "," << w.p.translate_y << " scale=" << w.p.scale
      << " shear=" << w.p.shear_x << "," << w.p.shear_y;
  }
  if (!w.fill.empty()) {
    s << " fill=";
    for (std::size_t i = 0; i < w.fill.size(); ++i) s << (i ? "," : "") << int(w.fill[i]);
  }
  if (w.center) s << " center=" << *w.p.center_x << "," << *w.p.center_y;
  return s.str();
}

Img run_warp(const Warp& w, const Img& in) {
  Img out(in.width, in.height, in.channels);
  std::vector<std::uint8_t> fill = w.fill;
  if (fill.size() == 3 && in.channels == 1) fill.resize(1);
  AffineParams p = w.p;
  if (!w.center) p.center_x = p.center_y = std::nullopt;
  if (w.rotate_only) {
    rotate(in.view(), out.mut(), p.angle, w.interp, fill, p.center_x, p.center_y);
  } else {
    affine(in.view(), out.mut(), p, w.interp, fill);
  }
  return out;
}

std::vector<Warp> warps() {
  std::vector<Warp> all;
  for (auto interp : {WarpInterpolation::kNearest, WarpInterpolation::kBilinear}) {
    // F.rotate: Pillow's transposes (0, 90, 180, 270 without a center) and its matrix.
    for (double angle : {0.0, 90.0, 180.0, 270.0, -90.0, 33.3, 450.0, -725.5, 1e6}) {
      all.push_back({true, {angle}, interp, {}, false});
    }
    all.push_back({true, {30.0, 0, 0, 1, 0, 0, 5.0, 9.0}, interp, {10, 200, 30}, true});
    all.push_back({true, {180.0, 0, 0, 1, 0, 0, 0.0, 0.0}, interp, {}, true});
    // F.affine: each parameter alone, then together, then extremes.
    all.push_back({false, {0, 0, 0, 1, 0, 0}, interp, {}, false});
    all.push_back({false, {0, 7, -4, 1, 0, 0}, interp, {255, 0, 128}, false});
    all.push_back({false, {0, 0, 0, 0.7, 0, 0}, interp, {}, false});
    all.push_back({false, {0, 0, 0, 1.3, 0, 0}, interp, {}, false});
    all.push_back({false, {-45.5, 0, 0, 1, 0, 0}, interp, {}, false});
    all.push_back({false, {0, 0, 0, 1, 20, 0}, interp, {}, false});
    all.push_back({false, {0, 0, 0, 1, 0, -15}, interp, {}, false});
    all.push_back({false, {12, 3, 5, 1.1, 10, 10}, interp, {40, 50, 60}, false});
    all.push_back({false, {0, 0, 0, 1, 16.7, 0, 0.0, 0.0}, interp, {128, 128, 128}, true});  // AutoAugment's ShearX
    all.push_back({false, {179.9, 0, 0, 1, 89, -89}, interp, {}, false});
    all.push_back({false, {0, 0, 0, 1e-4, 0, 0}, interp, {}, false});      // beyond fixed point: floats
    all.push_back({false, {37, 0, 0, 1e-4, 0, 0}, interp, {}, false});
    all.push_back({false, {0, 0, 0, 1e4, 0, 0}, interp, {}, false});
    all.push_back({false, {0, 40000, -40000, 1, 0, 0}, interp, {9, 9, 9}, false});
    all.push_back({false, {-1e5, 0, 0, 1, 0, 0}, interp, {}, false});
  }
  return all;
}

void expect_parity(const std::vector<Img>& inputs, const char* what) {
  test::Torchvision tv;
  std::vector<std::pair<int, Img>> ours;
  for (const auto& in : inputs) {
    for (const auto& w : warps()) {
      Warp job = w;
      if (job.fill.size() == 3 && in.channels == 1) job.fill.resize(1);
      ours.emplace_back(tv.add(w.rotate_only ? "rotate" : "affine", in, job_args(job)), run_warp(w, in));
    }
  }
  SLUICE_RUN_REFERENCE(tv);
  std::size_t k = 0;
  for (const auto& in : inputs) {
    for (const auto& w : warps()) {
      const auto& [index, got] = ours[k++];
      const auto d = test::diff(got, tv.output(index));
      EXPECT_EQ(d.max, 0) << what << " " << (w.rotate_only ? "rotate " : "affine ") << job_args(w) << " on "
                          << in.width << "x" << in.height << "x" << in.channels << ": " << d.exact * 100 << "% equal";
    }
  }
}

TEST(AffineWarp, GeneratedImagesEqualTorchvisionOnPil) {
  expect_parity({test::pattern(64, 64, 3, 1), test::noise(53, 40, 3, 2), test::pattern(40, 57, 1, 3),
                 test::noise(32, 32, 1, 4)},
                "generated");
}

TEST(AffineWarp, RealPhotoEqualsTorchvisionOnPil) {
  SLUICE_REQUIRE_DATASET(dir, "imagenet-photos/n00007846_147031_person.jpg");
  test::Torchvision decoder;
  const Img photo = decoder.decode(dir.string(), 3);
  ASSERT_TRUE(decoder.error().empty()) << decoder.error();
  expect_parity({photo}, "photo");
}

TEST(AffineWarp, MatrixIsTorchvisionsInverse) {
  // torchvision's _get_inverse_affine_matrix for the default centre (32, 24) of a 64x48 image,
  // rotation 30, translate (2, -3), scale 1.5, shear (10, 5), printed by Python's repr.
  const AffineMatrix m = affine_matrix({30, 2, -3, 1.5, 10, 5}, {64, 48});
  const double want[6] = {0.5274811674783896, 0.44027796707267447, 4.8198029972085905,
                          -0.28282172989560045, 0.6065131570316004, 20.879162518786806};
  const double got[6] = {m.a, m.b, m.c, m.d, m.e, m.f};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
}

TEST(AffineWarp, SameBytesFromFourThreadsAtOnce) {
  const Img in = test::noise(80, 60, 3, 9);
  const auto all = warps();
  std::vector<Img> serial;
  for (const auto& w : all) serial.push_back(run_warp(w, in));
  std::vector<std::vector<Img>> parallel(4);
  std::vector<std::thread> threads;
  for (auto& results : parallel) {
    threads.emplace_back([&] {
      for (const auto& w : all) results.push_back(run_warp(w, in));
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& results : parallel) {
    for (std::size_t i = 0; i < serial.size(); ++i) EXPECT_EQ(results[i].pixels, serial[i].pixels) << job_args(all[i]);
  }
}

TEST(AffineWarp, ZeroSizeAndOnePixelImages) {
  for (int channels : {1, 3}) {
    Img zero(0, 4, channels);
    Img zero_out(0, 4, channels);
    EXPECT_NO_THROW(affine(zero.view(), zero_out.mut(), {30}, WarpInterpolation::kBilinear));
    EXPECT_NO_THROW(rotate(zero.view(), zero_out.mut(), 30, WarpInterpolation::kNearest));
    Img one(1, 1, channels);
    std::fill(one.pixels.begin(), one.pixels.end(), std::uint8_t{200});
    for (auto interp : {WarpInterpolation::kNearest, WarpInterpolation::kBilinear}) {
      Img out(1, 1, channels);
      rotate(one.view(), out.mut(), 45, interp, std::vector<std::uint8_t>{7});
      EXPECT_EQ(out.pixels, one.pixels);  // the one pixel's centre maps onto itself
      affine(one.view(), out.mut(), {0, 5, 0}, interp, std::vector<std::uint8_t>{7});
      EXPECT_EQ(out.pixels[0], 7);  // moved out: fill
    }
  }
}

TEST(AffineWarp, BadInputIsRefused) {
  Img a = test::noise(16, 16, 3, 1);
  Img b(16, 16, 3);
  Img grey(16, 16, 1);
  Img small(8, 8, 3);
  const auto nearest = WarpInterpolation::kNearest;
  EXPECT_THROW(affine(a.view(), grey.mut(), {}, nearest), Error);   // channels differ
  EXPECT_THROW(affine(a.view(), small.mut(), {}, nearest), Error);  // size differs
  EXPECT_THROW(affine(a.view(), b.mut(), {0, 0, 0, 0.0}, nearest), Error);  // scale 0
  EXPECT_THROW(affine(a.view(), b.mut(), {0, 0, 0, -1.0}, nearest), Error);
  EXPECT_THROW(affine(a.view(), b.mut(), {std::nan("")}, nearest), Error);
  EXPECT_THROW(rotate(a.view(), b.mut(), std::numeric_limits<double>::infinity(), nearest), Error);
  EXPECT_THROW(affine(a.view(), b.mut(), {}, nearest, std::vector<std::uint8_t>{1, 2}), Error);  // fill size
  EXPECT_THROW(affine(a.view(), a.mut(), {}, nearest), Error);  // in place
  EXPECT_THROW(rotate(a.view(), a.mut(), 30, nearest), Error);
  Img five(4, 4, 5);
  Img five_out(4, 4, 5);
  EXPECT_THROW(warp_affine(five.view(), five_out.mut(), {}, nearest), Error);
}

}  // namespace
}  // namespace sluice::stages
