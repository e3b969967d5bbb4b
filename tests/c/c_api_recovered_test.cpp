// The C API's statistics report files decoded in spite of libjpeg warnings ("recovered") with
// their paths and warnings, as Stats does, and keep a path that is not UTF-8 (escaped as \udcXX,
// docs/stats.md); sluice_loader_info describes the batch as the Loader's outputs() do.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "jpeg_edits.hpp"
#include "pipeline_support.hpp"
#include "sluice/c/sluice.h"
#include "sluice/pipeline/json_spec.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

TEST(CApiStats, RecoveredFilesAreCountedWithPathAndWarning) {
  test::TempDir dir;
  std::vector<Item> items = test::make_coded_items(dir.path(), 12);
  const std::string damaged = items[4].path;
  test::write_bytes(damaged, test::with_junk_before_marker(test::read_bytes(damaged), 0xDB, 6));
  const std::string spec =
      to_json(Pipeline::from_items(items).read().decode_jpeg().batch(4).spec(), {.threads = 2});
  sluice_loader_t* loader = nullptr;
  ASSERT_EQ(sluice_loader_create_from_json(spec.c_str(), nullptr, &loader), SLUICE_OK) << sluice_last_error();
  ASSERT_EQ(sluice_loader_start_epoch(loader, 0), SLUICE_OK);
  sluice_batch_t* batch = nullptr;
  int batches = 0;
  while (sluice_loader_next(loader, &batch) == SLUICE_OK) {
    sluice_batch_release(batch);
    ++batches;
  }
  EXPECT_EQ(batches, 3);
  const char* text = nullptr;
  ASSERT_EQ(sluice_loader_stats_json(loader, &text), SLUICE_OK);
  const nlohmann::json stats = nlohmann::json::parse(text);
  EXPECT_EQ(stats["recovered"], 1);
  ASSERT_EQ(stats["recovered_samples"].size(), 1u);
  EXPECT_EQ(stats["recovered_samples"][0]["path"], damaged);
  EXPECT_EQ(stats["recovered_samples"][0]["warning"], "Corrupt JPEG data: 6 extraneous bytes before marker 0xdb");
  EXPECT_EQ(stats["skipped"], 0);
  sluice_loader_destroy(loader);
}

TEST(CApiStats, APathThatIsNotUtf8IsEscapedInTheStats) {
  test::TempDir dir;
  test::make_coded_items(dir / "good", 6);
  const std::vector<Item> bad_class = test::make_coded_items(dir / "bad\xff", 2);
  std::vector<std::uint8_t> bytes = test::read_bytes(bad_class[0].path);
  bytes.resize(bytes.size() / 2);
  test::write_bytes(dir / "bad\xff" / "bad\xff.jpg", bytes);
  PipelineDocument doc{Pipeline::from_folder(dir.path().string()).read().decode_jpeg().batch(3).spec(),
                       {.threads = 2, .on_error = OnError::kSkip}};
  const std::string spec = to_json(doc);
  sluice_loader_t* loader = nullptr;
  ASSERT_EQ(sluice_loader_create_from_json(spec.c_str(), nullptr, &loader), SLUICE_OK) << sluice_last_error();
  ASSERT_EQ(sluice_loader_start_epoch(loader, 0), SLUICE_OK);
  sluice_batch_t* batch = nullptr;
  while (sluice_loader_next(loader, &batch) == SLUICE_OK) sluice_batch_release(batch);
  const char* text = nullptr;
  ASSERT_EQ(sluice_loader_stats_json(loader, &text), SLUICE_OK) << sluice_last_error();  // -10 before
  const std::string stats(text);
  const std::string escaped = dir.path().string() + R"(/bad\udcff/bad\udcff.jpg)";
  EXPECT_NE(stats.find("{\"path\":\"" + escaped + "\","), std::string::npos) << stats;
  sluice_loader_destroy(loader);
}

TEST(CApiInfo, DescribesTheBatchAsTheLoadersOutputs) {
  test::TempDir dir;
  const std::vector<Item> items = test::make_coded_items(dir.path(), 10);
  const Pipeline pipeline = Pipeline::from_items(items).read().decode_jpeg().center_crop(12).normalize(
      {.mean = {0.5f, 0.5f, 0.5f}, .std = {0.25f, 0.25f, 0.25f}, .layout = Layout::kNCHW, .dtype = DType::kF16}).batch(4);
  const std::string spec = to_json(pipeline.spec(), {.threads = 1});
  sluice_loader_t* loader = nullptr;
  ASSERT_EQ(sluice_loader_create_from_json(spec.c_str(), nullptr, &loader), SLUICE_OK) << sluice_last_error();
  sluice_loader_info_t info = SLUICE_LOADER_INFO_INIT;
  ASSERT_EQ(sluice_loader_info(loader, &info), SLUICE_OK);
  Loader reference = pipeline.build({.threads = 1});
  const std::vector<OutputDescription> outputs = reference.outputs();
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[0].name, "data");
  EXPECT_EQ(outputs[0].shape, (Shape{4, 3, 12, 12}));
  EXPECT_EQ(outputs[0].dtype, DType::kF16);
  EXPECT_EQ(outputs[0].layout, "NCHW");
  EXPECT_EQ(outputs[0].device, host());
  EXPECT_EQ(outputs[1].name, "labels");
  EXPECT_EQ(outputs[1].shape, (Shape{4}));
  EXPECT_EQ(outputs[1].dtype, DType::kI32);
  EXPECT_EQ(outputs[1].layout, "N");
  EXPECT_EQ(reference.batch_shape(), outputs[0].shape);
  EXPECT_EQ(reference.dtype(), outputs[0].dtype);
  ASSERT_EQ(info.ndim, 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(info.shape[i], outputs[0].shape[i]) << i;
  EXPECT_EQ(info.dtype.code, kDLFloat);
  EXPECT_EQ(info.dtype.bits, 16);
  EXPECT_EQ(info.device.device_type, kDLCPU);
  sluice_loader_destroy(loader);
}

}  // namespace
}  // namespace sluice
