// Under mpirun (ctest label mpi): a job stopped at 4 ranks and resumed at 2 and at 3 delivers
// every sample of the epoch exactly once (docs/distributed.md).
//
//   mpi_resize_test stop DIR     (4 ranks) rank 0 writes 100 JPEGs whose colour encodes their
//                                index (label = index) into DIR; every rank takes 3 global steps
//                                of 12 (batch 3) of epoch 0; rank 0 keeps the labels all ranks
//                                delivered (DIR/before.txt) and its state (DIR/state.bin); every
//                                rank's state must be the same bytes.
//   mpi_resize_test resume DIR   (2 or 3 ranks, batch 6 or 4) restores DIR/state.bin and runs the
//                                epoch to its end; with the labels from before, every one of
//                                the 100 appears exactly once, and every rank took as many steps.
// Padding (the short end of the epoch, Batch::padding()) is checked against its pixels but not
// counted. Exit status 0 only when every check passed on every rank.
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "pipeline_support.hpp"
#include "sluice/pipeline/launcher.hpp"
#include "sluice/sluice.hpp"

namespace {

constexpr int kItems = 100;
constexpr int kGlobalBatch = 12;
constexpr int kStopSteps = 3;

int failures = 0;
int rank = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
  }
}

// Every rank's values, in rank order, on rank 0 (empty elsewhere).
std::vector<std::int32_t> gather(const std::vector<std::int32_t>& mine, int world) {
  const int count = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<std::size_t>(world));
  MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<int> offsets(static_cast<std::size_t>(world), 0);
  for (int r = 1; r < world; ++r) offsets[r] = offsets[r - 1] + counts[r - 1];
  std::vector<std::int32_t> all(rank == 0 ? static_cast<std::size_t>(offsets.back() + counts.back()) : 0);
  MPI_Gatherv(mine.data(), count, MPI_INT32_T, all.data(), counts.data(), offsets.data(), MPI_INT32_T, 0,
              MPI_COMM_WORLD);
  return all;
}

struct Delivered {
  std::vector<std::int32_t> labels;
  std::int32_t steps = 0;
};

Delivered run(sluice::Loader& loader, std::int64_t epoch, int stop) {
  Delivered out;
  for (sluice::Batch& b : loader.epoch(epoch)) {
    const auto* pixels = static_cast<const std::uint8_t*>(b.data().data);
    const std::int64_t per_sample = b.data().shape.elements() / b.data().shape[0];
    for (std::int64_t i = 0; i < b.size(); ++i) {
      const std::int32_t label = b.labels()[static_cast<std::size_t>(i)];
      check(sluice::test::index_of_colour(pixels + i * per_sample) == label, "a sample's pixels are not its label's");
      if (i < b.size() - b.padding()) out.labels.push_back(label);
    }
    if (++out.steps == stop) break;
  }
  return out;
}

void stop_phase(const std::filesystem::path& dir, int world) {
  check(world == 4, "the stop phase runs on 4 ranks, not " + std::to_string(world));
  if (rank == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir / "items");
    sluice::test::make_coded_items(dir / "items", kItems);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

sluice::Loader build(const std::filesystem::path& dir, int world) {
  std::vector<sluice::Item> items;
  for (int i = 0; i < kItems; ++i) items.push_back({(dir / "items" / ("item_" + std::to_string(i) + ".jpg")).string(), i});
  return sluice::Pipeline::from_items(items)
      .shard_from_launcher()
      .shuffle_files(23)
      .read()
      .decode_jpeg()
      .shuffle(10)
      .batch(kGlobalBatch / world)
      .build({.threads = 1});
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  try {
    check(argc == 3, "usage: mpi_resize_test stop|resume DIR");
    const std::string phase = argc == 3 ? argv[1] : "";
    const std::filesystem::path dir = argc == 3 ? argv[2] : ".";
    if (phase == "stop") stop_phase(dir, world);
    sluice::Loader loader = build(dir, world);
    if (phase == "resume") {
      std::ifstream in(dir / "state.bin", std::ios::binary);
      const std::vector<std::uint8_t> state{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      loader.restore(state);
    }
    const Delivered mine = run(loader, loader.resume_epoch(), phase == "stop" ? kStopSteps : -1);
    std::vector<std::int32_t> steps = gather({mine.steps}, world);
    const std::vector<std::uint8_t> state = loader.state();
    std::vector<std::int32_t> state_words(state.begin(), state.end());
    const std::vector<std::int32_t> states = gather(state_words, world);
    const std::vector<std::int32_t> all = gather(mine.labels, world);
    if (rank == 0) {
      for (const std::int32_t s : steps) check(s == steps[0], "the ranks took different numbers of steps");
      for (int r = 1; r < world; ++r) {
        check(std::equal(state_words.begin(), state_words.end(), states.begin() + r * static_cast<long>(state_words.size())),
              "rank " + std::to_string(r) + " saved another state than rank 0");
      }
      if (phase == "stop") {
        check(static_cast<int>(all.size()) == kStopSteps * kGlobalBatch, "the stopped run delivered " + std::to_string(all.size()));
        std::ofstream(dir / "state.bin", std::ios::binary)
            .write(reinterpret_cast<const char*>(state.data()), static_cast<std::streamsize>(state.size()));
        std::ofstream before(dir / "before.txt");
        for (const std::int32_t label : all) before << label << "\n";
      } else {
        std::vector<std::int32_t> epoch = all;
        std::ifstream before(dir / "before.txt");
        for (std::int32_t label = 0; before >> label;) epoch.push_back(label);
        std::vector<int> times(kItems, 0);
        for (const std::int32_t label : epoch) {
          if (label >= 0 && label < kItems) ++times[static_cast<std::size_t>(label)];
        }
        for (int i = 0; i < kItems; ++i) {
          check(times[static_cast<std::size_t>(i)] == 1, "4 -> " + std::to_string(world) + " ranks: item " +
                                                            std::to_string(i) + " delivered " +
                                                            std::to_string(times[static_cast<std::size_t>(i)]) + " times");
        }
        check(static_cast<int>(epoch.size()) == kItems, "the epoch has " + std::to_string(epoch.size()) + " samples");
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: exception: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("mpi_resize_test %s: %d ranks, %d failed checks\n", argc == 3 ? argv[1] : "?", world, total);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
