// The tar-shard source: shard patterns, labels across shards, the index file beside a
// shard (written only where allowed, never over a file that is not ours, rebuilt when stale, and
// never trusted to serve other bytes), and reading members through ItemReader.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "shard_support.hpp"
#include "sluice/core/error.hpp"
#include "stages/source/read_file.hpp"
#include "stages/tar/tar_index.hpp"
#include "stages/tar/tar_source.hpp"
#include "test_support.hpp"

namespace sluice::stages {
namespace {

namespace fs = std::filesystem;
using test::TarMember;
using test::text_bytes;

std::vector<std::uint8_t> image(int n, int seed) {
  std::vector<std::uint8_t> b(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) b[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i * 13 + seed);
  return b;
}

Error error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected a sluice::Error";
  return Error(ErrorCode::kInternal, "none");
}

Dataset load(const std::vector<std::string>& patterns, ShardIndex index = ShardIndex::kBesideShard) {
  return load_dataset(spec::Shards{patterns, index});
}

TEST(ShardPatterns, BraceRangesListsAndGlobs) {
  test::TempDir dir;
  for (const char* name : {"a-000.tar", "a-001.tar", "a-002.tar", "b-x.tar", "b-y.tar", "c.tar"}) {
    test::write_bytes(dir / name, {});
  }
  fs::create_directories(dir / "d-folder.tar");
  const std::string d = dir.path().string() + "/";
  EXPECT_EQ(expand_shard_patterns({d + "a-{000..002}.tar"}),
            (std::vector<std::string>{d + "a-000.tar", d + "a-001.tar", d + "a-002.tar"}));
  EXPECT_EQ(expand_shard_patterns({d + "a-{002..000}.tar"}).front(), d + "a-002.tar");  // descending
  EXPECT_EQ(expand_shard_patterns({d + "x{8..11}"}), (std::vector<std::string>{d + "x8", d + "x9", d + "x10", d + "x11"}));
  EXPECT_EQ(expand_shard_patterns({d + "x{08..10}"}), (std::vector<std::string>{d + "x08", d + "x09", d + "x10"}));
  EXPECT_EQ(expand_shard_patterns({d + "{b-{x,y},c}.tar"}),
            (std::vector<std::string>{d + "b-x.tar", d + "b-y.tar", d + "c.tar"}));
  EXPECT_EQ(expand_shard_patterns({d + "{literal}"}), (std::vector<std::string>{d + "{literal}"}));
  // Globs: sorted, regular files only (the folder named *.tar is not a shard).
  EXPECT_EQ(expand_shard_patterns({d + "*.tar"}),
            (std::vector<std::string>{d + "a-000.tar", d + "a-001.tar", d + "a-002.tar", d + "b-x.tar", d + "b-y.tar",
                                      d + "c.tar"}));
  EXPECT_EQ(expand_shard_patterns({d + "b-?.tar", d + "c.tar"}).size(), 3u);
  EXPECT_EQ(error_of([&] { expand_shard_patterns({d + "none-*.tar"}); }).code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(std::string(error_of([&] { expand_shard_patterns({d + "c.tar", d + "{c,b-x}.tar"}); }).what()).find("twice"),
            std::string::npos);
  EXPECT_NE(std::string(error_of([&] { expand_shard_patterns({"s-{0..9999999}.tar"}); }).what()).find("more than"),
            std::string::npos);
  EXPECT_NE(std::string(error_of([&] { expand_shard_patterns({"{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}"
                                                              "{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}"}); })
                            .what())
                .find("more than"),
            std::string::npos);
  EXPECT_THROW(expand_shard_patterns({}), Error);
}

TEST(ShardSource, SamplesInShardOrderWithTheirLabelsAndBytes) {
  test::TempDir dir;
  test::write_bytes(dir / "s-0.tar", test::make_tar({{"a.jpg", image(100, 1)}, {"a.cls", text_bytes("4")},
                                                    {"b.jpg", image(200, 2)}, {"b.cls", text_bytes("1")}}).bytes);
  test::write_bytes(dir / "s-1.tar", test::make_tar({{"c.jpg", image(300, 3)}, {"c.cls", text_bytes("0")}}).bytes);
  const Dataset d = load({(dir / "s-{0..1}.tar").string()});
  ASSERT_EQ(d.items.size(), 3);
  EXPECT_EQ(d.items.kind(), ItemTable::Kind::kMember);
  EXPECT_EQ(d.items.path(2), (dir / "s-1.tar").string() + ":c.jpg");
  EXPECT_EQ(d.items.label(0), 4);
  EXPECT_EQ(d.items.label(2), 0);
  EXPECT_TRUE(d.class_names.empty());
  EXPECT_EQ(d.items.shard_starts(), (std::vector<std::int64_t>{0, 2, 3}));
  ItemReader reader;
  AlignedBuffer buffer;
  for (int i = 0; i < 3; ++i) {
    const auto bytes = reader.read(d.items, i, buffer, 1 << 20);
    EXPECT_EQ(std::vector<std::uint8_t>(bytes.begin(), bytes.end()), image(100 * (i + 1), i + 1));
    EXPECT_EQ(reader.size(d.items, i), static_cast<std::uint64_t>(100 * (i + 1)));
  }
  EXPECT_EQ(error_of([&] { reader.read(d.items, 2, buffer, 299); }).code(), ErrorCode::kTooLarge);
}

TEST(ShardSource, ClassNamesMapToTheirSortedIndexAcrossShards) {
  test::TempDir dir;
  test::write_bytes(dir / "0.tar", test::make_tar({{"a.jpg", image(5, 1)}, {"a.class", text_bytes("zebra")}}).bytes);
  test::write_bytes(dir / "1.tar", test::make_tar({{"b.jpg", image(5, 1)}, {"b.class", text_bytes("ant")},
                                                  {"c.jpg", image(5, 1)}, {"c.class", text_bytes("moth")}}).bytes);
  const Dataset d = load({(dir / "*.tar").string()});
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"ant", "moth", "zebra"}));
  EXPECT_EQ(d.items.label(0), 2);
  EXPECT_EQ(d.items.label(1), 0);
  EXPECT_EQ(d.items.label(2), 1);
}

TEST(ShardSource, LabelKindsMustNotMixAndUnlabelledAmongLabelledAreDamaged) {
  test::TempDir dir;
  test::write_bytes(dir / "mixed.tar", test::make_tar({{"a.jpg", image(5, 1)}, {"a.cls", text_bytes("1")},
                                                      {"b.jpg", image(5, 1)}, {"b.class", text_bytes("ant")}}).bytes);
  EXPECT_NE(std::string(error_of([&] { load({(dir / "mixed.tar").string()}); }).what()).find("use one kind"),
            std::string::npos);
  test::write_bytes(dir / "some.tar", test::make_tar({{"a.jpg", image(5, 1)}, {"a.cls", text_bytes("1")},
                                                     {"b.jpg", image(5, 1)}}).bytes);
  const Dataset some = load({(dir / "some.tar").string()});
  ASSERT_NE(some.items.locate(1).damage, nullptr);
  EXPECT_NE(some.items.locate(1).damage->find("no label member (b.cls"), std::string::npos);
  test::write_bytes(dir / "none.tar", test::make_tar({{"a.jpg", image(5, 1)}, {"b.jpg", image(5, 1)}}).bytes);
  const Dataset none = load({(dir / "none.tar").string()});
  EXPECT_EQ(none.items.damaged(), 0);
  EXPECT_EQ(none.items.label(1), 0);
}

TEST(ShardSource, MissingSpecialAndEmptyShardsFailTheBuild) {
  test::TempDir dir;
  EXPECT_EQ(error_of([&] { load({(dir / "missing.tar").string()}); }).code(), ErrorCode::kNotFound);
  ASSERT_EQ(::mkfifo((dir / "fifo.tar").c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { load({(dir / "fifo.tar").string()}); }).code(), ErrorCode::kInvalidArgument);
  test::write_bytes(dir / "empty.tar", test::make_tar({}).bytes);
  EXPECT_NE(std::string(error_of([&] { load({(dir / "empty.tar").string()}); }).what()).find("no samples"),
            std::string::npos);
}

// ---- the index file beside a shard ----------------------------------------------------------

struct IndexedDir {
  test::TempDir dir;
  fs::path shard = dir / "s.tar";
  fs::path index = dir / "s.tar.sluice-idx";
  IndexedDir() {
    test::write_bytes(shard, test::make_tar({{"a.jpg", image(700, 1)}, {"a.cls", text_bytes("2")},
                                             {"b.jpg", image(900, 2)}, {"b.cls", text_bytes("3")}}).bytes);
  }
};

TEST(ShardIndexFiles, WrittenBesideAWritableShardAndReadBack) {
  IndexedDir d;
  const Dataset first = load({d.shard.string()});
  ASSERT_TRUE(fs::is_regular_file(d.index));
  EXPECT_TRUE(is_shard_index(test::read_bytes(d.index)));
  for (const auto& entry : fs::directory_iterator(d.dir.path())) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << "temporary left behind";
  }
  // Read back: a second load gives the same table without scanning (the shard's headers are
  // zeroed in a copy with the same size and mtime to prove the index file is what is used).
  const Dataset second = load({d.shard.string()});
  ASSERT_EQ(second.items.size(), 2);
  EXPECT_EQ(second.items.fingerprint(), first.items.fingerprint());
  std::vector<std::uint8_t> bytes = test::read_bytes(d.shard);
  struct stat before {};
  ASSERT_EQ(::stat(d.shard.c_str(), &before), 0);
  std::fill(bytes.begin(), bytes.begin() + 512, 0);
  test::write_bytes(d.shard, bytes);
  const timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, d.shard.c_str(), times, 0), 0);
  const Dataset third = load({d.shard.string()});
  EXPECT_EQ(third.items.size(), 2);  // the scan would have found no first header
  // ...and the read, which checks the member's own header, refuses item 0 rather than serve it.
  ItemReader reader;
  AlignedBuffer buffer;
  const Error e = error_of([&] { reader.read(third.items, 0, buffer, 1 << 20); });
  EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
  EXPECT_NE(std::string(e.what()).find("does not match the shard's index"), std::string::npos) << e.what();
  EXPECT_EQ(e.path(), d.shard.string() + ":a.jpg");
}

TEST(ShardIndexFiles, StaleIndexIsRebuiltAndAChangedShardFailsItsReads) {
  IndexedDir d;
  const Dataset first = load({d.shard.string()});
  const auto old_index = test::read_bytes(d.index);
  test::write_bytes(d.shard, test::make_tar({{"z.jpg", image(50, 9)}, {"z.cls", text_bytes("0")}}).bytes);
  const Dataset second = load({d.shard.string()});
  ASSERT_EQ(second.items.size(), 1);
  EXPECT_NE(test::read_bytes(d.index), old_index);  // ours, stale: replaced
  // The first table still names the old layout: its reads fail, naming the shard.
  ItemReader reader;
  AlignedBuffer buffer;
  const Error e = error_of([&] { reader.read(first.items, 1, buffer, 1 << 20); });
  EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
  EXPECT_NE(std::string(e.what()).find("changed since it was indexed"), std::string::npos) << e.what();
}

TEST(ShardIndexFiles, NeverReplacesAFileThatIsNotOurs) {
  IndexedDir d;
  const std::vector<std::uint8_t> theirs = text_bytes("someone else's index, in their format\n");
  test::write_bytes(d.index, theirs);
  const Dataset loaded = load({d.shard.string()});
  EXPECT_EQ(loaded.items.size(), 2);
  EXPECT_EQ(test::read_bytes(d.index), theirs);
  // A symlink of that name is neither followed nor replaced.
  fs::remove(d.index);
  const fs::path target = d.dir / "target.bin";
  test::write_bytes(target, theirs);
  fs::create_symlink(target, d.index);
  EXPECT_EQ(load({d.shard.string()}).items.size(), 2);
  EXPECT_TRUE(fs::is_symlink(d.index));
  EXPECT_EQ(test::read_bytes(target), theirs);
}

TEST(ShardIndexFiles, NothingWrittenBesideReadOnlyShardsOrInMemoryMode) {
  IndexedDir d;
  fs::permissions(d.shard, fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                  fs::perm_options::remove);
  EXPECT_EQ(load({d.shard.string()}).items.size(), 2);
  EXPECT_FALSE(fs::exists(d.index)) << "written beside a read-only shard";
  fs::permissions(d.shard, fs::perms::owner_write, fs::perm_options::add);
  fs::permissions(d.dir.path(), fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                  fs::perm_options::remove);
  EXPECT_EQ(load({d.shard.string()}).items.size(), 2);
  fs::permissions(d.dir.path(), fs::perms::owner_write, fs::perm_options::add);
  EXPECT_FALSE(fs::exists(d.index)) << "written into a read-only folder";
  EXPECT_EQ(load({d.shard.string()}, ShardIndex::kMemoryOnly).items.size(), 2);
  EXPECT_FALSE(fs::exists(d.index));
}

TEST(ShardIndexFiles, ACraftedIndexCannotServeOtherBytes) {
  IndexedDir d;
  const Dataset honest = load({d.shard.string()});
  struct stat st {};
  ASSERT_EQ(::stat(d.shard.c_str(), &st), 0);
  // A valid index of this shard (right size, mtime, checksums) that points a.jpg at b.jpg's data
  // and gives it b's size: only the member's own header can tell.
  IndexedShard lie{static_cast<std::uint64_t>(st.st_size),
                   static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec, {}};
  ShardSample a;
  a.name = "a.jpg";
  a.offset = honest.items.locate(1).offset;
  a.size = 700;
  a.label_kind = LabelKind::kNumber;
  lie.samples.push_back(a);
  test::write_bytes(d.index, encode_shard_index(lie));
  const Dataset crafted = load({d.shard.string()});
  ASSERT_EQ(crafted.items.size(), 1);
  ItemReader reader;
  AlignedBuffer buffer;
  const Error e = error_of([&] { reader.read(crafted.items, 0, buffer, 1 << 20); });
  EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
}

}  // namespace
}  // namespace sluice::stages
