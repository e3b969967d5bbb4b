// autotune_grid: the autotuner against every fixed setting of samples in flight x prefetch depth,
// on the same files in one run. Each setting runs a warm-up epoch, then `--epochs` timed ones;
// the autotuned pipeline runs the same, and its steady state (epochs after it settles) is
// compared with the best fixed setting. Every run is checked against the memory budget.
//   autotune_grid --data DIR --transform eval|train|cifar [--size N] [--batch N] [--epochs N]
//                 [--budget SIZE] [--json]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <vector>

#include "sluice/sluice.hpp"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string data;
  std::string transform = "eval";
  int size = 224;
  int batch = 64;
  int epochs = 3;
  std::string budget = "1GiB";
  bool json = false;
};

sluice::Pipeline pipeline(const Options& o, std::optional<int> prefetch) {
  auto p = sluice::Pipeline::from_folder(o.data).shuffle_files(1).read().decode_jpeg({.fast_dct = true});
  namespace presets = sluice::presets;
  const presets::Transform geometry = o.transform == "eval"    ? presets::eval_crop(o.size)
                                      : o.transform == "train" ? presets::resized_crop_flip(o.size)
                                                               : presets::pad_crop_flip(o.size, 4);
  geometry.apply(p);
  p.normalize({.mean = presets::imagenet_stats().mean, .std = presets::imagenet_stats().std,
               .layout = sluice::Layout::kNCHW, .dtype = sluice::DType::kF32})
      .batch(o.batch);
  if (prefetch) p.prefetch(*prefetch);
  return p;
}

struct Run {
  double images_per_sec = 0;      // over the timed epochs
  double settle_seconds = -1;     // autotuned: when the settings last changed
  std::uint64_t peak = 0;
  sluice::TuningStats tuning;
};

Run measure(sluice::Loader& loader, int epochs) {
  Run run;
  for (const sluice::Batch& b : loader.epoch(0)) (void)b;  // warm-up: page cache, buffers, tuning
  const auto start = Clock::now();
  std::int64_t images = 0;
  sluice::TuningStats last = loader.stats().tuning;
  for (int e = 1; e <= epochs; ++e) {
    for (const sluice::Batch& b : loader.epoch(e)) {
      images += b.size();
      const sluice::TuningStats now = loader.stats().tuning;
      if (now.decisions != last.decisions) {
        run.settle_seconds = std::chrono::duration<double>(Clock::now() - start).count();
        last = now;
      }
    }
  }
  run.images_per_sec = static_cast<double>(images) / std::chrono::duration<double>(Clock::now() - start).count();
  const sluice::Stats s = loader.stats();
  run.peak = s.memory_peak;
  run.tuning = s.tuning;
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"autotuner vs the grid of fixed settings, same files, one run"};
  app.add_option("--data", o.data, "image folder")->required()->check(CLI::ExistingDirectory);
  app.add_option("--transform", o.transform)->check(CLI::IsMember({"eval", "train", "cifar"}));
  app.add_option("--size", o.size);
  app.add_option("--batch", o.batch);
  app.add_option("--epochs", o.epochs, "timed epochs after one warm-up");
  app.add_option("--budget", o.budget);
  app.add_flag("--json", o.json);
  CLI11_PARSE(app, argc, argv);
  const std::uint64_t budget = *sluice::parse_size(o.budget);
  const int threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));

  json grid = json::array();
  double best = 0;
  std::string best_name;
  bool within_budget = true;
  std::printf("%-24s %12s %14s\n", "setting", "images/s", "accounted peak");
  for (int in_flight : {1, 2, 4, 8}) {
    for (int prefetch : {1, 2, 4, 8}) {
      sluice::Loader loader = pipeline(o, prefetch).build(
          {.memory_budget = budget, .threads = threads, .samples_in_flight = in_flight, .seed = 1});
      const Run r = measure(loader, o.epochs);
      within_budget = within_budget && r.peak <= budget;
      char name[64];
      std::snprintf(name, sizeof name, "in_flight %d, prefetch %d", in_flight, prefetch);
      std::printf("%-24s %12.1f %14s\n", name, r.images_per_sec, sluice::format_bytes(r.peak).c_str());
      grid.push_back({{"in_flight", in_flight}, {"prefetch", prefetch}, {"images_per_sec", r.images_per_sec}, {"peak", r.peak}});
      if (r.images_per_sec > best) {
        best = r.images_per_sec;
        best_name = name;
      }
    }
  }
  sluice::Loader tuned = pipeline(o, std::nullopt).build({.memory_budget = budget, .threads = sluice::autotune, .seed = 1});
  const Run t = measure(tuned, o.epochs);
  within_budget = within_budget && t.peak <= budget;
  const double ratio = t.images_per_sec / best;
  std::printf("%-24s %12.1f %14s   (settled on in_flight %d, prefetch %d after %lld changes%s)\n", "autotuned",
              t.images_per_sec, sluice::format_bytes(t.peak).c_str(), t.tuning.samples_in_flight, t.tuning.prefetch,
              static_cast<long long>(t.tuning.decisions),
              t.settle_seconds >= 0 ? (", last at " + std::to_string(t.settle_seconds) + " s").c_str() : "");
  std::printf("autotuned / best fixed (%s): %.2fx (target >= 0.95x %s); every run within the budget: %s\n",
              best_name.c_str(), ratio, ratio >= 0.95 ? "met" : "MISSED", within_budget ? "yes" : "NO");
  if (o.json) {
    std::cout << json{{"data", o.data}, {"transform", o.transform}, {"grid", grid}, {"best_fixed", best},
                      {"autotuned", t.images_per_sec}, {"ratio", ratio}, {"within_budget", within_budget},
                      {"settled", {{"in_flight", t.tuning.samples_in_flight}, {"prefetch", t.tuning.prefetch},
                                   {"decisions", t.tuning.decisions}, {"last_change_seconds", t.settle_seconds}}}}
                     .dump()
              << "\n";
  }
  return within_budget ? 0 : 1;
}
