// The C API's statistics report files decoded in spite of libjpeg warnings ("recovered")
// with their paths and warnings, as Stats does.
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

}  // namespace
}  // namespace sluice
