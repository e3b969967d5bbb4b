// The augmentation stages end to end through the public API: flip_vertical folds into the mapping
// exactly (rows reversed, crops after it mirrored), grayscale(1) narrows the batch to one channel
// of Pillow's luma, random_erasing writes its rectangle into the normalised sample and nothing
// else, the chain is the same at 1 and 2 threads and changes with the epoch, the pixel ops need no
// memory beyond the plan's, and bad parameters are refused naming the value.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "pipeline_support.hpp"
#include "sluice/pipeline/json_spec.hpp"
#include "sluice/sluice.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

constexpr int kWidth = 96;
constexpr int kHeight = 80;
constexpr int kImages = 12;

class Augment : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    test::make_image_folder(dir_->path(), 2, kImages / 2, kWidth, kHeight);
  }
  static void TearDownTestSuite() { delete dir_; }
  static Pipeline decoded() { return std::move(Pipeline::from_folder(dir_->path().string()).read().decode_jpeg()); }

  // Every sample of epoch 0, as bytes, one vector per sample.
  static std::vector<std::vector<std::uint8_t>> samples(Pipeline pipeline, int threads = 2, std::int64_t epoch = 0) {
    Loader loader = pipeline.batch(kImages).build({.threads = threads, .seed = 5});
    std::vector<std::vector<std::uint8_t>> out;
    for (Batch& b : loader.epoch(epoch)) {
      const auto* p = static_cast<const std::uint8_t*>(b.data().data);
      const std::size_t each = b.data().bytes() / static_cast<std::size_t>(b.size());
      for (std::int64_t i = 0; i < b.size(); ++i) out.emplace_back(p + i * each, p + (i + 1) * each);
    }
    return out;
  }
  static std::string build_error(Pipeline pipeline) {
    try {
      pipeline.build({.threads = 1});
    } catch (const Error& e) {
      return e.cause();
    }
    return "";
  }
  static inline test::TempDir* dir_ = nullptr;
};

// Rows of an NHWC u8 sample, bottom-up.
std::vector<std::uint8_t> upside_down(const std::vector<std::uint8_t>& sample, int width, int height, int channels) {
  std::vector<std::uint8_t> out(sample.size());
  const std::size_t row = static_cast<std::size_t>(width) * channels;
  for (int y = 0; y < height; ++y) std::memcpy(&out[y * row], &sample[(height - 1 - y) * row], row);
  return out;
}

// The block of `image` (kWidth x kHeight RGB) at (left, top).
std::vector<std::uint8_t> block(const std::vector<std::uint8_t>& image, int left, int top, int width, int height) {
  std::vector<std::uint8_t> out;
  for (int y = top; y < top + height; ++y) {
    const auto* row = &image[(static_cast<std::size_t>(y) * kWidth + left) * 3];
    out.insert(out.end(), row, row + static_cast<std::size_t>(width) * 3);
  }
  return out;
}

TEST_F(Augment, FlipVerticalReversesTheRowsExactly) {
  const auto plain = samples(decoded().resize(50, 30));
  const auto flipped = samples(decoded().resize(50, 30).flip_vertical(1.0));
  ASSERT_EQ(plain.size(), flipped.size());
  for (std::size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(flipped[i], upside_down(plain[i], 50, 30, 3)) << i;
  const auto never = samples(decoded().resize(50, 30).flip_vertical(0.0));
  EXPECT_EQ(never, plain);
}

// torchvision's order: a crop after the flip takes its rows from the flipped image.
TEST_F(Augment, ACropAfterFlipVerticalIsMirrored) {
  const auto whole = samples(decoded());
  const RandomCropOptions crop{.seed = 9};
  // flip_horizontal(0) keeps the crop at the same place among the image ops, so both draw alike.
  const auto unflipped = samples(decoded().flip_horizontal(0.0).random_crop(64, 40, crop));
  const auto flipped = samples(decoded().flip_vertical(1.0).random_crop(64, 40, crop));
  ASSERT_EQ(whole.size(), unflipped.size());
  int off_centre = 0;
  for (std::size_t i = 0; i < whole.size(); ++i) {
    int found_top = -1;
    int found_left = -1;
    for (int top = 0; top <= kHeight - 40 && found_top < 0; ++top) {
      for (int left = 0; left <= kWidth - 64; ++left) {
        if (block(whole[i], left, top, 64, 40) == unflipped[i]) {
          found_top = top;
          found_left = left;
          break;
        }
      }
    }
    ASSERT_GE(found_top, 0) << "sample " << i << " is not a block of its image";
    // Rows [top, top + 40) of the flipped image are rows [80 - top - 40, 80 - top) of the image, bottom-up.
    EXPECT_EQ(upside_down(flipped[i], 64, 40, 3), block(whole[i], found_left, kHeight - 40 - found_top, 64, 40)) << i;
    off_centre += found_top != (kHeight - 40) / 2 ? 1 : 0;
  }
  EXPECT_GT(off_centre, 0);  // a centred crop would not tell a mirrored crop from an unmirrored one
}

TEST_F(Augment, GrayscaleOneChannelIsPillowsLuma) {
  const auto rgb = samples(decoded().resize(40, 30));
  Loader loader = decoded().resize(40, 30).grayscale(1).batch(kImages).build({.threads = 2});
  ASSERT_EQ(loader.outputs()[0].shape, (Shape{kImages, 30, 40, 1}));
  const auto grey = samples(decoded().resize(40, 30).grayscale(1));
  const auto grey3 = samples(decoded().resize(40, 30).grayscale(3));
  ASSERT_EQ(rgb.size(), grey.size());
  for (std::size_t i = 0; i < rgb.size(); ++i) {
    ASSERT_EQ(grey[i].size() * 3, rgb[i].size());
    for (std::size_t p = 0; p < grey[i].size(); ++p) {
      const std::uint8_t* c = &rgb[i][p * 3];
      const auto luma = static_cast<std::uint8_t>((c[0] * 19595u + c[1] * 38470u + c[2] * 7471u + 0x8000u) >> 16);
      ASSERT_EQ(grey[i][p], luma) << "sample " << i << " pixel " << p;
      ASSERT_EQ(grey3[i][p * 3 + 1], luma);
    }
  }
}

TEST_F(Augment, RandomErasingWritesOneRectangleOfTheValue) {
  const NormalizeOptions f32{.mean = {0.5f, 0.5f, 0.5f}, .std = {0.25f, 0.25f, 0.25f}, .layout = Layout::kNCHW,
                             .dtype = DType::kF32};
  const auto plain = samples(decoded().resize(48, 40).normalize(f32));
  const std::vector<float> value{7.0f, -3.0f, 11.0f};
  const auto erased = samples(decoded().resize(48, 40).normalize(f32).random_erasing({.probability = 1.0, .value = value}));
  ASSERT_EQ(plain.size(), erased.size());
  int changed = 0;
  for (std::size_t i = 0; i < plain.size(); ++i) {
    std::vector<float> a(plain[i].size() / 4);
    std::vector<float> b(a.size());
    std::memcpy(a.data(), plain[i].data(), plain[i].size());
    std::memcpy(b.data(), erased[i].data(), erased[i].size());
    int x0 = 48, y0 = 40, x1 = -1, y1 = -1, count = 0;
    for (int c = 0; c < 3; ++c) {
      for (int y = 0; y < 40; ++y) {
        for (int x = 0; x < 48; ++x) {
          const std::size_t k = (static_cast<std::size_t>(c) * 40 + y) * 48 + x;
          if (a[k] == b[k]) continue;
          ASSERT_EQ(b[k], value[static_cast<std::size_t>(c)]) << "sample " << i;
          x0 = std::min(x0, x), y0 = std::min(y0, y), x1 = std::max(x1, x), y1 = std::max(y1, y);
          if (c == 0) ++count;
        }
      }
    }
    if (count == 0) continue;  // ten tries may all miss (rare at this size)
    ++changed;
    EXPECT_EQ(count, (x1 - x0 + 1) * (y1 - y0 + 1)) << "sample " << i << ": not one rectangle";
    const double share = static_cast<double>((x1 - x0 + 1) * (y1 - y0 + 1)) / (48.0 * 40.0);
    EXPECT_LE(share, 0.33 + 0.05) << i;
  }
  EXPECT_GE(changed, kImages - 2);
}

TEST_F(Augment, TheChainIsTheSameAtOneAndTwoThreadsAndChangesWithTheEpoch) {
  const auto chain = [] {
    return decoded()
        .random_resized_crop(48)
        .flip_horizontal()
        .flip_vertical()
        .color_jitter({.brightness = {0.6, 1.4}, .contrast = {0.6, 1.4}, .saturation = {0.6, 1.4}, .hue = {-0.1, 0.1}})
        .random_grayscale(0.3)
        .normalize({.mean = {0.485f, 0.456f, 0.406f}, .std = {0.229f, 0.224f, 0.225f}})
        .random_erasing({.value = {}})
        .batch(4);
  };
  Loader one = chain().build({.threads = 1, .seed = 3});
  Loader two = chain().build({.threads = 2, .seed = 3});
  EXPECT_EQ(test::epoch_checksum(one, 0), test::epoch_checksum(two, 0));
  EXPECT_EQ(test::epoch_checksum(one, 1), test::epoch_checksum(two, 1));
  EXPECT_NE(test::epoch_checksum(one, 0), test::epoch_checksum(one, 1));
  // The colour ops did something: without them the same crops give other bytes.
  Loader plain = decoded().random_resized_crop(48).flip_horizontal().flip_vertical()
                     .normalize({.mean = {0.485f, 0.456f, 0.406f}, .std = {0.229f, 0.224f, 0.225f}})
                     .batch(4).build({.threads = 2, .seed = 3});
  EXPECT_NE(test::epoch_checksum(plain, 0), test::epoch_checksum(two, 0));
}

TEST_F(Augment, PixelOpsNeedNoMemoryBeyondThePlan) {
  const BuildOptions options{.threads = 2};
  const auto with = decoded().random_resized_crop(48).color_jitter({.brightness = {0.5, 1.5}, .hue = {-0.2, 0.2}})
                        .grayscale(3).normalize().random_erasing({.probability = 1.0}).batch(4);
  const auto without = decoded().random_resized_crop(48).normalize().batch(4);
  const PipelineMemoryPlan need = with.plan_memory(options);
  EXPECT_EQ(need.minimum_bytes(), without.plan_memory(options).minimum_bytes());
  BuildOptions tight = options;
  tight.memory_budget = need.minimum_bytes();
  Loader loader = with.build(tight);
  int batches = 0;
  for (Batch& b : loader.epoch(0)) batches += b.size() > 0 ? 1 : 0;
  EXPECT_EQ(batches, kImages / 4);
  EXPECT_LE(loader.stats().memory_peak, tight.memory_budget);
}

TEST_F(Augment, WarpsFiltersAndPoliciesAreTheSameAtOneAndTwoThreads) {
  const auto chain = [] {
    return decoded()
        .random_resized_crop(48)
        .random_rotation({-20, 20}, {.warp = {.interpolation = WarpFilter::kBilinear, .fill = {10, 20, 30}}})
        .random_affine({-5, 5}, {.translate_x = 0.1, .translate_y = 0.1, .scale = {0.9, 1.1}, .shear_x = {-4, 4}})
        .gaussian_blur(3, 5)
        .random_posterize(5)
        .random_solarize(160)
        .random_invert(0.3)
        .random_autocontrast()
        .random_equalize()
        .random_adjust_sharpness(2.0)
        .trivial_augment_wide()
        .rand_augment()
        .auto_augment(AutoAugmentPolicy::kCifar10)
        .normalize()
        .batch(4);
  };
  Loader one = chain().build({.threads = 1, .seed = 4});
  Loader two = chain().build({.threads = 2, .seed = 4});
  EXPECT_EQ(test::epoch_checksum(one, 0), test::epoch_checksum(two, 0));
  EXPECT_EQ(test::epoch_checksum(one, 1), test::epoch_checksum(two, 1));
  EXPECT_NE(test::epoch_checksum(one, 0), test::epoch_checksum(one, 1));
}

// A policy needs a second image for its warps: the plan counts it per worker, and a loader built
// at the plan's minimum runs inside it.
TEST_F(Augment, PoliciesWorkspaceIsInThePlan) {
  const BuildOptions options{.threads = 2};
  const auto with = decoded().random_resized_crop(48).trivial_augment_wide().normalize().batch(4);
  const auto without = decoded().random_resized_crop(48).normalize().batch(4);
  const PipelineMemoryPlan need = with.plan_memory(options);
  EXPECT_GE(need.minimum_bytes(), without.plan_memory(options).minimum_bytes() + 2 * 48 * 48 * 3);
  BuildOptions tight = options;
  tight.memory_budget = need.minimum_bytes();
  Loader loader = with.build(tight);
  int batches = 0;
  for (Batch& b : loader.epoch(0)) batches += b.size() > 0 ? 1 : 0;
  EXPECT_EQ(batches, kImages / 4);
  EXPECT_LE(loader.stats().memory_peak, tight.memory_budget);
}

TEST_F(Augment, BadParametersAreRefusedNamingTheValue) {
  const auto says = [](const std::string& message, const std::string& part) {
    EXPECT_NE(message.find(part), std::string::npos) << "\"" << message << "\" lacks \"" << part << "\"";
  };
  says(build_error(decoded().color_jitter({.hue = {-0.7, 0.7}}).batch(2)), "hue must be [min, max] with -0.5 <= min <= max <= 0.5");
  says(build_error(decoded().color_jitter({.hue = {-0.7, 0.7}}).batch(2)), "got [-0.700000, 0.700000]");
  says(build_error(decoded().color_jitter({.brightness = {-1, 2}}).batch(2)), "brightness must be [min, max] with 0 <= min <= max <= 1e+06");
  says(build_error(decoded().color_jitter({.contrast = {1.5, 0.5}}).batch(2)), "got [1.500000, 0.500000]");
  says(build_error(decoded().grayscale(2).batch(2)), "num_output_channels must be 1 or 3, got 2");
  says(build_error(decoded().random_grayscale(1.5).batch(2)), "probability must be in [0, 1], got 1.500000");
  says(build_error(decoded().flip_vertical(-0.5).batch(2)), "probability must be in [0, 1], got -0.500000");
  says(build_error(decoded().normalize().random_erasing({.probability = 2}).batch(2)), "got 2.000000");
  says(build_error(decoded().normalize().random_erasing({.scale = {0.5, 0.2}}).batch(2)), "scale must be [min, max] with 0 <= min <= max <= 1, got [0.500000, 0.200000]");
  says(build_error(decoded().normalize().random_erasing({.ratio = {0, 1}}).batch(2)), "ratio must be [min, max] with 0 < min <= max, got [0.000000, 1.000000]");
  says(build_error(decoded().normalize().random_erasing({.value = {1, 2}}).batch(2)),
       "value has 2 numbers but the sample has 3 channels");
  says(build_error(decoded().random_erasing({}).normalize().batch(2)), "random_erasing() must follow normalize()");
  says(build_error(decoded().normalize({.mean = {}, .std = {}, .layout = Layout::kNHWC, .dtype = DType::kU8})
                       .random_erasing({.value = {0.5f}}).batch(2)),
       "value 0.500000 cannot be written into a u8 sample");
  says(build_error(decoded().color_jitter({.brightness = {0.5, 1.5}}).random_resized_crop(32).batch(2)),
       "random_resized_crop (stage 4): comes after color_jitter");
  says(build_error(decoded().resize(40, 30).grayscale(1).grayscale(3).batch(2)), "num_output_channels 3 needs an RGB");
  says(build_error(decoded().gaussian_blur(4, 3).batch(2)), "kernel_size must be odd, from 1 to 1023, got 4");
  says(build_error(decoded().gaussian_blur(3, 3, {0, 1}).batch(2)), "sigma must be [min, max] with 0 < min");
  says(build_error(decoded().random_posterize(9).batch(2)), "bits must be from 0 to 8, got 9");
  says(build_error(decoded().random_adjust_sharpness(-1).batch(2)), "sharpness_factor must be a finite number >= 0");
  says(build_error(decoded().random_rotation({10, -10}).batch(2)), "degrees must be [min, max] with -1e+06 <= min <= max <= 1e+06, got [10.000000, -10.000000]");
  says(build_error(decoded().random_rotation({-10, 10}, {.warp = {.fill = {1, 2}}}).batch(2)), "got 2 values");
  says(build_error(decoded().random_affine({0, 0}, {.translate_x = 1.5}).batch(2)), "translate must be two fractions");
  says(build_error(decoded().random_affine({0, 0}, {.scale = {0, 1}}).batch(2)), "scale must be [min, max] with 0 < min");
  says(build_error(decoded().trivial_augment_wide(1).batch(2)), "num_magnitude_bins must be from 2 to 1000, got 1");
  says(build_error(decoded().rand_augment(2, 31, 31).batch(2)), "magnitude must be a bin from 0 to num_magnitude_bins - 1 (30), got 31");
  says(build_error(decoded().trivial_augment_wide().center_crop(8).batch(2)), "center_crop (stage 4): comes after trivial_augment_wide");
  // Flips commute with the colour ops: allowed after them.
  EXPECT_EQ(build_error(decoded().resize(40, 30).color_jitter({.brightness = {0.5, 1.5}}).flip_vertical().batch(2)), "");
}

TEST_F(Augment, JsonNamesTheBadField) {
  const auto error_of = [](const std::string& stage) {
    try {
      parse_pipeline_json(R"({"source": {"folder": "x"}, "stages": ["read", "decode_jpeg", )" + stage +
                          R"(, {"batch": {"size": 2}}]})");
    } catch (const Error& e) {
      return e.cause();
    }
    return std::string();
  };
  EXPECT_EQ(error_of(R"({"color_jitter": {"hue": 0.7}})"),
            "stages[2].color_jitter.hue: expected a non-negative number or [min, max], got 0.7");
  EXPECT_EQ(error_of(R"({"color_jitter": {"saturation": [2, 1]}})"),
            "stages[2].color_jitter.saturation: expected [min, max] with min <= max, got [2,1]");
  EXPECT_EQ(error_of(R"({"random_erasing": {"value": "noise"}})"),
            "stages[2].random_erasing.value: expected a number, a list of numbers or \"random\", got \"noise\"");
  EXPECT_EQ(error_of(R"({"grayscale": {"num_output_channels": 2}})"),
            "stages[2].grayscale.num_output_channels: expected 1 or 3, got 2");
  EXPECT_EQ(error_of(R"({"auto_augment": {"policy": "svhn"}})"),
            "stages[2].auto_augment.policy: expected one of imagenet, cifar10, got \"svhn\"");
  EXPECT_EQ(error_of(R"({"random_rotation": {"degrees": 10, "interpolation": "bicubic"}})"),
            "stages[2].random_rotation.interpolation: expected one of nearest, bilinear, got \"bicubic\"");
  EXPECT_EQ(error_of(R"({"random_rotation": {"degrees": 10, "fill": 300}})"),
            "stages[2].random_rotation.fill: expected 0-255, got 300");
  EXPECT_EQ(error_of(R"({"random_rotation": {}})"),
            "stages[2].random_rotation.degrees: missing (expected a number or [min, max])");
  const PipelineDocument doc = parse_pipeline_json(
      R"({"source": {"folder": "x"}, "stages": ["read", "decode_jpeg", {"color_jitter": {"brightness": 0.4, "hue": 0.1}},
          {"batch": {"size": 2}}]})");
  const auto& jitter = std::get<spec::ColorJitter>(doc.spec.stages[2]).options;
  EXPECT_EQ(jitter.brightness, (FactorRange{0.6, 1.4}));
  EXPECT_EQ(jitter.contrast, (FactorRange{1, 1}));
  EXPECT_EQ(jitter.hue, (FactorRange{-0.1, 0.1}));
}

}  // namespace
}  // namespace sluice
