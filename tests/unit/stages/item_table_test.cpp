// ItemTable: paths come back byte for byte whatever the folder split, names cross the
// arena's chunks, labels and runs, tar members with damage, the bytes it accounts (and that they
// stay near the names' own size), and the fingerprint the loader state had with Item vectors.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/rng.hpp"
#include "stages/source/item_table.hpp"
#include "stages/source/source.hpp"

namespace sluice::stages {
namespace {

// The loader state's fingerprint over a vector of Items, as loader.cpp computed it before the
// table: the table must give the same value.
std::uint64_t old_fingerprint(const std::vector<Item>& items) {
  std::uint64_t h = derive_key(items.size(), 0x7374617465);
  for (const Item& item : items) {
    for (const char c : item.path) h = h * 1099511628211ull ^ static_cast<unsigned char>(c);
    h = derive_key(h, static_cast<std::uint64_t>(item.label));
  }
  return h;
}

TEST(ItemTable, PathsComeBackExactlyWhateverTheirFolders) {
  const std::vector<Item> items = {{"a.jpg", 0},       {"/x.jpg", 1},          {"dir/b.jpg", 1},
                                   {"dir/c.jpg", 1},   {"dir/sub/d.jpg", 2},  {"dir/e.jpg", 2},
                                   {"../up/f.jpg", 3}, {"/abs/dir/g.JPEG", 3}, {"dir/", 4}};
  ItemTable table;
  for (const Item& item : items) table.add_path(item.path, item.label);
  table.finish();
  ASSERT_EQ(table.size(), static_cast<std::int64_t>(items.size()));
  EXPECT_EQ(table.kind(), ItemTable::Kind::kFile);
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto at = table.locate(static_cast<std::int64_t>(i));
    EXPECT_EQ(table.path(static_cast<std::int64_t>(i)), items[i].path);
    EXPECT_EQ(std::string(at.folder) + std::string(at.name), items[i].path);
    EXPECT_EQ(table.label(static_cast<std::int64_t>(i)), items[i].label);
  }
  EXPECT_EQ(table.locate(2).folder, "dir/");
  EXPECT_EQ(table.locate(2).name, "b.jpg");
  EXPECT_EQ(table.fingerprint(), old_fingerprint(items));
}

TEST(ItemTable, ManyNamesCrossChunksAndStayCompact) {
  // 200,000 ImageNet-style names: 4 MB of names, 60 name chunks.
  ItemTable table;
  std::vector<Item> items;
  for (int c = 0; c < 50; ++c) {
    char folder[32];
    std::snprintf(folder, sizeof folder, "n%08d", 1440764 + c);
    const std::int32_t id = table.add_folder(std::string("/data/train/") + folder + "/");
    for (int i = 0; i < 4000; ++i) {
      char name[48];
      std::snprintf(name, sizeof name, "%s_%d.JPEG", folder, 10000 + i * (c % 7 + 1));
      table.add_file(id, name, c);
      items.push_back({std::string("/data/train/") + folder + "/" + name, c});
    }
  }
  table.finish();
  ASSERT_EQ(table.size(), 200000);
  for (std::int64_t i = 0; i < table.size(); i += 997) ASSERT_EQ(table.path(i), items[static_cast<std::size_t>(i)].path) << i;
  ASSERT_EQ(table.path(table.size() - 1), items.back().path);
  EXPECT_EQ(table.label(123456), 30);
  EXPECT_EQ(table.fingerprint(), old_fingerprint(items));
  // ~20 bytes of name, a 4-byte offset, and chunk slack: the design's bound is 40 a file.
  const double per_item = static_cast<double>(table.bytes()) / static_cast<double>(table.size());
  EXPECT_LT(per_item, 26.0);
  EXPECT_GT(per_item, 24.0);  // it does count the names and offsets
}

TEST(ItemTable, LabelsAndRunsForListsThatInterleaveFolders) {
  ItemTable table;
  std::vector<Item> items;
  for (int i = 0; i < 1000; ++i) {
    char path[32];
    std::snprintf(path, sizeof path, "f%d/%d.jpg", i % 3, i);
    items.push_back({path, i % 5});
  }
  for (const Item& item : items) table.add_path(item.path, item.label);
  table.finish();
  for (std::int64_t i = 0; i < table.size(); ++i) {
    ASSERT_EQ(table.path(i), items[static_cast<std::size_t>(i)].path);
    ASSERT_EQ(table.label(i), items[static_cast<std::size_t>(i)].label);
  }
}

TEST(ItemTable, MembersKeepOffsetsSizesDamageAndShardStarts) {
  ItemTable table;
  const std::int32_t a = table.add_shard({"/s/a.tar", 10240, 5});
  const std::int32_t b = table.add_shard({"/s/b.tar", 4096, 6});
  table.add_member(a, "k0.jpg", 512, 100, 3);
  table.add_member(a, "k1.jpg", 1536, 200, 3, ItemTable::SizeField::kOverridden);
  table.add_damaged_member(a, "k2.jpg", 2560, "cut: it ends early");
  table.add_member(b, "k3.jpg", 512, 7, 4);
  table.add_member(b, "k4.jpg", 1024, 8, -1);
  table.mark_damaged(4, "no label");
  table.relabel({}, 0);
  table.finish();
  EXPECT_EQ(table.kind(), ItemTable::Kind::kMember);
  EXPECT_EQ(table.path(1), "/s/a.tar:k1.jpg");
  const auto k1 = table.locate(1);
  EXPECT_EQ(k1.shard, a);
  EXPECT_EQ(k1.offset, 1536u);
  EXPECT_EQ(k1.size, 200u);
  EXPECT_FALSE(k1.size_in_header);
  EXPECT_TRUE(table.locate(0).size_in_header);
  ASSERT_NE(table.locate(2).damage, nullptr);
  EXPECT_EQ(*table.locate(2).damage, "cut: it ends early");
  ASSERT_NE(table.locate(4).damage, nullptr);
  EXPECT_EQ(*table.locate(4).damage, "no label");
  EXPECT_EQ(table.locate(3).damage, nullptr);
  EXPECT_EQ(table.label(3), 4);
  EXPECT_EQ(table.label(4), 0);  // relabel gave the unlabelled 0
  EXPECT_EQ(table.damaged(), 2);
  EXPECT_EQ(table.shard_starts(), (std::vector<std::int64_t>{0, 3, 5}));
  EXPECT_EQ(ItemTable{}.shard_starts(), std::vector<std::int64_t>{});
}

TEST(ItemTable, ClassNamesAreRelabelledToTheirSortedRank) {
  ItemTable table;
  const std::int32_t s = table.add_shard({"x.tar", 0, 0});
  table.add_member(s, "a.jpg", 512, 1, 0);  // provisional ids in order of appearance
  table.add_member(s, "b.jpg", 1024, 1, 1);
  table.add_member(s, "c.jpg", 1536, 1, 0);
  table.relabel({1, 0}, 0);
  EXPECT_EQ(table.label(0), 1);
  EXPECT_EQ(table.label(1), 0);
  EXPECT_EQ(table.label(2), 1);
}

TEST(ItemTable, FilesAndMembersDoNotMixAndHugeMembersAreDamaged) {
  ItemTable table;
  table.add_path("a.jpg", 0);
  const std::int32_t s = table.add_shard({"x.tar", 0, 0});
  EXPECT_THROW(table.add_member(s, "b.jpg", 512, 1, 0), Error);
  ItemTable members;
  const std::int32_t t = members.add_shard({"x.tar", 0, 0});
  members.add_member(t, "big.jpg", 512, std::uint64_t{5} << 30, 0);
  ASSERT_NE(members.locate(0).damage, nullptr);
  EXPECT_NE(members.locate(0).damage->find("larger than"), std::string::npos);
  EXPECT_THROW(members.add_member(t, "odd.jpg", 100, 1, 0), Error);  // tar data is block-aligned
}

TEST(ItemTable, LoadedSourcesGiveTheFingerprintOfTheirItems) {
  const std::vector<Item> items = {{"p/q/1.jpg", 2}, {"p/q/2.jpg", 0}, {"r/3.jpg", 7}};
  const Dataset d = load_dataset(spec::Items{items});
  EXPECT_EQ(d.items.fingerprint(), old_fingerprint(items));
  EXPECT_GT(d.items.bytes(), 0u);
}

}  // namespace
}  // namespace sluice::stages
