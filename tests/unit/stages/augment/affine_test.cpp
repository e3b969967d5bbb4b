// The affine warps against torchvision on PIL images (F.affine and F.rotate, which call Pillow's
// Image.transform and Image.rotate): equal bytes, nearest and bilinear, with and without fill and
// center, on generated images (1 and 3 channels, square and not) and a real photo; extreme angles,
// shears, scales and translations (Pillow's fixed-point and floating-point paths); the same bytes
// from several threads; bad input refused; zero-size and one-pixel images. The AVX2 bilinear
// kernel is held to the scalar reference on the edges of its four-pixel steps (row ends, clamped
// taps, the source's last bytes, fill, 1 to 4 channels, padded rows, tiny and huge images) and,
// through the default dispatch, to torchvision on odd sizes; the whole-pixel shifts, which copy
// rows, to Pillow's engines.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
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

// Widths that are not a multiple of the vector kernel's four pixels, one-row and one-column
// images, and a large photo-sized one, through the default dispatch (AVX2 where the CPU has it).
TEST(AffineWarp, OddAndLargeSizesEqualTorchvisionOnPil) {
  test::Torchvision tv;
  std::vector<std::pair<int, Img>> ours;
  std::vector<std::string> names;
  const std::vector<Img> inputs{test::noise(1, 1, 3, 11), test::noise(5, 3, 3, 12), test::noise(7, 1, 1, 13),
                                test::noise(1, 9, 3, 14),  test::noise(13, 6, 1, 15), test::pattern(131, 17, 3, 16),
                                test::pattern(1536, 1024, 3, 17)};
  const std::vector<Warp> jobs{{true, {33.3}, WarpInterpolation::kBilinear, {}, false},
                               {false, {0, 1, -2, 1, 0, 0}, WarpInterpolation::kBilinear, {17, 99, 201}, false},
                               {false, {0, 0, 0, 1, 27.5, 0}, WarpInterpolation::kBilinear, {128, 128, 128}, false},
                               {false, {-8, 0, 0, 0.93, 0, -12}, WarpInterpolation::kBilinear, {}, false},
                               {false, {0, 0, 0, 3.7, 0, 0}, WarpInterpolation::kBilinear, {}, false}};
  for (const auto& in : inputs) {
    for (Warp job : jobs) {
      if (in.channels == 1 && !job.fill.empty()) job.fill.resize(1);
      ours.emplace_back(tv.add(job.rotate_only ? "rotate" : "affine", in, job_args(job)), run_warp(job, in));
      names.push_back(job_args(job) + " on " + std::to_string(in.width) + "x" + std::to_string(in.height) + "x" +
                      std::to_string(in.channels));
    }
  }
  SLUICE_RUN_REFERENCE(tv);
  for (std::size_t i = 0; i < ours.size(); ++i) {
    const auto d = test::diff(ours[i].second, tv.output(ours[i].first));
    EXPECT_EQ(d.max, 0) << names[i] << ": " << d.exact * 100 << "% equal";
  }
}

// An image whose rows are `pad` bytes longer than its pixels (a crop of a wider one).
struct PaddedImg {
  std::vector<std::uint8_t> bytes;
  ConstImageView view;
};

PaddedImg padded_noise(int w, int h, int c, int pad, std::uint32_t seed) {
  PaddedImg img;
  const std::ptrdiff_t stride = static_cast<std::ptrdiff_t>(w) * c + pad;
  // Exactly the bytes a view reaches: the last row ends the buffer, so the kernel's taps at the
  // source's last bytes take its guarded path.
  img.bytes.resize(static_cast<std::size_t>(stride * (h - 1) + static_cast<std::ptrdiff_t>(w) * c));
  std::mt19937 rng(seed);
  for (auto& v : img.bytes) v = static_cast<std::uint8_t>(rng() >> 24);
  img.view = ConstImageView(img.bytes.data(), w, h, c, stride);
  return img;
}

// Random matrices around the identity and far from it: rotations, shears, scales from 1/8 to 8,
// translations that move the image partly or wholly out (fill).
std::vector<AffineMatrix> random_matrices(Size2 size, std::uint32_t seed, int count) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> angle(-180, 180), shear(-40, 40), log_scale(-3, 3), shift(-1.2, 1.2);
  std::vector<AffineMatrix> all{{}, affine_matrix({0, 0.5, 0.25}, size), rotation_matrix(90.0, size)};
  for (int i = 0; i < count; ++i) {
    const AffineParams p{angle(rng), shift(rng) * size.width, shift(rng) * size.height, std::exp2(log_scale(rng)),
                         shear(rng), shear(rng)};
    all.push_back(affine_matrix(p, size));
  }
  return all;
}

void expect_vector_equals_scalar(ConstImageView src, int out_w, int out_h, const AffineMatrix& m,
                                 const std::vector<std::uint8_t>& fill, const std::string& what) {
  Img scalar(out_w, out_h, src.channels);
  Img vector(out_w, out_h, src.channels);
  warp_affine(src, scalar.mut(), m, WarpInterpolation::kBilinear, fill, WarpIsa::kScalar);
  warp_affine(src, vector.mut(), m, WarpInterpolation::kBilinear, fill, WarpIsa::kAvx2);
  const auto d = test::diff(vector, scalar);
  EXPECT_EQ(d.max, 0) << what << " matrix (" << m.a << ", " << m.b << ", " << m.c << ", " << m.d << ", " << m.e
                      << ", " << m.f << "): " << d.exact * 100 << "% equal";
}

TEST(AffineWarp, Avx2BilinearEqualsScalarReference) {
  if (!warp_isa_available(WarpIsa::kAvx2)) GTEST_SKIP() << "this CPU has no AVX2";
  std::uint32_t seed = 1;
  for (int c = 1; c <= 4; ++c) {
    const std::vector<std::uint8_t> fill{3, 250, 77, 128};
    for (int w : {1, 2, 3, 4, 5, 7, 8, 9, 16, 31}) {
      for (int h : {1, 2, 5}) {
        for (int pad : {0, 3}) {
          const PaddedImg img = padded_noise(w, h, c, pad, ++seed);
          for (const auto& m : random_matrices({w, h}, seed, 12)) {
            const std::string what = std::to_string(w) + "x" + std::to_string(h) + "x" + std::to_string(c) +
                                     " pad " + std::to_string(pad);
            expect_vector_equals_scalar(img.view, w, h, m, {}, what);
            expect_vector_equals_scalar(img.view, w + 3, h + 2, m,
                                        std::vector<std::uint8_t>(fill.begin(), fill.begin() + c), what + " fill");
          }
        }
      }
    }
  }
}

TEST(AffineWarp, Avx2BilinearEqualsScalarOnHugeImages) {
  if (!warp_isa_available(WarpIsa::kAvx2)) GTEST_SKIP() << "this CPU has no AVX2";
  // A wide one-row strip, a tall one-column strip and a 12-megapixel photo-sized image.
  for (auto [w, h, c] : {std::array{20000, 2, 3}, std::array{1, 30000, 1}, std::array{2500, 2000, 3}}) {
    const PaddedImg img = padded_noise(w, h, c, 0, static_cast<std::uint32_t>(w + h));
    for (const auto& m : random_matrices({w, h}, 5, 1)) {
      expect_vector_equals_scalar(img.view, w, h, m, {9}, std::to_string(w) + "x" + std::to_string(h));
    }
  }
}

// The whole-pixel shift (rows copied) against Pillow's engines pixel by pixel (WarpIsa::kScalar),
// nearest and bilinear: shifts by 0, 1, into and past every edge, beyond the image, a negative zero
// in the matrix (torchvision's for a zero angle), destinations larger and smaller than the source,
// padded rows, 1 to 4 channels; and matrices one ulp or a fraction away, which must warp as before.
TEST(AffineWarp, WholePixelShiftsEqualPillowsEngines) {
  std::uint32_t seed = 40;
  for (int c = 1; c <= 4; ++c) {
    const std::vector<std::uint8_t> fill{9, 240, 66, 130};
    const std::vector<std::uint8_t> fills(fill.begin(), fill.begin() + c);
    for (auto [w, h] : {std::array{176, 176}, std::array{17, 5}, std::array{1, 1}, std::array{3, 40}}) {
      const PaddedImg img = padded_noise(w, h, c, 5, ++seed);
      std::vector<AffineMatrix> shifts;
      for (double dx : {0.0, 1.0, -1.0, 7.0, -32.0, double(w - 1), double(-w), 40000.0}) {
        for (double dy : {0.0, -3.0, double(h - 1), double(-h - 2)}) shifts.push_back({1, -0.0, dx, 0.0, 1, dy});
      }
      shifts.push_back(affine_matrix({0, 13, -9}, {w, h}));  // TrivialAugmentWide's TranslateX/Y
      shifts.push_back(affine_matrix({0, 0, 0, 1, 0, 0, 0.0, 0.0}, {w, h}));  // its zero ShearX
      shifts.push_back({1, 0, std::nextafter(2.0, 3.0), 0, 1, 0});             // not whole: warped
      shifts.push_back({1, 0, 2.5, 0, 1, -1.25});
      shifts.push_back({std::nextafter(1.0, 2.0), 0, 2, 0, 1, 0});
      for (auto interp : {WarpInterpolation::kNearest, WarpInterpolation::kBilinear}) {
        for (const auto& m : shifts) {
          for (auto [ow, oh] : {std::array{w, h}, std::array{w + 6, h + 1}, std::array{(w + 1) / 2, (h + 1) / 2}}) {
            Img reference(ow, oh, c);
            Img got(ow, oh, c);
            warp_affine(img.view, reference.mut(), m, interp, fills, WarpIsa::kScalar);
            warp_affine(img.view, got.mut(), m, interp, fills);
            const auto d = test::diff(got, reference);
            EXPECT_EQ(d.max, 0) << w << "x" << h << "x" << c << " into " << ow << "x" << oh
                                << (interp == WarpInterpolation::kNearest ? " nearest" : " bilinear") << " matrix ("
                                << m.a << ", " << m.b << ", " << m.c << ", " << m.d << ", " << m.e << ", " << m.f
                                << "): " << d.exact * 100 << "% equal";
          }
        }
      }
    }
  }
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
