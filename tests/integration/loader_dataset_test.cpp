// Loader's view of its data set (dataset_size, item_path, item_label, class_names): what the
// Python module's classes, class_to_idx and samples are made of, as torchvision's ImageFolder
// gives them. A folder source: the sorted class folders and their files in order; a shard takes
// its slice of the epoch but the data set stays whole; items given by number have no class
// names; an item outside the data set is refused, naming the range.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sluice/sluice.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

using test::TempDir;

TEST(LoaderDataset, AFolderGivesItsClassesPathsAndLabelsInOrder) {
  TempDir dir;
  const std::vector<std::filesystem::path> files = test::make_image_folder(dir.path(), 3, 4, 16, 16);
  Pipeline pipeline = Pipeline::from_folder(dir.path().string()).read().decode_jpeg().batch(2);
  pipeline.shard(1, 2);
  Loader loader = pipeline.build({.threads = 1});
  ASSERT_EQ(loader.dataset_size(), 12);
  EXPECT_EQ(loader.samples_per_epoch(), 6);  // the shard's slice; the data set stays whole
  ASSERT_EQ(loader.class_names().size(), 3U);
  for (std::int64_t i = 0; i < 12; ++i) {
    EXPECT_EQ(loader.item_path(i), files[static_cast<std::size_t>(i)].string());
    EXPECT_EQ(loader.item_label(i), i / 4);
    EXPECT_EQ(loader.class_names()[static_cast<std::size_t>(i / 4)],
              files[static_cast<std::size_t>(i)].parent_path().filename().string());
  }
  for (const std::int64_t bad : {std::int64_t{-1}, std::int64_t{12}}) {
    try {
      (void)loader.item_path(bad);
      ADD_FAILURE() << "item " << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("outside the data set of 12 items"), std::string::npos) << e.what();
    }
    EXPECT_THROW((void)loader.item_label(bad), Error);
  }
}

TEST(LoaderDataset, ItemsGivenByNumberHaveNoClassNames) {
  TempDir dir;
  const std::vector<std::filesystem::path> files = test::make_image_folder(dir.path(), 1, 3, 16, 16);
  std::vector<Item> items;
  for (std::size_t i = 0; i < files.size(); ++i) items.push_back(Item{files[i].string(), static_cast<int>(7 - i)});
  Loader loader = Pipeline::from_items(items).read().decode_jpeg().batch(1).build({.threads = 1});
  EXPECT_TRUE(loader.class_names().empty());
  ASSERT_EQ(loader.dataset_size(), 3);
  EXPECT_EQ(loader.item_label(2), 5);
  EXPECT_EQ(loader.item_path(0), files[0].string());
}

}  // namespace
}  // namespace sluice
