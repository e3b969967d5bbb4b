// shards_rate: tar shards against the same images as a folder, with the same pipeline,
// in one process, taking turns: an epoch from the folder, then one from the shards (the order
// alternating every turn), so the load of a shared machine falls on both alike. With
// --drop-cache, the pages of the folder's files and of the shards (and their index files) are
// dropped before either pipeline is built (posix_fadvise DONTNEED, as `sluice bench --drop-cache`
// does: no privileges needed): the first turn is then both sources' cold epoch and the others
// are warm.
//
//   shards_rate --data DIR --shards PATTERN [--transform pad-crop|eval] [--size 32] [--shuffle]
//               [--threads 2] [--batch 64] [--turns 4] [--drop-cache]
// Prints a line per turn to stderr and one JSON object to stdout: each turn's rates and ratio
// (shards / folder), the cold ratio (turn 1, with --drop-cache) and the median warm ratio.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sluice/sluice.hpp"

namespace {

using Clock = std::chrono::steady_clock;

void drop(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return;
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

void drop_caches(const std::string& folder, const std::string& pattern) {
  for (const auto& entry : std::filesystem::recursive_directory_iterator(folder)) {
    if (entry.is_regular_file()) drop(entry.path().string());
  }
  glob_t found{};
  if (::glob(pattern.c_str(), 0, nullptr, &found) == 0) {
    for (std::size_t i = 0; i < found.gl_pathc; ++i) {
      drop(found.gl_pathv[i]);
      drop(std::string(found.gl_pathv[i]) + ".sluice-idx");
    }
  }
  ::globfree(&found);
}

struct Options {
  std::string data;
  std::string shards;
  std::string transform = "pad-crop";
  int size = 32;
  bool shuffle = false;
  int threads = 2;
  int batch = 64;
  int turns = 4;
  bool drop_cache = false;
};

// `sluice bench`'s pipelines for these transforms (f32 NCHW, ImageNet's mean and std, fast IDCT).
sluice::Loader build(sluice::Pipeline p, const Options& o) {
  if (o.shuffle) p.shuffle_files(1);
  p.read().decode_jpeg({.fast_dct = true});
  if (o.transform == "eval") {
    p.resize_shorter(o.size * 256 / 224).center_crop(o.size);
  } else {
    p.random_crop(o.size, {.padding = 4}).flip_horizontal(0.5);
  }
  p.normalize({.mean = {0.485f, 0.456f, 0.406f}, .std = {0.229f, 0.224f, 0.225f}}).batch(o.batch);
  return p.build({.threads = o.threads});
}

double epoch_rate(sluice::Loader& loader, std::int64_t epoch) {
  const auto start = Clock::now();
  std::int64_t images = 0;
  for (sluice::Batch& b : loader.epoch(epoch)) images += b.size();
  return static_cast<double>(images) / std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tar shards against the same images as a folder, in turns"};
  Options o;
  app.add_option("--data", o.data, "The image folder")->required()->check(CLI::ExistingDirectory);
  app.add_option("--shards", o.shards, "The same images as shards (a pattern)")->required();
  app.add_option("--transform", o.transform)->check(CLI::IsMember({"pad-crop", "eval"}))->capture_default_str();
  app.add_option("--size", o.size)->check(CLI::PositiveNumber)->capture_default_str();
  app.add_flag("--shuffle", o.shuffle, "Shuffle the file order every epoch (shard-wise for shards)");
  app.add_option("--threads", o.threads)->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--batch", o.batch)->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--turns", o.turns)->check(CLI::PositiveNumber)->capture_default_str();
  app.add_flag("--drop-cache", o.drop_cache, "Drop both sources' pages first: the first turn is cold");
  CLI11_PARSE(app, argc, argv);

  if (o.drop_cache) drop_caches(o.data, o.shards);
  sluice::Loader folder = build(sluice::Pipeline::from_folder(o.data), o);
  sluice::Loader shards = build(sluice::Pipeline::from_shards(o.shards), o);
  nlohmann::json turns = nlohmann::json::array();
  std::vector<double> warm;
  double cold = 0;
  for (int t = 0; t < o.turns; ++t) {
    double f = 0;
    double s = 0;
    if (t % 2 == 0) {
      f = epoch_rate(folder, t);
      s = epoch_rate(shards, t);
    } else {
      s = epoch_rate(shards, t);
      f = epoch_rate(folder, t);
    }
    turns.push_back({{"folder_images_per_sec", f}, {"shards_images_per_sec", s}, {"ratio", s / f}});
    std::fprintf(stderr, "turn %d%s: folder %.0f images/s, shards %.0f images/s, ratio %.3f\n", t + 1,
                 t == 0 && o.drop_cache ? " (cold)" : "", f, s, s / f);
    if (t == 0 && o.drop_cache) {
      cold = s / f;
    } else {
      warm.push_back(s / f);
    }
  }
  std::sort(warm.begin(), warm.end());
  const nlohmann::json out{{"data", o.data},
                           {"shards", o.shards},
                           {"transform", o.transform},
                           {"size", o.size},
                           {"shuffle", o.shuffle},
                           {"threads", o.threads},
                           {"images", folder.samples_per_epoch()},
                           {"turns", turns},
                           {"cold_ratio", o.drop_cache ? nlohmann::json(cold) : nlohmann::json(nullptr)},
                           {"warm_ratio_median", warm.empty() ? nlohmann::json(nullptr) : nlohmann::json(warm[warm.size() / 2])}};
  std::cout << out.dump() << "\n";
  return 0;
}
