// many_files_rate: the epoch rate of a large image folder against a small one that holds the same
// JPEGs (1,281,000 hardlinks to cifar10/test, bench/e2e/make_many_files.py, against
// cifar10/test), measured in one process with the two pipelines taking turns: the next --chunk
// images of the large set's epoch, then as many images of the small set (whole epochs), and so
// on to the end of the large epoch. On a shared machine whose load changes from minute to minute,
// separate runs of a minute each gave ratios from 0.78 to 1.63; turns of a second or two put the
// same load on both. The pipeline is `sluice bench --transform pad-crop --size 32`'s.
//
//   many_files_rate --big DIR --small DIR [--threads 2] [--chunk 20000] [--batch 64]
// Prints a line per turn to stderr and one JSON object to stdout: both build() times (warm), the
// images and seconds of each set, their rates, the ratio of the totals and the median of the
// turns' ratios.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sluice/sluice.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

sluice::Loader build(const std::string& dir, int threads, int batch, double& seconds) {
  const auto start = Clock::now();
  sluice::Loader loader = sluice::Pipeline::from_folder(dir)
                              .read()
                              .decode_jpeg({.fast_dct = true})
                              .random_crop(32, {.padding = 4})
                              .flip_horizontal(0.5)
                              .normalize({.mean = {0.485f, 0.456f, 0.406f}, .std = {0.229f, 0.224f, 0.225f}})
                              .batch(batch)
                              .build({.threads = threads});
  seconds = since(start);
  return loader;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The large folder's epoch rate against the small one's, in turns"};
  std::string big_dir;
  std::string small_dir;
  int threads = 2;
  int batch = 64;
  std::int64_t chunk = 20000;
  app.add_option("--big", big_dir, "The large folder")->required()->check(CLI::ExistingDirectory);
  app.add_option("--small", small_dir, "The small folder")->required()->check(CLI::ExistingDirectory);
  app.add_option("--threads", threads)->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--batch", batch)->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--chunk", chunk, "Images of the large set per turn")->check(CLI::PositiveNumber)->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  double big_build = 0;
  double small_build = 0;
  sluice::Loader small = build(small_dir, threads, batch, small_build);
  sluice::Loader big = build(big_dir, threads, batch, big_build);
  double big_seconds = 0;
  double small_seconds = 0;
  std::int64_t big_images = 0;
  std::int64_t small_images = 0;
  std::int64_t small_epoch = 0;
  std::vector<double> turn_ratios;
  auto range = big.epoch(0);
  auto it = range.begin();
  while (!(it == range.end())) {
    auto start = Clock::now();
    std::int64_t got = 0;
    while (!(it == range.end()) && got < chunk) {
      got += it->size();
      ++it;
    }
    const double b = since(start);
    start = Clock::now();
    std::int64_t s = 0;
    while (s < got) {
      for (sluice::Batch& batch_of_small : small.epoch(small_epoch)) s += batch_of_small.size();
      ++small_epoch;
    }
    const double t = since(start);
    big_seconds += b;
    small_seconds += t;
    big_images += got;
    small_images += s;
    turn_ratios.push_back((static_cast<double>(got) / b) / (static_cast<double>(s) / t));
    std::fprintf(stderr, "turn %zu: large %.0f images/s, small %.0f images/s, ratio %.3f\n", turn_ratios.size(),
                 static_cast<double>(got) / b, static_cast<double>(s) / t, turn_ratios.back());
  }
  std::vector<double> sorted = turn_ratios;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
  const double big_rate = static_cast<double>(big_images) / big_seconds;
  const double small_rate = static_cast<double>(small_images) / small_seconds;
  const nlohmann::json out{{"big", big_dir},
                           {"small", small_dir},
                           {"threads", threads},
                           {"big_files", big.samples_per_epoch()},
                           {"small_files", small.samples_per_epoch()},
                           {"big_build_seconds", big_build},
                           {"small_build_seconds", small_build},
                           {"big_images", big_images},
                           {"big_seconds", big_seconds},
                           {"small_images", small_images},
                           {"small_seconds", small_seconds},
                           {"big_images_per_sec", big_rate},
                           {"small_images_per_sec", small_rate},
                           {"ratio", big_rate / small_rate},
                           {"median_turn_ratio", median},
                           {"turns", turn_ratios.size()}};
  std::cout << out.dump() << "\n";
  return 0;
}
