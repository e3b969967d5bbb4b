// s3:// shards against s3rver (npm), a third party's S3 server: installed with `npm install
// s3rver` into this test's own folder (next to its executable) the first time, started on
// 127.0.0.1, the shards uploaded with curl's own SigV4 signing, then read back through an s3://
// glob (ListObjectsV2) and a brace range: the batches of the same shards on disk. s3rver does not
// check signatures (remote_shards_test checks them with botocore's signer). Skips, saying why,
// when node, npm or curl are missing or the install fails (no registry reachable).
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "shard_support.hpp"
#include "sluice/sluice.hpp"
#include "test_support.hpp"

extern char** environ;

namespace sluice {
namespace {

namespace fs = std::filesystem;

std::uint64_t hash_bytes(const void* data, std::size_t n, std::uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

std::vector<std::uint64_t> hashes(const std::string& pattern, const RemoteOptions& remote) {
  Pipeline p = Pipeline::from_shards(pattern, {.index = ShardIndex::kMemoryOnly, .remote = remote});
  Loader loader = p.shuffle_files(2).read().decode_jpeg().center_crop(24).batch(8).build({.threads = 2, .seed = 1});
  std::vector<std::uint64_t> out;
  for (Batch& b : loader.epoch(0)) {
    out.push_back(hash_bytes(b.labels().data(), b.labels().size_bytes(), hash_bytes(b.data().data, b.data().bytes())));
  }
  return out;
}

int run(const std::string& command) { return std::system(command.c_str()); }

fs::path own_folder() { return fs::read_symlink("/proc/self/exe").parent_path() / "s3rver"; }

TEST(S3rver, S3ShardsGiveTheLocalBatches) {
  if (run("command -v node >/dev/null && command -v npm >/dev/null && command -v curl >/dev/null") != 0) {
    GTEST_SKIP() << "node, npm or curl missing (scripts/setup installs them)";
  }
  const fs::path folder = own_folder();
  const fs::path bin = folder / "node_modules" / ".bin" / "s3rver";
  if (!fs::exists(bin)) {
    fs::create_directories(folder);
    const std::string install = "cd '" + folder.string() + "' && timeout 240 npm install --no-audit --no-fund s3rver >npm.log 2>&1";
    if (run(install) != 0 || !fs::exists(bin)) {
      GTEST_SKIP() << "npm install s3rver failed (see " << (folder / "npm.log").string() << ")";
    }
  }
  const test::TempDir dir;
  test::make_image_folder(dir / "folder", 3, 10, 40, 30);
  const auto shards = test::shard_folder(dir / "folder", dir / "local", 6);
  fs::create_directories(dir / "data");
  const std::string log = (dir / "s3rver.log").string();
  const std::string start = "node '" + bin.string() + "' -d '" + (dir / "data").string() +
                            "' -a 127.0.0.1 -p 0 --silent --configure-bucket bucket >'" + log + "' 2>&1 & echo $!";
  FILE* pipe = ::popen(start.c_str(), "r");
  int pid = 0;
  ASSERT_EQ(std::fscanf(pipe, "%d", &pid), 1);
  ::pclose(pipe);
  struct Stop {
    int pid;
    ~Stop() { ::kill(pid, SIGTERM); }
  } stop{pid};
  int port = 0;
  for (int i = 0; i < 200 && port == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream in(log);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::size_t at = text.find("127.0.0.1:");
    if (at != std::string::npos) port = std::atoi(text.c_str() + at + 10);
  }
  ASSERT_GT(port, 0) << "s3rver did not start";
  const std::string endpoint = "http://127.0.0.1:" + std::to_string(port);
  for (const fs::path& shard : shards) {
    const std::string put = "curl -sf -o /dev/null --aws-sigv4 aws:amz:us-east-1:s3 -u S3RVER:S3RVER -H "
                            "'x-amz-content-sha256: UNSIGNED-PAYLOAD' -T '" + shard.string() + "' '" + endpoint +
                            "/bucket/shards/" + shard.filename().string() + "'";
    ASSERT_EQ(run(put), 0) << put;
  }
  ::setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 1);
  ::setenv("AWS_ENDPOINT_URL_S3", endpoint.c_str(), 1);
  const RemoteOptions remote{.cache_dir = (dir / "cache").string()};
  const auto expected = hashes((dir / "local" / "train-{000000..000004}.tar").string(), {});
  EXPECT_EQ(hashes("s3://bucket/shards/train-*.tar", remote), expected);
  EXPECT_EQ(hashes("s3://bucket/shards/train-{000000..000004}.tar", remote), expected);
  for (const char* v : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL_S3"}) ::unsetenv(v);
}

}  // namespace
}  // namespace sluice
