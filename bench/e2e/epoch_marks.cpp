// epoch_marks: loader_compare's sluice loader, epoch by epoch, for profiling what an epoch costs
// beyond the others on a shared machine. Each epoch prints its start on CLOCK_MONOTONIC (the
// clock of `perf record -k CLOCK_MONOTONIC`, so samples, faults and scheduler events can be split
// by epoch), its wall time, the process's CPU per image (which the load moves far less than the
// wall time), the consumer thread's own CPU, the wait for its first batch and the longest wait
// between two batches:
//
//   perf record -k CLOCK_MONOTONIC -e page-faults -c 1 --call-graph dwarf
//       build/bench/e2e/epoch_marks --data ../shared/datasets/imagenet-photos --batch 64 --epochs 3
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "sluice_system.hpp"

namespace {

namespace sb = sluice::bench;
using Clock = std::chrono::steady_clock;

double clock_seconds(clockid_t id) {
  timespec t{};
  ::clock_gettime(id, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sluice's loader_compare loader, epoch by epoch"};
  std::string data;
  std::string transform = "eval";
  sb::Scenario sc;
  sc.size = 224;
  app.add_option("--data", data, "image folder")->required()->check(CLI::ExistingDirectory);
  app.add_option("--transform", transform, "eval, train or cifar")
      ->check(CLI::IsMember({"eval", "train", "cifar"}))->capture_default_str();
  app.add_option("--size", sc.size, "output side")->capture_default_str();
  app.add_option("--batch", sc.batch, "batch size")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--threads", sc.threads, "worker threads")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--epochs", sc.epochs, "epochs, epoch 0 included")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--seed", sc.seed, "seed")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  sc.transform = *sb::parse_transform(transform);

  const Clock::time_point build_start = Clock::now();
  const double build_cpu = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
  sluice::Loader loader = sb::make_sluice_pipeline(data, sc, sb::EncodedFiles::kRead)
                              .build({.threads = sc.threads, .seed = sc.seed});
  std::printf("set-up: %.3f s wall, %.3f s CPU; load %s\n", since(build_start),
              clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - build_cpu, load_average().c_str());
  double checksum = 0;
  for (int e = 0; e < sc.epochs; ++e) {
    const double mark = clock_seconds(CLOCK_MONOTONIC);
    const Clock::time_point start = Clock::now();
    const double cpu = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
    const double consumer_cpu = clock_seconds(CLOCK_THREAD_CPUTIME_ID);
    double first_wait = -1, longest_wait = 0;
    std::int64_t images = 0;
    Clock::time_point last = start;
    for (sluice::Batch& b : loader.epoch(e)) {
      const double waited = since(last);
      if (first_wait < 0) first_wait = waited;
      else longest_wait = std::max(longest_wait, waited);
      checksum += b.data().as<const float>()[0];  // the consumer touches the batch, as loader_compare's does
      images += b.size();
      last = Clock::now();
    }
    const double wall = since(start);
    const double used = clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu;
    std::printf("epoch %d: starts at %.6f (CLOCK_MONOTONIC); %lld images in %.3f s, %.1f images/s; CPU %.1f us/image "
                "(%.2f cores), consumer %.1f ms; first batch after %.1f ms, longest wait after it %.1f ms\n",
                e, mark, static_cast<long long>(images), wall, static_cast<double>(images) / wall,
                1e6 * used / static_cast<double>(images), used / wall,
                1e3 * (clock_seconds(CLOCK_THREAD_CPUTIME_ID) - consumer_cpu), 1e3 * first_wait, 1e3 * longest_wait);
  }
  std::printf("load %s (checksum %g)\n", load_average().c_str(), checksum);
  return 0;
}
