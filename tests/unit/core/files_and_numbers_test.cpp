// The core helpers every module writes, reads and parses with: the atomic writer (never through a
// link, never over a foreign file, never torn, 0600 when asked), the reader of whole input files
// (regular files under a bound only, without blocking on a FIFO) and the one number parser with
// checked ranges.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

#include "sluice/detail/core/atomic_file.hpp"
#include "sluice/detail/core/binary_io.hpp"
#include "sluice/detail/core/numbers.hpp"
#include "sluice/core/error.hpp"
#include "test_support.hpp"

namespace sluice::core {
namespace {

namespace fs = std::filesystem;

OutputFile ours(const fs::path& path) {
  return OutputFile{.path = path.string(), .noun = "test file", .mode = 0644,
                    .is_ours = [](std::string_view head) { return head.starts_with("OURS"); }};
}

std::string text_of(const fs::path& path) {
  const auto bytes = test::read_bytes(path);
  return {bytes.begin(), bytes.end()};
}

void write_text(const fs::path& path, const std::string& text) {
  test::write_bytes(path, std::vector<std::uint8_t>(text.begin(), text.end()));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

int entries_in(const fs::path& dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

TEST(AtomicFile, WritesANewFileAndReplacesOnlyItsOwnKind) {
  test::TempDir dir;
  write_file_atomically(ours(dir / "out"), "OURS 1");
  EXPECT_EQ(text_of(dir / "out"), "OURS 1");
  write_file_atomically(ours(dir / "out"), "OURS 2");
  EXPECT_EQ(text_of(dir / "out"), "OURS 2");
  write_text(dir / "foreign", "someone's notes");
  const std::string e = error_of([&] { write_file_atomically(ours(dir / "foreign"), "OURS"); });
  EXPECT_NE(e.find("not a sluice test file"), std::string::npos) << e;
  EXPECT_NE(e.find("--force"), std::string::npos) << e;
  EXPECT_EQ(text_of(dir / "foreign"), "someone's notes");
  EXPECT_EQ(entries_in(dir.path()), 2) << "a temporary was left behind";
  OutputFile forced = ours(dir / "foreign");
  forced.force = true;
  write_file_atomically(forced, "OURS 3");
  EXPECT_EQ(text_of(dir / "foreign"), "OURS 3");
}

TEST(AtomicFile, NeverWritesThroughASymlinkAndForceReplacesTheLinkNotItsTarget) {
  test::TempDir dir;
  write_text(dir / "victim", "OURS victim");  // even a file of our kind behind a link
  fs::create_symlink(dir / "victim", dir / "link");
  const std::string e = error_of([&] { write_file_atomically(ours(dir / "link"), "OURS new"); });
  EXPECT_NE(e.find("symbolic link"), std::string::npos) << e;
  EXPECT_THROW(check_output(ours(dir / "link")), Error);
  EXPECT_EQ(text_of(dir / "victim"), "OURS victim");
  OutputFile forced = ours(dir / "link");
  forced.force = true;
  write_file_atomically(forced, "OURS new");
  EXPECT_FALSE(fs::is_symlink(dir / "link"));
  EXPECT_EQ(text_of(dir / "link"), "OURS new");
  EXPECT_EQ(text_of(dir / "victim"), "OURS victim");
}

TEST(AtomicFile, RefusesAFifoAndAFolderEvenUnderForce) {
  test::TempDir dir;
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  EXPECT_NE(error_of([&] { write_file_atomically(ours(dir / "fifo"), "OURS"); }).find("not a regular file"),
            std::string::npos);
  fs::create_directory(dir / "folder");
  OutputFile forced = ours(dir / "folder");
  forced.force = true;
  EXPECT_NE(error_of([&] { write_file_atomically(forced, "OURS"); }).find("a folder"), std::string::npos);
}

TEST(AtomicFile, AnUnfinishedWriteLeavesTheOldFileAndNoTemporary) {
  test::TempDir dir;
  write_file_atomically(ours(dir / "out"), "OURS old");
  {
    AtomicFileWriter writer(ours(dir / "out"));
    writer.write("OURS half of the new");
    EXPECT_TRUE(fs::exists(writer.temp_path()));
    EXPECT_EQ(fs::path(writer.temp_path()).parent_path(), dir.path());
  }  // destroyed without commit(): a run that failed half-way
  EXPECT_EQ(text_of(dir / "out"), "OURS old");
  EXPECT_EQ(entries_in(dir.path()), 1);
}

TEST(AtomicFile, CachesAndIndexesAreCreatedOwnerOnly) {
  test::TempDir dir;
  OutputFile o = ours(dir / "cache");
  o.mode = 0600;
  write_file_atomically(o, "OURS");
  struct stat st {};
  ASSERT_EQ(::stat((dir / "cache").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(AtomicFile, AMissingFolderIsFoundBeforeTheRunWithItsReason) {
  test::TempDir dir;
  const std::string e = error_of([&] { check_output(ours(dir / "absent" / "out")); });
  EXPECT_NE(e.find("No such file or directory"), std::string::npos) << e;
}

TEST(ReadRegularFile, RefusesDevicesFifosAndFilesOverTheBoundWithThePath) {
  test::TempDir dir;
  // /dev/zero never ends; a FIFO without a writer would block the open forever.
  std::string e = error_of([] { read_regular_file("/dev/zero", 1 << 20, "state file"); });
  EXPECT_NE(e.find("/dev/zero"), std::string::npos) << e;
  EXPECT_NE(e.find("not a regular file"), std::string::npos) << e;
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  e = error_of([&] { read_regular_file((dir / "fifo").string(), 1 << 20, "state file"); });
  EXPECT_NE(e.find("not a regular file"), std::string::npos) << e;
  write_text(dir / "big", std::string(100, 'x'));
  try {
    read_regular_file((dir / "big").string(), 99, "list file");
    FAIL();
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::kTooLarge);
    EXPECT_EQ(err.path(), (dir / "big").string());
  }
  EXPECT_EQ(read_regular_text((dir / "big").string(), 100, "list file"), std::string(100, 'x'));
  try {
    read_regular_file((dir / "absent").string(), 99, "list file");
    FAIL();
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::kNotFound);
  }
}

TEST(LittleEndian, PutAndGetRoundTrip) {
  std::vector<std::uint8_t> out;
  append_le<std::uint32_t>(out, 0x04030201u);
  append_le<std::uint64_t>(out, 0x0c0b0a0908070605ull);
  ASSERT_EQ(out.size(), 12u);
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], i + 1);
  EXPECT_EQ(get_le<std::uint32_t>(out.data()), 0x04030201u);
  EXPECT_EQ(get_le<std::uint64_t>(out.data() + 4), 0x0c0b0a0908070605ull);
}

TEST(Numbers, WholeIntegersInsideTheirRangeOnly) {
  EXPECT_EQ(parse_int("42", 0, 100), 42);
  EXPECT_EQ(parse_int("+7", 0, 100), 7);
  EXPECT_EQ(parse_int("-3", -5, 5), -3);
  for (const char* bad : {"", "-", "1e3", "0x10", " 4", "4 ", "101", "-1", "99999999999999999999", "2.0"}) {
    EXPECT_FALSE(parse_int(bad, 0, 100)) << bad;
  }
  // Seeds: every 64-bit value, and nothing that used to wrap to 2^64 - 1.
  EXPECT_EQ(parse_uint("18446744073709551615", UINT64_MAX), UINT64_MAX);
  for (const char* bad : {"-1", "18446744073709551616", "1e23", "100000000000000000000000"}) {
    EXPECT_FALSE(parse_uint(bad, UINT64_MAX)) << bad;
  }
  // A label beyond int32 is out of range, not "not a number".
  EXPECT_FALSE(parse_int("99999999999", 0, INT32_MAX));
  EXPECT_EQ(integer_range_message("label", "99999999999", 0, INT32_MAX),
            "label: expected an integer from 0 to 2147483647, got \"99999999999\"");
}

TEST(Numbers, ThreadBoundIsFourTimesTheHardwareThreadsAndAtLeast1024) {
  EXPECT_GE(max_threads(), 1024);
  EXPECT_GE(max_threads(), 4 * static_cast<int>(std::thread::hardware_concurrency()));
  EXPECT_LT(max_threads(), 100000);
}

}  // namespace
}  // namespace sluice::core
