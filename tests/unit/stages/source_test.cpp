// Sources and the read kernel: folder labels follow sorted class names, list files resolve
// relative paths and report bad lines, reads map OS errors to codes that name the path.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <functional>

#include "sluice/core/error.hpp"
#include "stages/source/read_file.hpp"
#include "stages/source/source.hpp"
#include "test_support.hpp"

namespace sluice::stages {
namespace {

using test::TempDir;

ErrorCode code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "no error";
  return ErrorCode::kInternal;
}

TEST(Source, FolderLabelsAreSortedClassIndices) {
  TempDir dir;
  test::write_bytes(dir / "zebra/1.jpg", {1});
  test::write_bytes(dir / "apple/b.JPEG", {1});
  test::write_bytes(dir / "apple/a.jpg", {1});
  test::write_bytes(dir / "apple/notes.txt", {1});
  test::write_bytes(dir / "apple/.hidden.jpg", {1});
  test::write_bytes(dir / "mango/deep/x.jpg", {1});
  const Dataset d = load_dataset(spec::Folder{dir.path().string()});
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"apple", "mango", "zebra"}));
  ASSERT_EQ(d.items.size(), 4);
  EXPECT_EQ(d.items.path(0), (dir / "apple/a.jpg").string());
  EXPECT_EQ(d.items.label(0), 0);
  EXPECT_EQ(d.items.path(1), (dir / "apple/b.JPEG").string());
  EXPECT_EQ(d.items.path(2), (dir / "mango/deep/x.jpg").string());
  EXPECT_EQ(d.items.label(2), 1);
  EXPECT_EQ(d.items.label(3), 2);
}

TEST(Source, FlatFolderIsOneClass) {
  SLUICE_REQUIRE_DATASET(dir, "wallpaper-crops");
  const Dataset d = load_dataset(spec::Folder{dir.string()});
  EXPECT_EQ(d.items.size(), 1000);
  EXPECT_EQ(d.class_names.size(), 1u);
  for (std::int64_t i = 0; i < d.items.size(); ++i) ASSERT_EQ(d.items.label(i), 0);
}

TEST(Source, RealFolderHasTenClasses) {
  SLUICE_REQUIRE_DATASET(dir, "cifar10/test");
  const Dataset d = load_dataset(spec::Folder{dir.string()});
  EXPECT_EQ(d.items.size(), 10000);
  EXPECT_EQ(d.class_names.front(), "airplane");
  EXPECT_EQ(d.items.label(d.items.size() - 1), 9);
}

TEST(Source, EmptyOrMissingFolderFailsWithAMessage) {
  TempDir dir;
  std::filesystem::create_directories(dir / "cls");
  EXPECT_EQ(code_of([&] { load_dataset(spec::Folder{dir.path().string()}); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { load_dataset(spec::Folder{(dir / "missing").string()}); }), ErrorCode::kNotFound);
}

TEST(Source, ListFileResolvesRelativePathsAndSkipsComments) {
  TempDir dir;
  const std::string inside = (dir / "abs/b.jpg").string();  // an absolute entry inside the folder
  const std::string text = "# a comment\n\nimgs/a.jpg\t3\n" + inside + "\t0\r\n";
  test::write_bytes(dir / "list.txt", {text.begin(), text.end()});
  const Dataset d = load_dataset(spec::ListFile{(dir / "list.txt").string()});
  ASSERT_EQ(d.items.size(), 2);
  EXPECT_EQ(d.items.path(0), (dir / "imgs/a.jpg").string());
  EXPECT_EQ(d.items.label(0), 3);
  EXPECT_EQ(d.items.path(1), inside);
}

// One rule for the three ways out of the list's folder: "..", an absolute path elsewhere, a
// symlink whose target is elsewhere (absolute entries and symlinks used to be read).
TEST(Source, ListFileEntriesLeavingTheFolderByAnyWayAreRefusedUnlessAllowed) {
  TempDir dir;
  test::write_bytes(dir / "outside.jpg", {1});
  std::filesystem::create_directories(dir / "lists");
  std::filesystem::create_symlink(dir / "outside.jpg", dir / "lists/link.jpg");
  for (const std::string& entry : {(dir / "outside.jpg").string(), std::string("link.jpg"), std::string("/abs/b.jpg")}) {
    const std::string text = "ok.jpg\t0\n" + entry + "\t1\n";
    test::write_bytes(dir / "lists/list.txt", {text.begin(), text.end()});
    try {
      load_dataset(spec::ListFile{(dir / "lists/list.txt").string()});
      FAIL() << entry;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("list.txt:2"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("allow_outside_root"), std::string::npos) << e.what();
    }
    EXPECT_EQ(load_dataset(spec::ListFile{(dir / "lists/list.txt").string(), true}).items.size(), 2);
  }
}

TEST(Source, ListFileEntriesMayNotClimbOutOfTheListsFolderUnlessAllowed) {
  TempDir dir;
  for (const std::string entry : {"../secret.jpg", "a/../../secret.jpg", "./../x/y.jpg"}) {
    const std::string text = "ok.jpg\t0\n" + entry + "\t1\n";
    test::write_bytes(dir / "lists/list.txt", {text.begin(), text.end()});
    try {
      load_dataset(spec::ListFile{(dir / "lists/list.txt").string()});
      FAIL() << entry;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("list.txt:2"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("leaves the list's folder"), std::string::npos);
    }
    const Dataset d = load_dataset(spec::ListFile{(dir / "lists/list.txt").string(), true});
    EXPECT_EQ(d.items.size(), 2);
  }
  // Staying inside after a detour is fine.
  const std::string text = "a/../ok.jpg\t0\n";
  test::write_bytes(dir / "lists/list.txt", {text.begin(), text.end()});
  EXPECT_EQ(load_dataset(spec::ListFile{(dir / "lists/list.txt").string()}).items.size(), 1);
}

TEST(Source, ListFileBadLinesNameTheLine) {
  TempDir dir;
  for (const std::string text : {"a.jpg 3\n", "a.jpg\tthree\n", "a.jpg\t-1\n"}) {
    test::write_bytes(dir / "list.txt", {text.begin(), text.end()});
    try {
      load_dataset(spec::ListFile{(dir / "list.txt").string()});
      FAIL() << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("list.txt:1"), std::string::npos) << e.what();
    }
  }
}

TEST(ReadFile, ReadsWholeFilesAndReusesTheBuffer) {
  TempDir dir;
  std::vector<std::uint8_t> data(100000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 7);
  test::write_bytes(dir / "f.bin", data);
  AlignedBuffer buffer;
  ASSERT_EQ(read_file((dir / "f.bin").string(), buffer, 1 << 20), data.size());
  EXPECT_EQ(std::memcmp(buffer.data(), data.data(), data.size()), 0);
  const auto* p = buffer.data();
  read_file((dir / "f.bin").string(), buffer, 1 << 20);
  EXPECT_EQ(buffer.data(), p);
}

TEST(ReadFile, GrowsForLargerFilesAndHandlesAFileExactlyFillingTheBuffer) {
  TempDir dir;
  AlignedBuffer buffer;
  std::uint32_t seed = 1;
  const auto write = [&](const char* name, std::size_t n) {
    std::vector<std::uint8_t> data(n);
    for (auto& b : data) b = static_cast<std::uint8_t>((seed = seed * 1664525u + 1013904223u) >> 24);
    test::write_bytes(dir / name, data);
    return data;
  };
  const auto small = write("small", 1000);
  const auto large = write("large", 50000);
  ASSERT_EQ(read_file((dir / "small").string(), buffer, 1 << 20), small.size());
  ASSERT_EQ(read_file((dir / "large").string(), buffer, 1 << 20), large.size());
  EXPECT_EQ(std::memcmp(buffer.data(), large.data(), large.size()), 0);
  const auto exact = write("exact", buffer.capacity());  // fills the buffer to the last byte
  ASSERT_EQ(read_file((dir / "exact").string(), buffer, 1 << 30), exact.size());
  EXPECT_EQ(std::memcmp(buffer.data(), exact.data(), exact.size()), 0);
  ASSERT_EQ(read_file((dir / "small").string(), buffer, 1 << 20), small.size());
  EXPECT_EQ(std::memcmp(buffer.data(), small.data(), small.size()), 0);
  // Over the limit even when the buffer is already big enough to hold it.
  EXPECT_THROW(read_file((dir / "large").string(), buffer, 40000), Error);
}

TEST(ReadFile, ErrorsCarryCodesAndPaths) {
  TempDir dir;
  test::write_bytes(dir / "empty.jpg", {});
  test::write_bytes(dir / "big.jpg", std::vector<std::uint8_t>(5000, 1));
  AlignedBuffer buffer;
  EXPECT_EQ(code_of([&] { read_file((dir / "none.jpg").string(), buffer, 1 << 20); }), ErrorCode::kNotFound);
  EXPECT_EQ(code_of([&] { read_file((dir / "empty.jpg").string(), buffer, 1 << 20); }), ErrorCode::kCorruptData);
  EXPECT_EQ(code_of([&] { read_file((dir / "big.jpg").string(), buffer, 4096); }), ErrorCode::kTooLarge);
  EXPECT_EQ(code_of([&] { read_file(dir.path().string(), buffer, 4096); }), ErrorCode::kIo);
  try {
    read_file((dir / "none.jpg").string(), buffer, 1 << 20);
  } catch (const Error& e) {
    EXPECT_EQ(e.path(), (dir / "none.jpg").string());
  }
}

}  // namespace
}  // namespace sluice::stages
