// The standard transforms (sluice/pipeline/presets.hpp): each preset is the builder's stages for
// its recipe, a JSON spec's {"preset": ...} expands into exactly those stages, and bad presets are
// refused naming the field.
#include "sluice/pipeline/presets.hpp"

#include <gtest/gtest.h>

#include <string>

#include "sluice/core/error.hpp"
#include "sluice/pipeline/json_spec.hpp"

namespace sluice {
namespace {

std::string stages_json(const std::vector<spec::Stage>& stages) {
  return to_json(PipelineSpec{.source = spec::Folder{"x"}, .stages = stages}, {}, -1);
}

std::string stages_json(const Pipeline& p) { return stages_json(p.spec().stages); }

Pipeline empty() { return Pipeline(PipelineSpec{.source = spec::Folder{"x"}}); }

TEST(Presets, EachIsTheBuildersStagesForItsRecipe) {
  const NormalizeOptions imagenet{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}, Layout::kNCHW, DType::kF32};
  EXPECT_EQ(stages_json(presets::imagenet_eval(224).stages),
            stages_json(empty().resize_shorter(256).center_crop(224).normalize(imagenet)));
  EXPECT_EQ(stages_json(presets::imagenet_train(160).stages),
            stages_json(empty().random_resized_crop(160).flip_horizontal(0.5).normalize(imagenet)));
  const NormalizeOptions cifar{{0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}, Layout::kNHWC, DType::kF16};
  EXPECT_EQ(stages_json(presets::cifar10_train({.dtype = DType::kF16, .layout = Layout::kNHWC}).stages),
            stages_json(empty().random_crop(32, {.padding = 4}).flip_horizontal(0.5).normalize(cifar)));
  EXPECT_EQ(stages_json(presets::fashion_mnist_eval().stages),
            stages_json(empty().normalize({{0.2860f}, {0.3530f}, Layout::kNCHW, DType::kF32})));
  Pipeline p = empty();
  p.read().decode_jpeg();
  presets::imagenet_eval(224).apply(p).batch(8);
  EXPECT_EQ(stages_json(p), stages_json(empty().read().decode_jpeg().resize_shorter(256).center_crop(224).normalize(imagenet).batch(8)));
}

TEST(Presets, JsonPresetExpandsIntoTheSameStages) {
  const PipelineDocument doc = parse_pipeline_json(R"({"source": {"folder": "x"}, "stages": ["read", "decode_jpeg",
      {"preset": {"name": "imagenet_eval", "size": 224, "dtype": "f16"}}, {"batch": {"size": 4}}]})");
  Pipeline expected = empty();
  expected.read().decode_jpeg();
  presets::imagenet_eval(224, {.dtype = DType::kF16}).apply(expected).batch(4);
  EXPECT_EQ(stages_json(doc.spec.stages), stages_json(expected));
  const PipelineDocument short_form = parse_pipeline_json(
      R"({"source": {"folder": "x"}, "stages": ["read", "decode_jpeg", {"preset": "cifar10_eval"}]})");
  EXPECT_EQ(short_form.spec.stages.size(), 3u);
  EXPECT_TRUE(std::holds_alternative<spec::Normalize>(short_form.spec.stages.back()));
}

TEST(Presets, BadPresetsNameTheField) {
  const auto message = [](const std::string& preset) {
    try {
      parse_pipeline_json(R"({"source": {"folder": "x"}, "stages": [)" + preset + "]}");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(R"({"preset": "imagenet_val"})").find("stages[0].preset: unknown preset \"imagenet_val\"; known: imagenet_eval"),
            std::string::npos);
  EXPECT_NE(message(R"({"preset": {"name": "imagenet_eval"}})").find("stages[0].preset.size: missing"), std::string::npos);
  EXPECT_NE(message(R"({"preset": {"name": "cifar10_train", "size": 32}})").find("stages[0].preset.size"), std::string::npos);
  EXPECT_NE(message(R"({"preset": {"name": "cifar10_train", "crop": 32}})").find("unknown key \"crop\""), std::string::npos);
  EXPECT_NE(message(R"({"preset": 7})").find("stages[0].preset"), std::string::npos);
  EXPECT_NE(message(R"({"preset": {"name": "imagenet_eval", "size": 2147483647}})").find("stages[0].preset.size"),
            std::string::npos);  // size * 256 / 224 would overflow
  EXPECT_THROW(presets::find("nope"), Error);
  EXPECT_THROW(presets::imagenet_eval(0), Error);
  EXPECT_THROW(presets::eval_crop(65537), Error);
}

}  // namespace
}  // namespace sluice
