// The resize kernel's contract (src/stages/resample.*): padding and crops are exact copies,
// antialias=false is plain bilinear, results are deterministic, bad parameters are
// kInvalidArgument, run() reads only its footprint, setup() stops allocating once warmed up, and
// every SIMD kernel set equals the scalar one bit for bit. Pillow comparisons are in
// resample_pillow_test.cpp.
#include <gtest/gtest.h>

#include <climits>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>

#include "resample_test_util.hpp"
#include "sluice/core/error.hpp"

// Counts heap allocations so the storage test can see that setup() and run() make none.
namespace {
std::atomic<long> g_allocations{0};
}  // namespace
// GCC pairs the inlined replacement delete with malloc and warns of a mismatch that is not one.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace sluice::stages {
namespace {

using test::Image;
using test::resize_axis;

// A source buffer that ends exactly where an unreadable page begins (and starts one page after
// another), so a kernel that reads past its footprint crashes instead of passing by luck.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(std::size_t bytes)
      : page_(static_cast<std::size_t>(sysconf(_SC_PAGESIZE))) {
    const std::size_t pages = (bytes + page_ - 1) / page_;
    size_ = (pages + 2) * page_;
    base_ = static_cast<std::uint8_t*>(
        mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base_ == MAP_FAILED) throw std::bad_alloc();
    mprotect(base_, page_, PROT_NONE);
    mprotect(base_ + (pages + 1) * page_, page_, PROT_NONE);
    data_ = base_ + (pages + 1) * page_ - bytes;
  }
  ~GuardedBuffer() { munmap(base_, size_); }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  std::uint8_t* data() const { return data_; }

 private:
  std::size_t page_;
  std::size_t size_ = 0;
  std::uint8_t* base_ = nullptr;
  std::uint8_t* data_ = nullptr;
};

// Runs `r` (already set up) on exactly its footprint of `img`, copied into a guarded buffer.
Image run_on_footprint(const Resampler& r, const ResampleParams& p, const Image& img,
                       int dst_pad = 0) {
  Image out{p.x.out_size, p.y.out_size, p.channels, {}};
  const int dst_stride = out.width * out.channels + dst_pad;
  std::vector<std::uint8_t> dst(static_cast<std::size_t>(dst_stride) * out.height + 1, 0xA5);
  std::vector<std::uint8_t> scratch(r.scratch_bytes());
  const Rect fp = r.footprint();
  const int row = fp.width * img.channels;
  // Not one byte of slack: a kernel that reads a byte past the last row crashes.
  GuardedBuffer src(std::max<std::size_t>(1, static_cast<std::size_t>(row) * fp.height));
  for (int y = 0; y < fp.height; ++y) {
    std::memcpy(
        src.data() + static_cast<std::ptrdiff_t>(y) * row,
        img.pixels.data() + (static_cast<std::size_t>(fp.y + y) * img.width + fp.x) * img.channels,
        row);
  }
  const ConstImageView view(src.data(), fp.width, fp.height, img.channels, row);
  r.run(view, fp.x, fp.y, ImageView{dst.data(), out.width, out.height, out.channels, dst_stride},
        scratch);
  out.pixels.resize(static_cast<std::size_t>(out.width) * out.height * out.channels);
  for (int y = 0; y < out.height; ++y) {
    std::memcpy(out.pixels.data() + static_cast<std::size_t>(y) * out.width * out.channels,
                dst.data() + static_cast<std::ptrdiff_t>(y) * dst_stride, out.width * out.channels);
  }
  EXPECT_EQ(dst.back(), 0xA5) << "run() wrote past dst";
  return out;
}

TEST(Resample, PadFourAndRandomCrop32IsAnExactCopy) {
  // torchvision RandomCrop(32, padding=4, fill=f): the 40x40 padded image cropped at (left, top).
  const Image img = test::pattern_image(32, 32, 3, 7);
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 64; ++trial) {
    const int left = static_cast<int>(rng() % 9);
    const int top = static_cast<int>(rng() % 9);
    const std::uint8_t fill = trial % 2 == 0 ? 0 : 117;
    ResampleParams p;
    p.x = AxisMap{left - 4.0, 1.0, 32, 0, 32};
    p.y = AxisMap{top - 4.0, 1.0, 32, 0, 32};
    p.fill = fill;
    Resampler r;
    r.setup(p);
    EXPECT_TRUE(ResamplerTestPeer::identity_x(r) && ResamplerTestPeer::identity_y(r));
    EXPECT_EQ(r.scratch_bytes(), 0u);
    const Rect fp = r.footprint();
    EXPECT_EQ(fp, (Rect{std::max(0, left - 4), std::max(0, top - 4), 32 - std::abs(left - 4),
                        32 - std::abs(top - 4)}));
    const Image out = run_on_footprint(r, p, img);
    for (int y = 0; y < 32; ++y) {
      for (int x = 0; x < 32; ++x) {
        const int sx = x + left - 4;
        const int sy = y + top - 4;
        const bool inside = sx >= 0 && sx < 32 && sy >= 0 && sy < 32;
        for (int c = 0; c < 3; ++c) {
          const std::uint8_t want = inside ? img.at(sx, sy, c) : fill;
          ASSERT_EQ(out.at(x, y, c), want)
              << "left " << left << " top " << top << " at " << x << "," << y << "," << c;
        }
      }
    }
  }
}

TEST(Resample, AllPaddingFillsAndReadsNothing) {
  ResampleParams p;
  p.x = AxisMap{40.0, 1.0, 8, 0, 32};  // every centre right of the image
  p.y = AxisMap{0.0, 1.0, 8, 0, 32};
  p.fill = 9;
  Resampler r;
  r.setup(p);
  EXPECT_EQ(r.footprint(), Rect{});
  std::vector<std::uint8_t> dst(8 * 8 * 3, 0);
  r.run(ConstImageView{}, 0, 0, ImageView{dst.data(), 8, 8, 3, 24}, {});
  for (std::uint8_t v : dst) ASSERT_EQ(v, 9);
}

// Plain bilinear with half-pixel centres and clamped taps, in double, both passes unrounded.
Image bilinear_reference(const Image& img, const ResampleParams& p) {
  struct Tap {
    int x0;
    double w0, w1;
    bool pad;
  };
  const auto taps = [](const AxisMap& a) {
    std::vector<Tap> t(a.out_size);
    for (int o = 0; o < a.out_size; ++o) {
      const double c = a.origin + (o + 0.5) * a.scale;
      t[o].pad = !(c >= a.valid_lo && c < a.valid_hi);
      const int x0 = static_cast<int>(std::floor(c - 0.5));
      double w0 = 1.0 - (c - 0.5 - x0);
      double w1 = 1.0 - w0;
      if (x0 < a.valid_lo) w0 = 0;
      if (x0 + 1 >= a.valid_hi) w1 = 0;
      t[o] = Tap{x0, w0 / (w0 + w1), w1 / (w0 + w1), t[o].pad};
    }
    return t;
  };
  const auto tx = taps(p.x);
  const auto ty = taps(p.y);
  Image out{p.x.out_size, p.y.out_size, img.channels,
            std::vector<std::uint8_t>(static_cast<std::size_t>(p.x.out_size) * p.y.out_size *
                                      img.channels)};
  const auto src = [&](int x, int y, int c) {
    x = std::clamp(x, 0, img.width - 1);  // only reached with weight 0
    y = std::clamp(y, 0, img.height - 1);
    return static_cast<double>(img.at(x, y, c));
  };
  for (int y = 0; y < out.height; ++y) {
    for (int x = 0; x < out.width; ++x) {
      for (int c = 0; c < img.channels; ++c) {
        double v = p.fill;
        if (!tx[x].pad && !ty[y].pad) {
          const auto row = [&](int sy) {
            return tx[x].w0 * src(tx[x].x0, sy, c) + tx[x].w1 * src(tx[x].x0 + 1, sy, c);
          };
          v = ty[y].w0 * row(ty[y].x0) + ty[y].w1 * row(ty[y].x0 + 1);
        }
        out.pixels[(static_cast<std::size_t>(y) * out.width + x) * out.channels + c] =
            static_cast<std::uint8_t>(std::lround(v));
      }
    }
  }
  return out;
}

TEST(Resample, NoAntialiasBilinearMatchesDoubleReference) {
  struct Case {
    const char* name;
    int w, h;
    AxisMap x, y;
  };
  const Case cases[] = {
      {"down2.23x", 500, 375, resize_axis(500, 224), resize_axis(375, 168)},
      {"down3.7x", 500, 375, resize_axis(500, 135), resize_axis(375, 101)},
      {"up1.5x", 160, 120, resize_axis(160, 240), resize_axis(120, 180)},
      {"crop-then-resize", 500, 375, AxisMap{60.0, 341.0 / 224, 224, 60, 401},
       AxisMap{40.0, 256.0 / 224, 224, 40, 296}},
      {"fractional-box", 300, 200, AxisMap{10.3, 0.77, 150, 0, 300},
       AxisMap{-3.2, 1.9, 90, 0, 200}},
  };
  for (const Case& k : cases) {
    for (int channels : {1, 3}) {
      const Image img = test::noise_image(k.w, k.h, channels, 99);
      ResampleParams p{k.x, k.y, channels, Filter::kBilinear, /*antialias=*/false, 0};
      const Image want = bilinear_reference(img, p);
      const Image got = test::resample(p, img);
      const test::Diff d = test::diff(got, want);
      std::printf("[ no-antialias ] %-18s c=%d  MAE %.4f  max %d\n", k.name, channels, d.mae,
                  d.max);
      EXPECT_LT(d.mae, 0.3) << k.name;
      EXPECT_LE(d.max, 1) << k.name;  // only the intermediate rounding to bytes differs
    }
  }
}

TEST(Resample, DeterministicAcrossRunsInstancesStridesAndScratchContents) {
  const Image img = test::pattern_image(500, 375, 3, 3);
  ResampleParams p{resize_axis(500, 224), resize_axis(375, 224), 3, Filter::kBilinear, true, 0};
  const Image a = test::resample(p, img);
  Resampler r;
  r.setup(p);
  std::vector<std::uint8_t> scratch(r.scratch_bytes(), 0xFF);
  for (int pad : {0, 5, 64}) {
    EXPECT_EQ(run_on_footprint(r, p, img, pad).pixels, a.pixels) << "dst padding " << pad;
  }
  std::vector<std::uint8_t> dst(224 * 224 * 3);
  r.run(img.view(), 0, 0, ImageView{dst.data(), 224, 224, 3, 224 * 3}, scratch);
  EXPECT_EQ(dst, a.pixels);
  EXPECT_EQ(test::resample(p, img).pixels, a.pixels);
}

TEST(Resample, BadParametersAreInvalidArgument) {
  const ResampleParams good{
      resize_axis(64, 32), resize_axis(48, 24), 3, Filter::kBilinear, true, 0};
  const auto expect_invalid = [](const ResampleParams& p, const char* what) {
    Resampler r;
    try {
      r.setup(p);
      ADD_FAILURE() << what << ": no exception";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << what;
    }
  };
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto p = good;
  p.x.out_size = 0;
  expect_invalid(p, "out_size 0");
  p = good;
  p.y.out_size = -3;
  expect_invalid(p, "out_size < 0");
  for (double s : {0.0, -1.0, inf, nan}) {
    p = good;
    p.x.scale = s;
    expect_invalid(p, "bad scale");
  }
  p = good;
  p.y.origin = nan;
  expect_invalid(p, "origin NaN");
  for (int c : {0, 2, 5}) {
    p = good;
    p.channels = c;
    expect_invalid(p, "channels");
  }
  p = good;
  p.x.valid_lo = p.x.valid_hi = 10;
  expect_invalid(p, "empty valid range");
  p = good;
  p.y.valid_lo = 20;
  p.y.valid_hi = 5;
  expect_invalid(p, "inverted valid range");

  // run() checks what it is given against the setup.
  Resampler r;
  r.setup(good);
  const Image img = test::pattern_image(64, 48, 3, 1);
  std::vector<std::uint8_t> scratch(r.scratch_bytes());
  std::vector<std::uint8_t> dst(32 * 24 * 3);
  const ImageView out{dst.data(), 32, 24, 3, 96};
  const auto expect_run_invalid = [&](auto&& call, const char* what) {
    try {
      call();
      ADD_FAILURE() << what << ": no exception";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << what;
    }
  };
  expect_run_invalid(
      [&] {
        r.run(img.view(), 0, 0, ImageView{dst.data(), 31, 24, 3, 96}, scratch);
      },
      "dst too narrow");
  expect_run_invalid([&] { r.run(img.view(), 1, 0, out, scratch); }, "src misses the footprint");
  expect_run_invalid([&] { r.run(img.view(), 0, 0, out, std::span(scratch).first(1)); },
                     "scratch too small");
  expect_run_invalid([] { Resampler{}.run({}, 0, 0, {}, {}); }, "run before setup");
}

// A random geometry: plain resizes, boxes reaching outside the image, crops with valid sub-ranges,
// copies and pads, up and down, every filter, channel count and antialias setting.
ResampleParams random_params(std::mt19937& rng, int width, int height, int channels) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const auto axis = [&](int size) {
    AxisMap a;
    a.out_size = 1 + static_cast<int>(rng() % 160);
    switch (rng() % 5) {
      case 0:  // plain resize
        a = resize_axis(size, a.out_size);
        break;
      case 1:  // scale 1 at an integer offset, maybe padded: a copy
        a.origin = static_cast<int>(rng() % 21) - 10;
        a.scale = 1.0;
        a.valid_lo = 0;
        a.valid_hi = size;
        break;
      default:  // any box, any valid sub-range
        a.scale = std::exp(std::log(0.1) + unit(rng) * std::log(200.0));  // 0.1 .. 20
        a.origin = (unit(rng) - 0.1) * size;
        a.valid_lo = static_cast<int>(rng() % static_cast<unsigned>(size));
        a.valid_hi =
            a.valid_lo + 1 + static_cast<int>(rng() % static_cast<unsigned>(size - a.valid_lo));
        if (rng() % 2 == 0) {
          a.valid_lo = 0;
          a.valid_hi = size;
        }
        break;
    }
    return a;
  };
  ResampleParams p;
  p.x = axis(width);
  p.y = axis(height);
  p.channels = channels;
  p.filter = rng() % 2 == 0 ? Filter::kBilinear : Filter::kArea;
  p.antialias = rng() % 4 != 0;
  p.fill = static_cast<std::uint8_t>(rng());
  return p;
}

TEST(Resample, EverySimdKernelSetEqualsScalarOnRandomGeometries) {
  std::mt19937 rng(20240607);
  int compared = 0;
  std::vector<ResampleIsa> sets;
  for (ResampleIsa isa : {ResampleIsa::kSse41, ResampleIsa::kAvx2}) {
    if (ResamplerTestPeer::supported(isa))
      sets.push_back(isa);
    else
      std::printf("[ simd ] %s not supported by this CPU: not compared\n", to_string(isa));
  }
  for (int trial = 0; trial < 600; ++trial) {
    constexpr int kChannels[] = {1, 3, 4};
    const int channels = kChannels[rng() % 3];
    const int width = 1 + static_cast<int>(rng() % 300);
    const int height = 1 + static_cast<int>(rng() % 200);
    const Image img = test::noise_image(width, height, channels, trial);
    const ResampleParams p = random_params(rng, width, height, channels);
    Resampler r;
    r.setup(p);
    ResamplerTestPeer::set_isa(r, ResampleIsa::kScalar);
    const int pad = static_cast<int>(rng() % 9);
    const Image want = run_on_footprint(r, p, img, pad);
    ASSERT_EQ(test::resample(p, img, ResampleIsa::kScalar).pixels, want.pixels)
        << "scalar: footprint-only source differs from the whole image, trial " << trial;
    if (trial % 3 == 0) ResamplerTestPeer::disable_ring(r);  // every row up front: same bytes
    for (ResampleIsa isa : sets) {
      ResamplerTestPeer::set_isa(r, isa);
      const Image got = run_on_footprint(r, p, img, pad);
      ASSERT_EQ(got.pixels, want.pixels)
          << to_string(isa) << " != scalar, trial " << trial << ": c=" << channels << " src "
          << width << "x" << height << " x{" << p.x.origin << "," << p.x.scale << ","
          << p.x.out_size << ",[" << p.x.valid_lo << "," << p.x.valid_hi << ")} y{" << p.y.origin
          << "," << p.y.scale << "," << p.y.out_size << ",[" << p.y.valid_lo << "," << p.y.valid_hi
          << ")} filter " << static_cast<int>(p.filter) << " aa " << p.antialias;
      ++compared;
    }
  }
  std::printf("[ simd ] %d geometry x kernel-set comparisons, all bit-exact\n", compared);
}

// run_rows(), the band-by-band resample of a source decoded in row bands: random geometries cut
// into random bands of output rows, each given a source that holds only the rows it reads, equal
// run() on the whole image byte for byte (ring and no ring, every kernel set this CPU has).
TEST(Resample, RunRowsOnSourceBandsEqualsRunOnTheWholeImage) {
  std::mt19937 rng(777);
  int bands = 0;
  for (int trial = 0; trial < 300; ++trial) {
    constexpr int kChannels[] = {1, 3, 4};
    const int channels = kChannels[rng() % 3];
    const int width = 1 + static_cast<int>(rng() % 300);
    const int height = 1 + static_cast<int>(rng() % 300);
    const Image img = test::noise_image(width, height, channels, trial);
    const ResampleParams p = random_params(rng, width, height, channels);
    Resampler r;
    r.setup(p);
    if (trial % 3 == 0) ResamplerTestPeer::disable_ring(r);
    const Image want = test::resample(p, img, ResampleIsa::kAuto);
    std::vector<std::uint8_t> scratch(r.scratch_bytes() + 1);
    Image got{p.x.out_size, p.y.out_size, channels,
              std::vector<std::uint8_t>(static_cast<std::size_t>(p.x.out_size) * p.y.out_size * channels, 0xA5)};
    const ImageView dst{got.pixels.data(), got.width, got.height, channels, got.width * channels};
    const Rect fp = r.footprint();
    for (int o = 0; o < p.y.out_size;) {
      const int end = std::min(p.y.out_size, o + 1 + static_cast<int>(rng() % 40));
      int lo = INT_MAX, hi = INT_MIN;
      for (int k = o; k < end; ++k) {
        const auto [first, last] = r.source_rows(k);
        if (first == last) continue;
        lo = std::min(lo, first);
        hi = std::max(hi, last);
      }
      if (lo == INT_MAX) lo = hi = 0;
      // Only those rows, and only the footprint's columns: anything else read would be out of
      // the view (and caught by ASan on the copy).
      std::vector<std::uint8_t> band(static_cast<std::size_t>(std::max(fp.width, 1)) * std::max(hi - lo, 1) * channels);
      for (int y = lo; y < hi; ++y) {
        std::memcpy(band.data() + static_cast<std::size_t>(y - lo) * fp.width * channels,
                    img.pixels.data() + (static_cast<std::size_t>(y) * width + fp.x) * channels,
                    static_cast<std::size_t>(fp.width) * channels);
      }
      r.run_rows(ConstImageView{band.data(), fp.width, hi - lo, channels, fp.width * channels}, fp.x, lo, dst, o, end,
                 scratch);
      o = end;
      ++bands;
    }
    ASSERT_EQ(got.pixels, want.pixels) << "trial " << trial;
  }
  std::printf("[ bands ] %d bands over 300 geometries, all equal to run()\n", bands);
}

TEST(Resample, SimdHorizontalPassEqualsScalarAtEveryWidthAndRowEnd) {
  // The SIMD horizontal kernels take 4 colour or 8 grey output pixels per step, read 8- or
  // 16-byte windows from each pixel's first tap and switch to a careful loop near the row's end;
  // the weights are split into 15-bit halves (a weight of exactly 1.0, from upscaling with the box
  // filter, has the largest high half). Every output width from 1 to 40 (every remainder of a
  // step), tap counts from 1 to 41 (unrolled and general loops), a source that ends at the last
  // tap (guard page), and noise, flat white and 0/255 stripes (the clipping edges).
  std::vector<ResampleIsa> sets;
  for (ResampleIsa isa : {ResampleIsa::kSse41, ResampleIsa::kAvx2}) {
    if (ResamplerTestPeer::supported(isa)) sets.push_back(isa);
  }
  if (sets.empty()) GTEST_SKIP() << "no SIMD kernel set on this CPU";
  struct Scale {
    double scale;
    Filter filter;
  };
  const Scale scales[] = {{0.5, Filter::kArea},     {0.73, Filter::kBilinear},
                          {1.47, Filter::kBilinear}, {2.23, Filter::kBilinear},
                          {3.6, Filter::kArea},      {5.3, Filter::kBilinear},
                          {20.0, Filter::kArea}};
  int compared = 0;
  for (const int channels : {1, 3, 4}) {
    for (const Scale& s : scales) {
      for (int out = 1; out <= 40; ++out) {
        const int in = std::max(1, static_cast<int>(std::lround(out * s.scale)));
        for (int kind = 0; kind < 3; ++kind) {
          Image img = test::noise_image(in, 3, channels, static_cast<std::uint32_t>(out));
          for (std::size_t i = 0; i < img.pixels.size(); ++i) {
            if (kind == 1) img.pixels[i] = 255;
            if (kind == 2) img.pixels[i] = (i / channels) % 2 == 0 ? 0 : 255;
          }
          // y is a copy: the horizontal pass writes straight into dst.
          const ResampleParams p{resize_axis(in, out), AxisMap{0, 1, 3, 0, 3}, channels,
                                 s.filter, true, 0};
          Resampler r;
          r.setup(p);
          ResamplerTestPeer::set_isa(r, ResampleIsa::kScalar);
          const Image want = run_on_footprint(r, p, img);
          for (ResampleIsa isa : sets) {
            ResamplerTestPeer::set_isa(r, isa);
            ASSERT_EQ(run_on_footprint(r, p, img).pixels, want.pixels)
                << to_string(isa) << " != scalar: c=" << channels << " " << in << " -> " << out
                << " scale " << s.scale << " filter " << static_cast<int>(s.filter) << " image "
                << kind;
            ++compared;
          }
        }
      }
    }
  }
  std::printf("[ simd ] %d row geometries x kernel sets, all bit-exact\n", compared);
}

TEST(Resample, SetupReusesStorageOnceWarmedUp) {
  // Warm up at the largest geometry: most output pixels and most taps per pixel, RGB.
  const ResampleParams warm{
      resize_axis(4000, 400), resize_axis(3000, 400), 3, Filter::kBilinear, true, 0};
  Resampler r;
  r.setup(warm);
  const auto storage = ResamplerTestPeer::storage(r);
  const Image rgb = test::pattern_image(500, 375, 3, 5);
  const Image grey = test::pattern_image(500, 375, 1, 5);
  std::vector<std::uint8_t> dst(400 * 400 * 3);
  std::vector<std::uint8_t> scratch(1 << 20);
  const ResampleParams smaller[] = {
      {resize_axis(500, 224), resize_axis(375, 224), 3, Filter::kBilinear, true, 0},
      {AxisMap{60, 341.0 / 224, 224, 60, 401}, AxisMap{40, 256.0 / 224, 224, 40, 296}, 3,
       Filter::kArea, true, 0},
      {AxisMap{-4, 1, 32, 0, 32}, AxisMap{3, 1, 32, 0, 32}, 3, Filter::kBilinear, true, 0},
      {resize_axis(500, 400), resize_axis(375, 400), 1, Filter::kBilinear, false, 0},
      {resize_axis(4000, 400), resize_axis(3000, 400), 3, Filter::kBilinear, true, 0},
  };
  for (const ResampleParams& p : smaller) {
    const Image& img = p.channels == 3 ? rgb : grey;
    const long before = g_allocations.load();
    r.setup(p);
    const Rect fp = r.footprint();
    if (fp.x + fp.width <= img.width && fp.y + fp.height <= img.height &&
        r.scratch_bytes() <= scratch.size()) {
      r.run(
          img.view(), 0, 0,
          ImageView{dst.data(), p.x.out_size, p.y.out_size, p.channels, p.x.out_size * p.channels},
          scratch);
    }
    EXPECT_EQ(g_allocations.load(), before) << "setup() or run() allocated after warm-up";
    EXPECT_EQ(ResamplerTestPeer::storage(r), storage) << "a table moved or grew after warm-up";
  }
}

TEST(Resample, RingOfRowsIsSmallAndFootprintStaysInsideTheCrop) {
  Resampler r;
  // 341x256 crop of a 500x375 image to 224x224: taps never leave the crop, and the horizontal
  // rows live in a ring of a few rows instead of one row per source row.
  ResampleParams p{AxisMap{60, 341.0 / 224, 224, 60, 401},
                   AxisMap{40, 256.0 / 224, 224, 40, 296},
                   3,
                   Filter::kBilinear,
                   true,
                   0};
  r.setup(p);
  const Rect fp = r.footprint();
  EXPECT_GE(fp.x, 60);
  EXPECT_LE(fp.x + fp.width, 401);
  EXPECT_GE(fp.y, 40);
  EXPECT_LE(fp.y + fp.height, 296);
  EXPECT_LE(r.scratch_bytes(), static_cast<std::size_t>(224 * 3 * 8));
}

}  // namespace
}  // namespace sluice::stages
