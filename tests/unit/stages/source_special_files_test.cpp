// Listing and reading never trust what a folder or list holds: FIFOs, sockets and
// devices named .jpg are not listed, reading one fails at once naming it (never blocks), symlinks
// whose targets leave the data set's folder are refused unless allow_outside_root, and build()
// on a data set with a special file returns (checked in a child process with a deadline, so a
// hang fails the test instead of stalling the suite).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>

#include "sluice/core/error.hpp"
#include "sluice/pipeline/json_spec.hpp"
#include "sluice/runtime/loader.hpp"
#include "sluice/sluice.hpp"
#include "stages/source/read_file.hpp"
#include "stages/source/source.hpp"
#include "test_support.hpp"

namespace sluice::stages {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

std::optional<Error> error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

// A Unix socket bound at `path`; closed (the name stays) by the destructor.
struct BoundSocket {
  explicit BoundSocket(const fs::path& path) : fd(::socket(AF_UNIX, SOCK_STREAM, 0)) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
    ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  }
  ~BoundSocket() { ::close(fd); }
  int fd;
  bool ok = false;
};

// Runs `f` in a child process; true when it exits 0 within `seconds` (a hang is killed).
bool finishes_within(int seconds, const std::function<int()>& f) {
  const pid_t pid = ::fork();
  if (pid == 0) _exit(f());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) && WEXITSTATUS(status) == 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return false;
}

// root/a/{0,1}.jpg real JPEGs, plus special files named .jpg in root/a.
struct SpecialFolder {
  TempDir dir;
  fs::path root = dir / "data";
  std::unique_ptr<BoundSocket> socket;
  SpecialFolder() {
    test::make_image_folder(root, 1, 2, 16, 16);
    const fs::path cls = root / fs::directory_iterator(root)->path().filename();
    EXPECT_EQ(::mkfifo((cls / "fifo.jpg").c_str(), 0644), 0);
    socket = std::make_unique<BoundSocket>(cls / "socket.jpg");
    EXPECT_TRUE(socket->ok);
    fs::create_symlink("/dev/zero", cls / "device.jpg");
    fs::create_symlink("/dev/null", cls / "null.jpeg");
  }
};

TEST(SourceSpecialFiles, FifosSocketsAndDevicesNamedJpgAreNotListed) {
  SpecialFolder f;
  const Dataset d = load_dataset(spec::Folder{f.root.string()});
  ASSERT_EQ(d.items.size(), 2);
  for (std::int64_t i = 0; i < d.items.size(); ++i) EXPECT_TRUE(fs::is_regular_file(d.items.path(i))) << d.items.path(i);
}

TEST(SourceSpecialFiles, ReadingASpecialFileFailsAtOnceNamingIt) {
  SpecialFolder f;
  const fs::path cls = fs::path(load_dataset(spec::Folder{f.root.string()}).items.path(0)).parent_path();
  for (const char* name : {"fifo.jpg", "socket.jpg", "device.jpg", "null.jpeg"}) {
    const std::string path = (cls / name).string();
    ASSERT_TRUE(finishes_within(10, [&] {
      AlignedBuffer buffer;
      const auto e = error_of([&] { read_file(path, buffer, 1 << 20); });
      return e && e->path() == path ? 0 : 1;
    })) << name;
    ASSERT_TRUE(finishes_within(10, [&] {
      const auto e = error_of([&] { file_size(path); });
      return e && e->path() == path ? 0 : 1;
    })) << name;
  }
}

TEST(SourceSpecialFiles, AListFileThatIsAFifoIsRefusedWithoutBlocking) {
  TempDir dir;
  const fs::path list = dir / "list.txt";
  ASSERT_EQ(::mkfifo(list.c_str(), 0644), 0);
  EXPECT_TRUE(finishes_within(10, [&] {
    const auto e = error_of([&] { load_dataset(spec::ListFile{list.string()}); });
    return e && e->path() == list.string() ? 0 : 1;
  }));
}

TEST(SourceSpecialFiles, SymlinksOutOfTheRootAreRefusedUnlessAllowed) {
  TempDir dir;
  const fs::path root = dir / "data";
  test::make_image_folder(root, 2, 1, 16, 16);
  test::make_image_folder(dir / "outside", 1, 1, 16, 16);
  const fs::path outside_file = *fs::recursive_directory_iterator(dir / "outside");
  const fs::path outside_jpg = [&] {
    for (const auto& e : fs::recursive_directory_iterator(dir / "outside")) {
      if (e.is_regular_file()) return e.path();
    }
    return fs::path();
  }();
  ASSERT_FALSE(outside_jpg.empty());
  const fs::path cls = *fs::directory_iterator(root);

  // A file symlink, a folder symlink, and a class folder that is a symlink: each leaves the root.
  const std::vector<std::pair<fs::path, fs::path>> links = {
      {cls / "escape.jpg", outside_jpg},
      {cls / "escape_dir", outside_jpg.parent_path()},
      {root / "zz_escape_class", outside_jpg.parent_path()},
  };
  for (const auto& [link, target] : links) {
    if (fs::is_directory(target)) {
      fs::create_directory_symlink(target, link);
    } else {
      fs::create_symlink(target, link);
    }
    const auto e = error_of([&] { load_dataset(spec::Folder{root.string()}); });
    ASSERT_TRUE(e) << link;
    EXPECT_EQ(e->code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e->path(), link.string());
    EXPECT_NE(e->cause().find("allow_outside_root"), std::string::npos) << e->what();
    const Dataset allowed = load_dataset(spec::Folder{root.string(), true});
    EXPECT_GE(allowed.items.size(), 3) << link;
    fs::remove(link);
  }
  // Symlinks that stay inside are fine, and so is a root that is itself a symlink.
  fs::create_symlink(*fs::directory_iterator(cls), cls / "alias.jpg");
  EXPECT_EQ(load_dataset(spec::Folder{root.string()}).items.size(), 3);
  fs::create_directory_symlink(root, dir / "link_to_data");
  EXPECT_EQ(load_dataset(spec::Folder{(dir / "link_to_data").string()}).items.size(), 3);
  (void)outside_file;
}

TEST(SourceSpecialFiles, AllowOutsideRootRoundTripsThroughTheJsonSpec) {
  const PipelineDocument doc =
      parse_pipeline_json(R"({"source": {"folder": {"path": "/d", "allow_outside_root": true}},
                              "stages": [{"read": {}}]})");
  const auto* folder = std::get_if<spec::Folder>(&doc.spec.source);
  ASSERT_NE(folder, nullptr);
  EXPECT_TRUE(folder->allow_outside_root);
  EXPECT_EQ(folder->path, "/d");
  const PipelineDocument again = parse_pipeline_json(to_json(doc));
  EXPECT_TRUE(std::get<spec::Folder>(again.spec.source).allow_outside_root);
}

// build() with a FIFO, a socket and a device among the items (a list names them; a folder does
// not list them) returns under both policies: an error naming one, or a loader that skips them.
TEST(SourceSpecialFiles, BuildNeverHangsOnASpecialFile) {
  SpecialFolder f;
  const Dataset listed = load_dataset(spec::Folder{f.root.string()});
  const fs::path cls = fs::path(listed.items.path(0)).parent_path();
  for (const OnError policy : {OnError::kFail, OnError::kSkip}) {
    for (const char* name : {"fifo.jpg", "socket.jpg", "device.jpg"}) {
      std::vector<Item> items = {Item{(cls / name).string(), 0}};
      for (std::int64_t i = 0; i < listed.items.size(); ++i) items.push_back(Item{listed.items.path(i), listed.items.label(i)});
      EXPECT_TRUE(finishes_within(60, [&] {
        try {
          Loader loader = Pipeline::from_items(items).read().decode_jpeg().resize(8, 8).batch(2).build(
              {.threads = 1, .on_error = policy});
          for (Batch& b : loader.epoch(0)) (void)b;
        } catch (const Error& e) {
          return e.path() == (cls / name).string() ? 0 : 2;
        }
        return 0;
      })) << name << " policy " << static_cast<int>(policy);
    }
    // The folder itself: the special files are not listed, so build() and an epoch succeed.
    EXPECT_TRUE(finishes_within(60, [&] {
      try {
        Loader loader = Pipeline::from_folder(f.root.string()).read().decode_jpeg().resize(8, 8).batch(2).build(
            {.threads = 1, .on_error = policy});
        int batches = 0;
        for (Batch& b : loader.epoch(0)) {
          (void)b;
          ++batches;
        }
        return batches == 1 ? 0 : 3;
      } catch (const Error&) {
        return 4;
      }
    }));
  }
}

// A special file named by a list among good files (not first, so build() sizes the samples from
// a good one): under fail the epoch throws an Error naming it, under skip it is replaced and
// counted once; neither blocks.
TEST(SourceSpecialFiles, ASpecialFileAmongItemsFailsOrIsSkippedByThePolicy) {
  SpecialFolder f;
  const Dataset listed = load_dataset(spec::Folder{f.root.string()});
  const fs::path cls = fs::path(listed.items.path(0)).parent_path();
  for (const char* name : {"fifo.jpg", "socket.jpg", "device.jpg", "null.jpeg"}) {
    const std::string special = (cls / name).string();
    const std::vector<Item> items = {Item{listed.items.path(0), listed.items.label(0)}, Item{special, 0},
                                     Item{listed.items.path(1), listed.items.label(1)}};
    EXPECT_TRUE(finishes_within(60, [&] {
      try {
        Loader loader = Pipeline::from_items(items).read().decode_jpeg().resize(8, 8).batch(3).build(
            {.threads = 1, .on_error = OnError::kFail});
        for (Batch& b : loader.epoch(0)) (void)b;
      } catch (const Error& e) {
        return e.path() == special ? 0 : 2;
      }
      return 1;
    })) << name << " under fail";
    EXPECT_TRUE(finishes_within(60, [&] {
      Loader loader = Pipeline::from_items(items).read().decode_jpeg().resize(8, 8).batch(3).build(
          {.threads = 1, .on_error = OnError::kSkip});
      int samples = 0;
      for (Batch& b : loader.epoch(0)) samples += static_cast<int>(b.size());
      const Stats s = loader.stats();
      return samples == 3 && s.skipped_samples.size() == 1 && s.skipped_samples[0].path == special ? 0 : 1;
    })) << name << " under skip";
  }
}

}  // namespace
}  // namespace sluice::stages
