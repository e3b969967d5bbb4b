// Helpers for the command-line tests: run the built `sluice` binary and capture what it says,
// write gzip IDX files (good and deliberately broken ones), and decode JPEGs for pixel checks.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace sluice::test {

struct CliRun {
  int exit_code = -1;  // the process's exit status; 128 + signal when it was killed
  std::string out;     // stdout
  std::string err;     // stderr
  std::string last_line() const;  // the last non-empty line of stdout
};

// Runs SLUICE_CLI with `args` (no shell), stdin from /dev/null, stdout and stderr captured.
CliRun run_cli(const std::vector<std::string>& args);

// Starts SLUICE_CLI with `args` (no shell) in the background, stdout to /dev/null and stderr to
// `err_file`; returns its pid for the caller to signal and reap (-1 when it could not start).
int spawn_cli(const std::vector<std::string>& args, const std::string& err_file = "/dev/null");

// IDX bytes as the format defines them; magic and header fields are parameters so tests can
// write files that lie.
std::vector<std::uint8_t> idx_images(std::uint32_t count, std::uint32_t rows, std::uint32_t cols,
                                     const std::vector<std::uint8_t>& pixels,
                                     std::uint32_t magic = 2051);
std::vector<std::uint8_t> idx_labels(const std::vector<std::uint8_t>& labels,
                                     std::uint32_t magic = 2049);
// Writes gzip (level 1: the fixtures are large and only need to be valid, not small).
void write_gzip(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes);
std::vector<std::uint8_t> read_gzip(const std::filesystem::path& path);

// The synthetic Fashion-MNIST the prepare tests use: the real counts (60000/10000, 28x28) so
// the command's checks pass, smooth per-image gradients so JPEG error stays small, and labels
// that are not simply sorted.
inline constexpr std::uint32_t kTrainCount = 60000;
inline constexpr std::uint32_t kTestCount = 10000;
std::uint8_t synthetic_pixel(std::uint32_t index, int y, int x);
std::uint8_t synthetic_label(std::uint32_t index);
std::vector<std::uint8_t> synthetic_images(std::uint32_t count);
std::vector<std::uint8_t> synthetic_labels(std::uint32_t count);
// Writes the four .gz files into dir.
void write_synthetic_fashion_mnist(const std::filesystem::path& dir);

// Decodes a JPEG to 8-bit greyscale with TurboJPEG; throws on failure.
std::vector<std::uint8_t> decode_grey(const std::filesystem::path& path, int& width, int& height);

// A small valid PNG (greyscale), for "not a JPEG" cases.
std::vector<std::uint8_t> make_png(int width, int height);

// Regular files under root, recursively (hidden names included).
std::vector<std::filesystem::path> list_files(const std::filesystem::path& root);

}  // namespace sluice::test
