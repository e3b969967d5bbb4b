// Implementation of the command-line test helpers (process spawning, IDX and PNG writing).
#include "cli_test_support.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <turbojpeg.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "test_support.hpp"

extern char** environ;

namespace sluice::test {

namespace fs = std::filesystem;

std::string CliRun::last_line() const {
  std::istringstream in(out);
  std::string line;
  std::string last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

namespace {

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void put_be32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  out.push_back(static_cast<std::uint8_t>(v >> 24));
  out.push_back(static_cast<std::uint8_t>(v >> 16));
  out.push_back(static_cast<std::uint8_t>(v >> 8));
  out.push_back(static_cast<std::uint8_t>(v));
}

}  // namespace

CliRun run_cli(const std::vector<std::string>& args) {
  TempDir capture;
  const fs::path out_path = capture / "stdout";
  const fs::path err_path = capture / "stderr";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  std::vector<std::string> argv_strings;
  argv_strings.push_back(SLUICE_CLI);
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, SLUICE_CLI, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) throw std::runtime_error(std::string("cannot run ") + SLUICE_CLI);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  CliRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.out = slurp(out_path);
  run.err = slurp(err_path);
  return run;
}

std::vector<std::uint8_t> idx_images(std::uint32_t count, std::uint32_t rows, std::uint32_t cols,
                                     const std::vector<std::uint8_t>& pixels,
                                     std::uint32_t magic) {
  std::vector<std::uint8_t> out;
  out.reserve(16 + pixels.size());
  put_be32(out, magic);
  put_be32(out, count);
  put_be32(out, rows);
  put_be32(out, cols);
  out.insert(out.end(), pixels.begin(), pixels.end());
  return out;
}

std::vector<std::uint8_t> idx_labels(const std::vector<std::uint8_t>& labels, std::uint32_t magic) {
  std::vector<std::uint8_t> out;
  put_be32(out, magic);
  put_be32(out, static_cast<std::uint32_t>(labels.size()));
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

void write_gzip(const fs::path& path, const std::vector<std::uint8_t>& bytes) {
  fs::create_directories(path.parent_path());
  gzFile file = gzopen(path.c_str(), "wb1");
  if (file == nullptr) throw std::runtime_error("cannot write " + path.string());
  std::size_t done = 0;
  while (done < bytes.size()) {
    const auto n = static_cast<unsigned>(std::min<std::size_t>(bytes.size() - done, 1 << 24));
    if (gzwrite(file, bytes.data() + done, n) != static_cast<int>(n)) {
      gzclose(file);
      throw std::runtime_error("gzwrite failed for " + path.string());
    }
    done += n;
  }
  if (gzclose(file) != Z_OK) throw std::runtime_error("gzclose failed for " + path.string());
}

std::vector<std::uint8_t> read_gzip(const fs::path& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) throw std::runtime_error("cannot open " + path.string());
  std::vector<std::uint8_t> out;
  std::vector<std::uint8_t> chunk(1 << 20);
  int n = 0;
  while ((n = gzread(file, chunk.data(), static_cast<unsigned>(chunk.size()))) > 0) {
    out.insert(out.end(), chunk.begin(), chunk.begin() + n);
  }
  gzclose(file);
  if (n < 0) throw std::runtime_error("cannot read " + path.string());
  return out;
}

std::uint8_t synthetic_pixel(std::uint32_t index, int y, int x) {
  // A ramp with a per-image offset: distinct images, no edges for JPEG to smear.
  return static_cast<std::uint8_t>((index * 37) % 128 + 2 * x + 2 * y);
}

std::uint8_t synthetic_label(std::uint32_t index) {
  return static_cast<std::uint8_t>((index * 7 + 3) % 10);
}

std::vector<std::uint8_t> synthetic_images(std::uint32_t count) {
  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(count) * 28 * 28);
  std::size_t k = 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    for (int y = 0; y < 28; ++y) {
      for (int x = 0; x < 28; ++x) pixels[k++] = synthetic_pixel(i, y, x);
    }
  }
  return pixels;
}

std::vector<std::uint8_t> synthetic_labels(std::uint32_t count) {
  std::vector<std::uint8_t> labels(count);
  for (std::uint32_t i = 0; i < count; ++i) labels[i] = synthetic_label(i);
  return labels;
}

void write_synthetic_fashion_mnist(const fs::path& dir) {
  write_gzip(dir / "train-images-idx3-ubyte.gz",
             idx_images(kTrainCount, 28, 28, synthetic_images(kTrainCount)));
  write_gzip(dir / "train-labels-idx1-ubyte.gz", idx_labels(synthetic_labels(kTrainCount)));
  write_gzip(dir / "t10k-images-idx3-ubyte.gz",
             idx_images(kTestCount, 28, 28, synthetic_images(kTestCount)));
  write_gzip(dir / "t10k-labels-idx1-ubyte.gz", idx_labels(synthetic_labels(kTestCount)));
}

std::vector<std::uint8_t> decode_grey(const fs::path& path, int& width, int& height) {
  const std::vector<std::uint8_t> jpeg = read_bytes(path);
  tjhandle tj = tjInitDecompress();
  int subsampling = 0;
  int colorspace = 0;
  if (tjDecompressHeader3(tj, jpeg.data(), jpeg.size(), &width, &height, &subsampling,
                          &colorspace) != 0) {
    tjDestroy(tj);
    throw std::runtime_error("not a JPEG: " + path.string());
  }
  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(width) * height);
  const int rc = tjDecompress2(tj, jpeg.data(), jpeg.size(), pixels.data(), width, width, height,
                               TJPF_GRAY, 0);
  tjDestroy(tj);
  if (rc != 0) throw std::runtime_error("cannot decode " + path.string());
  return pixels;
}

std::vector<std::uint8_t> make_png(int width, int height) {
  std::vector<std::uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  auto chunk = [&png](const char* type, const std::vector<std::uint8_t>& data) {
    put_be32(png, static_cast<std::uint32_t>(data.size()));
    const std::size_t start = png.size();
    png.insert(png.end(), type, type + 4);
    png.insert(png.end(), data.begin(), data.end());
    const uLong crc = crc32(0L, png.data() + start, static_cast<uInt>(png.size() - start));
    put_be32(png, static_cast<std::uint32_t>(crc));
  };
  std::vector<std::uint8_t> header;
  put_be32(header, static_cast<std::uint32_t>(width));
  put_be32(header, static_cast<std::uint32_t>(height));
  header.insert(header.end(), {8, 0, 0, 0, 0});  // 8-bit greyscale, no interlace
  chunk("IHDR", header);
  std::vector<std::uint8_t> raw;
  for (int y = 0; y < height; ++y) {
    raw.push_back(0);  // filter: none
    for (int x = 0; x < width; ++x) raw.push_back(static_cast<std::uint8_t>(x * 4 + y));
  }
  uLongf size = compressBound(static_cast<uLong>(raw.size()));
  std::vector<std::uint8_t> compressed(size);
  compress(compressed.data(), &size, raw.data(), static_cast<uLong>(raw.size()));
  compressed.resize(size);
  chunk("IDAT", compressed);
  chunk("IEND", {});
  return png;
}

std::vector<fs::path> list_files(const fs::path& root) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}


int spawn_cli(const std::vector<std::string>& args, const std::string& err_file) {
  std::string cli = SLUICE_CLI;
  std::vector<std::string> copy = args;
  std::vector<char*> argv{cli.data()};
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, cli.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

}  // namespace sluice::test
