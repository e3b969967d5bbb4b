// The JSON pipeline spec: a pipeline using every stage and option survives to_json and back; each
// kind of bad spec fails with kInvalidArgument and a message naming the field by its JSON path;
// a spec file's relative paths resolve against its folder; and a pipeline built from a spec gives
// the same batches as the same pipeline written with the C++ builder.
#include "sluice/pipeline/json_spec.hpp"

#include <gtest/gtest.h>
#include <vector>
#include <utility>
#include <optional>
#include <cstdlib>

#include <algorithm>
#include <fstream>

#include "sluice/detail/core/numbers.hpp"
#include "pipeline_support.hpp"
#include "sluice/sluice.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

using test::TempDir;

// Every stage, every option away from its default (not a pipeline build() would accept: the
// parser checks shapes, not the order of stages).
Pipeline every_option() {
  Pipeline p = Pipeline::from_items({{"a/0.jpg", 3}, {"/abs/1.jpg", 0}});
  p.shard(1, 3)
      .shuffle_files(7)
      .read({.max_file_size = 5_MiB})
      .cache(MemoryCache{123456})
      .cache(DiskCache{"/var/tmp/x.cache", 1_GiB})
      .decode_jpeg({.color = Color::kGrey, .fast_dct = true, .fast_upsample = true, .dct_scaling = false,
                    .roi = false, .strict = true, .max_image_pixels = 1000})
      .resize_shorter(40, {.filter = Filter::kArea, .antialias = false})
      .resize(33, 30, {.filter = Filter::kBilinear, .antialias = false})
      .center_crop(30, 28)
      .random_resized_crop(24, 20, {.scale_min = 0.2, .scale_max = 0.9, .ratio_min = 0.5, .ratio_max = 2.0,
                                    .resize = {.filter = Filter::kArea, .antialias = true}, .seed = 5})
      .random_crop(20, {.padding = 2, .fill = 7, .seed = 9})
      .flip_horizontal(0.25, {.seed = 3})
      .normalize({.mean = {0.485f, 0.456f, 0.406f}, .std = {0.229f, 0.224f, 0.225f}, .layout = Layout::kNHWC,
                  .dtype = DType::kBF16})
      .shuffle(100, {.seed = 4})
      .batch(8, {.drop_last = true})
      .prefetch(3)
      .to_device(cuda(1), {.normalize_on_device = true, .stage_through_ring = true});
  return p;
}

const BuildOptions kEveryBuildOption{.memory_budget = 3_GiB, .threads = 4, .samples_in_flight = 16,
                                     .on_error = OnError::kSkip, .seed = 42, .ordered = false};

template <class T>
const T& stage(const PipelineDocument& doc, std::size_t index) {
  EXPECT_LT(index, doc.spec.stages.size());
  const T* s = std::get_if<T>(&doc.spec.stages.at(index));
  EXPECT_NE(s, nullptr) << "stage " << index << " is " << spec::name_of(doc.spec.stages.at(index));
  static const T kEmpty{};
  return s != nullptr ? *s : kEmpty;
}

TEST(JsonSpec, RoundTripOfEveryStageAndOption) {
  const std::string text = to_json(every_option().spec(), kEveryBuildOption);
  const PipelineDocument doc = parse_pipeline_json(text);
  EXPECT_EQ(to_json(doc), text);  // and the writer writes every field: checked one by one below

  const auto& items = std::get<spec::Items>(doc.spec.source).items;
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].path, "a/0.jpg");
  EXPECT_EQ(items[0].label, 3);
  EXPECT_EQ(doc.spec.shard_rank, 1);
  EXPECT_EQ(doc.spec.shard_world, 3);
  EXPECT_EQ(doc.spec.shuffle_files_seed, 7u);
  ASSERT_EQ(doc.spec.stages.size(), 15u);
  EXPECT_EQ(stage<spec::Read>(doc, 0).options.max_file_size, 5_MiB);
  EXPECT_EQ(std::get<MemoryCache>(stage<spec::Cache>(doc, 1).store).max_bytes, 123456u);
  const auto& disk = std::get<DiskCache>(stage<spec::Cache>(doc, 2).store);
  EXPECT_EQ(disk.path, "/var/tmp/x.cache");
  EXPECT_EQ(disk.max_bytes, 1_GiB);
  const DecodeOptions& d = stage<spec::DecodeJpeg>(doc, 3).options;
  EXPECT_EQ(d.color, Color::kGrey);
  EXPECT_TRUE(d.fast_dct && d.fast_upsample && d.strict);
  EXPECT_FALSE(d.dct_scaling || d.roi);
  EXPECT_EQ(d.max_image_pixels, 1000u);
  EXPECT_EQ(stage<spec::ResizeShorter>(doc, 4).size, 40);
  EXPECT_EQ(stage<spec::ResizeShorter>(doc, 4).options.filter, Filter::kArea);
  EXPECT_FALSE(stage<spec::ResizeShorter>(doc, 4).options.antialias);
  EXPECT_EQ(stage<spec::Resize>(doc, 5).width, 33);
  EXPECT_EQ(stage<spec::Resize>(doc, 5).height, 30);
  EXPECT_FALSE(stage<spec::Resize>(doc, 5).options.antialias);
  EXPECT_EQ(stage<spec::CenterCrop>(doc, 6).width, 30);
  EXPECT_EQ(stage<spec::CenterCrop>(doc, 6).height, 28);
  const auto& rrc = stage<spec::RandomResizedCrop>(doc, 7);
  EXPECT_EQ(rrc.width, 24);
  EXPECT_EQ(rrc.height, 20);
  EXPECT_EQ(rrc.options.scale_min, 0.2);
  EXPECT_EQ(rrc.options.scale_max, 0.9);
  EXPECT_EQ(rrc.options.ratio_min, 0.5);
  EXPECT_EQ(rrc.options.ratio_max, 2.0);
  EXPECT_EQ(rrc.options.resize.filter, Filter::kArea);
  EXPECT_EQ(rrc.options.seed, 5u);
  const auto& crop = stage<spec::RandomCrop>(doc, 8);
  EXPECT_EQ(crop.width, 20);
  EXPECT_EQ(crop.options.padding, 2);
  EXPECT_EQ(crop.options.fill, 7);
  EXPECT_EQ(crop.options.seed, 9u);
  EXPECT_EQ(stage<spec::FlipHorizontal>(doc, 9).probability, 0.25);
  EXPECT_EQ(stage<spec::FlipHorizontal>(doc, 9).options.seed, 3u);
  const NormalizeOptions& n = stage<spec::Normalize>(doc, 10).options;
  EXPECT_EQ(n.mean, (std::vector<float>{0.485f, 0.456f, 0.406f}));  // exact: floats survive the doubles
  EXPECT_EQ(n.std, (std::vector<float>{0.229f, 0.224f, 0.225f}));
  EXPECT_EQ(n.layout, Layout::kNHWC);
  EXPECT_EQ(n.dtype, DType::kBF16);
  EXPECT_EQ(stage<spec::Shuffle>(doc, 11).buffer, 100);
  EXPECT_EQ(stage<spec::Shuffle>(doc, 11).options.seed, 4u);
  EXPECT_EQ(stage<spec::Batch>(doc, 12).size, 8);
  EXPECT_TRUE(stage<spec::Batch>(doc, 12).options.drop_last);
  EXPECT_EQ(stage<spec::Prefetch>(doc, 13).depth, 3);
  const auto& to = stage<spec::ToDevice>(doc, 14);
  EXPECT_EQ(to.device, cuda(1));
  EXPECT_TRUE(to.options.normalize_on_device && to.options.stage_through_ring);

  EXPECT_EQ(doc.build.memory_budget, 3_GiB);
  EXPECT_EQ(doc.build.threads, 4);
  EXPECT_EQ(doc.build.samples_in_flight, 16);
  EXPECT_EQ(doc.build.on_error, OnError::kSkip);
  EXPECT_EQ(doc.build.seed, 42u);
  EXPECT_FALSE(doc.build.ordered);
}

TEST(JsonSpec, RoundTripOfDefaultsFoldersAndLists) {
  for (Pipeline p : {Pipeline::from_folder("/data/train").read().decode_jpeg().batch(4),
                     Pipeline::from_list("lists/train.txt").read().decode_jpeg().random_crop(32).batch(4),
                     Pipeline::from_list("/lists/up.txt", {.allow_outside_root = true}).read().decode_jpeg().batch(4)}) {
    const std::string text = to_json(p.spec(), {});
    const PipelineDocument doc = parse_pipeline_json(text);
    EXPECT_EQ(to_json(doc), text);
    EXPECT_EQ(doc.build.threads, autotune);
    EXPECT_FALSE(doc.spec.shuffle_files_seed.has_value());
    if (const auto* list = std::get_if<spec::ListFile>(&p.spec().source)) {
      EXPECT_EQ(std::get<spec::ListFile>(doc.spec.source).allow_outside_root, list->allow_outside_root);
    }
  }
}

TEST(JsonSpec, HandWrittenSpecWithSizesShorthandAndSeeds) {
  const PipelineDocument doc = parse_pipeline_json(R"({
    "source": {"folder": "imagenet/train"},
    "shard": {"rank": 0, "world": 2},
    "shuffle_files": {},
    "stages": ["read", {"decode_jpeg": {"color": "RGB", "fast_dct": true}},
               {"random_resized_crop": {"size": 224}}, {"flip_horizontal": {"probability": 0.5}},
               {"normalize": {"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225],
                              "layout": "NCHW", "dtype": "f16"}},
               {"batch": {"size": 256}}, {"prefetch": {"depth": 2}}, {"to_device": {"device": "cuda"}}],
    "build": {"memory_budget": "4GiB", "threads": "auto", "seed": 9}
  })");
  EXPECT_EQ(std::get<spec::Folder>(doc.spec.source).path, "imagenet/train");  // text: left relative
  EXPECT_EQ(doc.spec.shuffle_files_seed, 9u);  // no seed of its own: build.seed
  EXPECT_EQ(stage<spec::Read>(doc, 0).options.max_file_size, ReadOptions{}.max_file_size);
  EXPECT_TRUE(stage<spec::DecodeJpeg>(doc, 1).options.fast_dct);
  EXPECT_EQ(stage<spec::RandomResizedCrop>(doc, 2).width, 224);
  EXPECT_EQ(stage<spec::RandomResizedCrop>(doc, 2).height, 224);
  EXPECT_EQ(stage<spec::RandomResizedCrop>(doc, 2).options.scale_min, 0.08);
  EXPECT_EQ(stage<spec::Normalize>(doc, 4).options.dtype, DType::kF16);
  EXPECT_EQ(stage<spec::ToDevice>(doc, 7).device, cuda(0));
  EXPECT_EQ(doc.build.memory_budget, 4_GiB);
  EXPECT_EQ(doc.build.threads, autotune);
}

// The message of parsing `text`, which must fail with kInvalidArgument.
std::string error_of(const std::string& text) {
  try {
    parse_pipeline_json(text);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "parsed: " << text;
  return {};
}

// A spec with a valid source and `stages`, for error cases about one stage.
std::string with_stages(const std::string& stages, const std::string& build = "{}") {
  return R"({"source": {"folder": "d"}, "stages": )" + stages + R"(, "build": )" + build + "}";
}

// decode_jpeg's "strict" replaced "accept_warnings" (its opposite): a spec written before keeps
// what it said, a spec that gives both must agree, and specs are written with "strict" only.
TEST(JsonSpec, DecodeStrictAndTheOldAcceptWarningsKey) {
  const auto strict_of = [](const std::string& decode) {
    const std::string text = R"({"source": {"folder": "d"}, "stages": ["read", {"decode_jpeg": )" + decode + "}]}";
    return stage<spec::DecodeJpeg>(parse_pipeline_json(text), 1).options.strict;
  };
  EXPECT_FALSE(strict_of("{}"));
  EXPECT_TRUE(strict_of(R"({"strict": true})"));
  EXPECT_FALSE(strict_of(R"({"accept_warnings": true})"));
  EXPECT_TRUE(strict_of(R"({"accept_warnings": false})"));
  EXPECT_TRUE(strict_of(R"({"strict": true, "accept_warnings": false})"));
  EXPECT_EQ(error_of(with_stages(R"([{"decode_jpeg": {"strict": true, "accept_warnings": true}}])")),
            "stages[0].decode_jpeg.accept_warnings: contradicts strict (accept_warnings is the old name of "
            "!strict; give strict alone)");
  const PipelineDocument doc = parse_pipeline_json(
      R"({"source": {"folder": "d"}, "stages": ["read", {"decode_jpeg": {"accept_warnings": false}}]})");
  const std::string written = to_json(doc, -1);
  EXPECT_NE(written.find(R"("strict":true)"), std::string::npos) << written;
  EXPECT_EQ(written.find("accept_warnings"), std::string::npos) << written;
}

// The decode stage is written back as "decode" (its name), whichever name it was read under, with
// its orientation; the text read back is the same stage.
TEST(JsonSpec, DecodeIsWrittenAsDecodeWithItsOrientation) {
  for (const char* name : {"decode", "decode_jpeg"}) {
    SCOPED_TRACE(name);
    const PipelineDocument doc = parse_pipeline_json(std::string(R"({"source": {"folder": "d"}, "stages": ["read", {")") +
                                                     name + R"(": {"orientation": "exif"}}]})");
    EXPECT_EQ(stage<spec::DecodeJpeg>(doc, 1).options.orientation, Orientation::kExif);
    const std::string written = to_json(doc, -1);
    EXPECT_NE(written.find(R"({"decode":{)"), std::string::npos) << written;
    EXPECT_EQ(written.find("decode_jpeg"), std::string::npos) << written;
    EXPECT_NE(written.find(R"("orientation":"exif")"), std::string::npos) << written;
    EXPECT_EQ(to_json(parse_pipeline_json(written), -1), written);
  }
  const PipelineDocument plain = parse_pipeline_json(R"({"source": {"folder": "d"}, "stages": ["read", "decode"]})");
  EXPECT_EQ(stage<spec::DecodeJpeg>(plain, 1).options.orientation, Orientation::kAsStored);
  EXPECT_NE(to_json(plain, -1).find(R"("orientation":"as_stored")"), std::string::npos);
  EXPECT_EQ(error_of(with_stages(R"(["read", {"decode": {"orientation": "upright"}}])")).find("stages[1].decode.orientation"), 0u);
}

TEST(JsonSpec, ShardFromTheLauncher) {
  // The launcher's variables for this test only (the suite itself may run under mpirun or srun).
  const char* const names[] = {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                               "PMI_RANK", "PMI_SIZE", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", "SLURM_PROCID",
                               "SLURM_STEP_NUM_TASKS"};
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  for (const char* name : names) {
    const char* value = std::getenv(name);
    saved.emplace_back(name, value ? std::optional<std::string>(value) : std::nullopt);
    unsetenv(name);
  }
  const std::string text = R"({"source": {"folder": "d"}, "shard": "launcher", "stages": ["read", "decode_jpeg", {"batch": {"size": 2}}]})";
  const PipelineDocument alone = parse_pipeline_json(text);  // no launcher: rank 0 of 1
  EXPECT_EQ(alone.spec.shard_rank, 0);
  EXPECT_EQ(alone.spec.shard_world, 1);
  setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
  const PipelineDocument launched = parse_pipeline_json(text);
  EXPECT_EQ(launched.spec.shard_rank, 2);
  EXPECT_EQ(launched.spec.shard_world, 3);
  // Written back as the numbers it resolved to.
  EXPECT_NE(to_json(launched, -1).find(R"("shard":{"rank":2,"world":3})"), std::string::npos) << to_json(launched, -1);
  EXPECT_EQ(error_of(R"({"source": {"folder": "d"}, "shard": "mpi", "stages": []})"),
            "shard: expected {\"rank\": R, \"world\": W} or \"launcher\", got \"mpi\"");
  for (const auto& [name, value] : saved) {
    if (value) {
      setenv(name.c_str(), value->c_str(), 1);
    } else {
      unsetenv(name.c_str());
    }
  }
}

// {"source": {"shards": ...}}: a pattern, an array of them, or {"path", "index", "shard_by"};
// round-trips; relative patterns resolve against a spec file's folder, before expansion.
TEST(JsonSpec, ShardsSourceInEveryFormAndItsErrors) {
  for (Pipeline p : {Pipeline::from_shards("/d/train-{000000..000146}.tar").read().decode_jpeg().batch(4),
                     Pipeline::from_shards({"/a/*.tar", "/b/x.tar"}, {.index = ShardIndex::kMemoryOnly})
                         .shuffle_files(3).read().decode_jpeg().batch(4),
                     Pipeline::from_shards("/c/*.tar", {.shard_by = ShardBy::kSamples}).read().decode_jpeg().batch(4)}) {
    const std::string text = to_json(p.spec(), {});
    const PipelineDocument doc = parse_pipeline_json(text);
    EXPECT_EQ(to_json(doc), text);
    const auto& want = std::get<spec::Shards>(p.spec().source);
    const auto& got = std::get<spec::Shards>(doc.spec.source);
    EXPECT_EQ(got.patterns, want.patterns);
    EXPECT_EQ(got.index, want.index);
    EXPECT_EQ(got.shard_by, want.shard_by);
  }
  const std::string stages = R"(, "stages": ["read", "decode_jpeg", {"batch": {"size": 2}}]})";
  auto source = [&stages](const std::string& shards) {
    return parse_pipeline_json(R"({"source": {"shards": )" + shards + "}" + stages, "/base");
  };
  EXPECT_EQ(std::get<spec::Shards>(source(R"("s-{0..3}.tar")").spec.source).patterns,
            std::vector<std::string>{"/base/s-{0..3}.tar"});
  EXPECT_EQ(std::get<spec::Shards>(source(R"(["a.tar", "/abs/*.tar"])").spec.source).patterns,
            (std::vector<std::string>{"/base/a.tar", "/abs/*.tar"}));
  const spec::Shards object = std::get<spec::Shards>(source(R"({"path": "x.tar", "index": "memory"})").spec.source);
  EXPECT_EQ(object.patterns, std::vector<std::string>{"/base/x.tar"});
  EXPECT_EQ(object.index, ShardIndex::kMemoryOnly);
  EXPECT_EQ(object.shard_by, ShardBy::kShards);  // the default: each rank reads whole shards
  EXPECT_EQ(std::get<spec::Shards>(source(R"({"path": "x.tar", "shard_by": "samples"})").spec.source).shard_by,
            ShardBy::kSamples);
  auto error = [&stages](const std::string& shards) {
    return error_of(R"({"source": {"shards": )" + shards + "}" + stages);
  };
  EXPECT_NE(error("[]").find("source.shards: expected a shard pattern"), std::string::npos) << error("[]");
  EXPECT_NE(error("7").find("source.shards: expected a shard pattern"), std::string::npos);
  EXPECT_EQ(error(R"(["a.tar", 3])"), "source.shards[1]: expected a non-empty string, got 3");
  EXPECT_EQ(error(R"({"index": "memory"})"), "source.shards.path: missing (expected a shard pattern or an array of them)");
  EXPECT_EQ(error(R"({"path": "a.tar", "index": "disk"})"),
            "source.shards.index: expected one of beside_shard, memory, got \"disk\"");
  EXPECT_EQ(error(R"({"path": "a.tar", "shard_by": "files"})"),
            "source.shards.shard_by: expected one of shards, samples, got \"files\"");
  EXPECT_EQ(error(R"({"path": "a.tar", "idx": "memory"})"),
            "source.shards: unknown key \"idx\" (known: path, index, shard_by, remote)");
}

TEST(JsonSpec, BadSpecsNameTheFieldAndWhatWasExpected) {
  EXPECT_EQ(error_of(with_stages(R"(["read", {"decode_png": {}}])")),
            "stages[1]: unknown stage \"decode_png\" (known: read, cache, decode, resize_shorter, resize, "
            "center_crop, random_resized_crop, random_crop, flip_horizontal, flip_vertical, color_jitter, grayscale, "
            "random_grayscale, random_rotation, random_affine, gaussian_blur, random_posterize, random_solarize, "
            "random_invert, random_autocontrast, random_equalize, random_adjust_sharpness, trivial_augment_wide, "
            "rand_augment, auto_augment, normalize, random_erasing, shuffle, batch, prefetch, to_device, mixup, cutmix)");
  EXPECT_EQ(error_of(with_stages(R"(["read", "decode_jpeg", {"resize_shorter": {"size": 8}},
                                     {"random_resized_crop": {"size": "big"}}])")),
            "stages[3].random_resized_crop.size: expected a positive integer, got \"big\"");
  EXPECT_EQ(error_of(R"({"stages": []})"), "source: missing (expected one of folder, list, items, shards)");
  EXPECT_EQ(error_of(R"({"source": {}, "stages": []})"),
            "source: expected exactly one of folder, list, items, shards, got {}");
  EXPECT_EQ(error_of(R"({"source": {"folder": "d"}})"),
            "stages: missing (expected an array of stages, e.g. [{\"read\": {}}, ...])");
  EXPECT_EQ(error_of(with_stages(R"(["read", "decode_jpeg", {"batch": {"size": -4}}])")),
            "stages[2].batch.size: expected a positive integer, got -4");
  EXPECT_EQ(error_of(with_stages(R"([{"center_crop": {"width": 0, "height": 3}}])")),
            "stages[0].center_crop.width: expected a positive integer, got 0");
  EXPECT_EQ(error_of(with_stages(R"([{"shuffle": {"buffer": -1}}])")),
            "stages[0].shuffle.buffer: expected a positive integer, got -1");
  EXPECT_EQ(error_of(with_stages(R"([{"random_crop": {"size": 8, "padding": -2}}])")),
            "stages[0].random_crop.padding: expected an integer from 0 to 1048576, got -2");
  EXPECT_EQ(error_of(with_stages(R"([{"decode_jpeg": {"fastdct": true}}])")),
            "stages[0].decode_jpeg: unknown key \"fastdct\" (known: color, fast_dct, fast_upsample, "
            "fast_upsample_when_shrunk, dct_scaling, roi, strict, accept_warnings, max_image_pixels, orientation)");
  EXPECT_EQ(error_of(R"({"source": {"folder": "d"}, "stages": [], "stage": []})"),
            "spec: unknown key \"stage\" (known: source, shard, shuffle_files, stages, build)");
  EXPECT_EQ(error_of(with_stages(R"([{"normalize": {"dtype": "f64"}}])")),
            "stages[0].normalize.dtype: expected one of u8, f32, f16, bf16, got \"f64\"");
  EXPECT_EQ(error_of(with_stages(R"([{"normalize": {"layout": "chw"}}])")),
            "stages[0].normalize.layout: expected one of nchw, nhwc, got \"chw\"");
  EXPECT_EQ(error_of(with_stages(R"([{"normalize": {"std": [0.2, 0]}}])")),
            "stages[0].normalize.std[1]: expected a positive number, got 0");
  // Found by json_spec_fuzzer: a value past float's range became infinity and wrote back as null.
  EXPECT_EQ(error_of(with_stages(R"([{"normalize": {"std": [0.2, 1e71]}}])")),
            "stages[0].normalize.std[1]: expected a number within float's range (|x| <= 3.4e38), got 1e+71");
  EXPECT_EQ(error_of(with_stages(R"([{"normalize": {"mean": [-1e39]}}])")),
            "stages[0].normalize.mean[0]: expected a number within float's range (|x| <= 3.4e38), got -1e+39");
  EXPECT_EQ(error_of(with_stages(R"([{"normalize": {"std": [1e-50]}}])")),
            "stages[0].normalize.std[0]: expected a positive number of at least 1.2e-38 (float's smallest normal), got 1e-50");
  EXPECT_EQ(error_of(with_stages(R"([{"to_device": {"device": "gpu0"}}])")),
            "stages[0].to_device.device: expected \"host\" or \"cuda:N\", got \"gpu0\"");
  EXPECT_EQ(error_of(with_stages(R"([{"to_device": {}}])")),
            "stages[0].to_device.device: missing (expected \"host\" or \"cuda:N\")");
  EXPECT_EQ(error_of(with_stages(R"([{"decode_jpeg": {"color": "cmyk"}}])")),
            "stages[0].decode_jpeg.color: expected one of rgb, grey, gray, got \"cmyk\"");
  EXPECT_EQ(error_of(with_stages(R"([{"flip_horizontal": {"probability": 1.5}}])")),
            "stages[0].flip_horizontal.probability: expected a number in [0, 1], got 1.5");
  EXPECT_EQ(error_of(with_stages(R"([{"random_resized_crop": {"size": 8, "scale": [0.9, 0.1]}}])")),
            "stages[0].random_resized_crop.scale: expected [min, max], two positive numbers with min <= max, got "
            "[0.9,0.1]");
  EXPECT_EQ(error_of(with_stages(R"([{"resize": {"size": 8, "width": 4}}])")),
            "stages[0].resize: give \"size\" or \"width\" and \"height\", not both");
  EXPECT_EQ(error_of(with_stages(R"([{"cache": {}}])")),
            "stages[0].cache: expected exactly one of memory, disk (e.g. {\"memory\": {}} or {\"disk\": {\"path\": "
            "...}})");
  EXPECT_EQ(error_of(with_stages(R"([{"batch": {"size": 4}, "prefetch": {"depth": 2}}])")),
            "stages[0]: expected an object with one key, the stage's name (e.g. {\"batch\": {\"size\": 64}}), got "
            "{\"batch\":{\"size\":4},\"prefetch\":{\"depth\":2}}");
  EXPECT_EQ(error_of(with_stages("[]", R"({"threads": "many"})")),
            "build.threads: expected an integer from 1 to " + std::to_string(core::max_threads()) +
                " (4 x the hardware threads, at least 1024) or \"auto\", got \"many\"");
  // Far past the bound (it crashed inside the allocator at about 2,500 threads).
  EXPECT_NE(error_of(with_stages("[]", R"({"threads": 100000})")).find("build.threads: expected an integer from 1 to"),
            std::string::npos);
  EXPECT_EQ(error_of(with_stages("[]", R"({"memory_budget": "lots"})")),
            "build.memory_budget: expected a size (a non-negative integer of bytes or a string like \"4GiB\"), got "
            "\"lots\"");
  EXPECT_EQ(error_of(with_stages("[]", R"({"on_error": "ignore"})")),
            "build.on_error: expected one of fail, skip, got \"ignore\"");
  EXPECT_EQ(error_of(with_stages("[]", R"({"seed": -1})")), "build.seed: expected a non-negative integer, got -1");
  EXPECT_EQ(error_of(R"({"source": {"items": [{"path": "a.jpg", "label": "cat"}]}, "stages": []})"),
            "source.items[0].label: expected a non-negative integer, got \"cat\"");
  EXPECT_EQ(error_of(R"({"source": {"folder": "d"}, "shard": {"rank": 2, "world": 2}, "stages": []})"),
            "shard.rank: expected an integer in [0, world - 1] = [0, 1], got 2");
  EXPECT_EQ(error_of(R"({"source": {"folder": "d"}, "stages": [)").rfind("not valid JSON: ", 0), 0u);

  // A long bad value is cut short, never inside a UTF-8 sequence.
  std::string long_value;
  for (int i = 0; i < 40; ++i) long_value += "\xC3\xA9";  // e acute
  const std::string message = error_of(with_stages(R"([{"normalize": {"dtype": ")" + long_value + R"("}}])"));
  ASSERT_GE(message.size(), 3u);
  EXPECT_EQ(message.substr(message.size() - 3), "...");
  const std::string shown = message.substr(0, message.size() - 3);
  EXPECT_EQ(std::count_if(shown.begin(), shown.end(), [](char c) { return (c & 0xC0) == 0xC0; }),
            std::count_if(shown.begin(), shown.end(), [](char c) { return (c & 0xC0) == 0x80; }));
}

TEST(JsonSpec, SpecFilePathsResolveAgainstItsFolder) {
  TempDir dir;
  std::filesystem::create_directories(dir / "specs");
  const std::string path = (dir / "specs" / "train.json").string();
  std::ofstream(path) << R"({"source": {"folder": "../images"}, "stages": [
      "read", {"cache": {"disk": {"path": "cache/train.cache"}}}, "decode_jpeg", {"batch": {"size": 2}}]})";
  const PipelineDocument doc = load_pipeline_json(path);
  EXPECT_EQ(std::get<spec::Folder>(doc.spec.source).path, (dir.path() / "images").string());
  EXPECT_EQ(std::get<DiskCache>(std::get<spec::Cache>(doc.spec.stages[1]).store).path,
            (dir.path() / "specs" / "cache" / "train.cache").string());

  std::ofstream(path) << R"({"source": {"list": "/abs/list.txt"}, "stages": [{"batch": {"size": 0}}]})";
  try {
    load_pipeline_json(path);
    ADD_FAILURE() << "a bad spec file loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(std::string(e.what()), path + ": stages[0].batch.size: expected a positive integer, got 0");
  }
  try {
    load_pipeline_json((dir / "missing.json").string());
    ADD_FAILURE() << "a missing spec file loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  }
}

TEST(JsonSpec, SpecPipelineEqualsBuilderPipeline_TrainTransform_2Threads) {
  TempDir dir;
  test::make_image_folder(dir / "images", 3, 7, 48, 40);
  const std::string spec_path = (dir / "train.json").string();
  std::ofstream(spec_path) << R"({
    "source": {"folder": "images"},
    "shuffle_files": {"seed": 11},
    "stages": ["read", {"decode_jpeg": {"fast_dct": true}},
               {"random_resized_crop": {"size": 24, "scale": [0.25, 1.0]}},
               {"flip_horizontal": {"probability": 0.5}},
               {"normalize": {"mean": [0.5, 0.4, 0.3], "std": [0.2, 0.25, 0.3], "layout": "nchw", "dtype": "f16"}},
               {"shuffle": {"buffer": 5}}, {"batch": {"size": 4}}, {"prefetch": {"depth": 2}}],
    "build": {"threads": 2, "seed": 3}
  })";
  const PipelineDocument doc = load_pipeline_json(spec_path);
  Loader from_spec = Pipeline(doc.spec).build(doc.build);

  Loader from_builder = Pipeline::from_folder((dir / "images").string())
                            .shuffle_files(11)
                            .read()
                            .decode_jpeg({.fast_dct = true})
                            .random_resized_crop(24, {.scale_min = 0.25, .scale_max = 1.0})
                            .flip_horizontal(0.5)
                            .normalize({0.5f, 0.4f, 0.3f}, {0.2f, 0.25f, 0.3f}, Layout::kNCHW, DType::kF16)
                            .shuffle(5)
                            .batch(4)
                            .prefetch(2)
                            .build({.threads = 2, .seed = 3});
  ASSERT_EQ(from_spec.samples_per_epoch(), 21);
  ASSERT_EQ(from_spec.batch_shape(), (Shape{4, 3, 24, 24}));
  for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
    EXPECT_EQ(test::epoch_checksum(from_spec, epoch), test::epoch_checksum(from_builder, epoch)) << "epoch " << epoch;
  }
}

TEST(JsonSpec, StatsAsJson) {
  Stats stats;
  stats.samples = 12;
  stats.skipped_samples.push_back({"a \"b\".jpg", "truncated"});
  const std::string text = stats_to_json(stats);
  EXPECT_NE(text.find("\"samples\":12"), std::string::npos) << text;
  EXPECT_NE(text.find(R"({"path":"a \"b\".jpg","cause":"truncated"})"), std::string::npos) << text;
}

}  // namespace
}  // namespace sluice
