// One example of every stage (at least one per alternative of spec::Stage), each valid on its own
// and with its options away from the defaults, for the tests that go through every stage's
// descriptor (tests/unit/pipeline/stage_registry_test.cpp, tests/unit/stages/resolved_pipeline_test.cpp).
// A new stage needs its example here; those tests fail until it has one.
#pragma once

#include <vector>

#include "sluice/core/units.hpp"
#include "sluice/pipeline/spec.hpp"

namespace sluice::test {

inline std::vector<spec::Stage> stage_examples() {
  return {
      spec::Read{{.max_file_size = 5_MiB}},
      spec::Cache{MemoryCache{123456}},
      spec::Cache{DiskCache{"/var/tmp/x.cache", 1_GiB}},
      spec::DecodeJpeg{{.color = Color::kGrey, .fast_dct = true, .fast_upsample = true,
                        .fast_upsample_when_shrunk = true, .dct_scaling = false,
                        .roi = false, .strict = true, .max_image_pixels = 1000}},
      spec::ResizeShorter{40, {.filter = Filter::kArea, .antialias = false}},
      spec::Resize{33, 30, {.filter = Filter::kBilinear, .antialias = false}},
      spec::CenterCrop{30, 28},
      spec::RandomResizedCrop{24, 20, {.scale_min = 0.2, .scale_max = 0.9, .ratio_min = 0.5, .ratio_max = 2.0,
                                       .resize = {.filter = Filter::kArea, .antialias = true}, .seed = 5}},
      spec::RandomCrop{20, 20, {.padding = 2, .fill = 7, .seed = 9}},
      spec::FlipHorizontal{0.25, {.seed = 3}},
      spec::FlipVertical{0.75, {.seed = 8}},
      spec::ColorJitter{{.brightness = {0.6, 1.4}, .contrast = {0.5, 1.5}, .saturation = {0.0, 2.0},
                         .hue = {-0.25, 0.125}, .seed = 6}},
      spec::Grayscale{3},
      spec::RandomGrayscale{0.3, {.seed = 2}},
      spec::RandomRotation{{-30, 15}, {.center_x = 10.0, .center_y = 12.5,
                                        .warp = {.interpolation = WarpFilter::kBilinear, .fill = {1, 2, 3}, .seed = 4}}},
      spec::RandomAffine{{-10, 10}, {.translate_x = 0.1, .translate_y = 0.2, .scale = {0.8, 1.2}, .shear_x = {-5, 5},
                                     .shear_y = {-2, 3}, .warp = {.fill = {9}}}},
      spec::GaussianBlur{5, 3, {0.5, 1.5}, {.seed = 12}},
      spec::RandomPosterize{4, 0.25, {}},
      spec::RandomSolarize{128, 0.75, {.seed = 1}},
      spec::RandomInvert{0.2, {}},
      spec::RandomAutocontrast{0.6, {}},
      spec::RandomEqualize{0.7, {.seed = 13}},
      spec::RandomAdjustSharpness{2.0, 0.4, {}},
      spec::TrivialAugmentWide{21, {.interpolation = WarpFilter::kBilinear, .fill = {128}}},
      spec::RandAugment{3, 5, 11, {.seed = 14}},
      spec::AutoAugment{AutoAugmentPolicy::kCifar10, {}},
      spec::Normalize{{.mean = {0.485f, 0.456f, 0.406f}, .std = {0.229f, 0.224f, 0.225f}, .layout = Layout::kNHWC,
                       .dtype = DType::kBF16}},
      spec::RandomErasing{{.probability = 0.4, .scale = {0.1, 0.2}, .ratio = {0.5, 2.0}, .value = {0.5f, -1.0f, 2.0f},
                           .seed = 11}},
      spec::RandomErasing{{.value = {}}},
      spec::Shuffle{100, {.seed = 4}},
      spec::Batch{8, {.drop_last = true}},
      spec::Prefetch{3},
      spec::ToDevice{cuda(1), {.normalize_on_device = true, .stage_through_ring = true}},
      spec::MixUp{0.2, 1000, 7}, spec::CutMix{1.0, 10, std::nullopt},
  };
}

}  // namespace sluice::test
