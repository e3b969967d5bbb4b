// Under `mpirun -np 2` (ctest label mpi): each rank builds the same pipeline with
// shard_from_launcher(), and the ranks' samples are disjoint and together cover the epoch.
//
// Rank 0 writes 101 small JPEGs whose colour encodes their index (label = index, so a sample is
// identified by its label and its pixels must agree with it) and broadcasts the folder. Every
// rank iterates epochs 0 and 1, checks its pixels against its labels, and gathers all ranks'
// labels with MPI_Allgatherv; every rank then checks that no label appears twice and all 101
// appear, that the slices differ by at most one sample, and that the launcher's rank and world
// equal MPI_Comm_rank and MPI_Comm_size. Exit status 0 only when every check passed on every rank.
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "pipeline_support.hpp"
#include "sluice/pipeline/launcher.hpp"
#include "sluice/sluice.hpp"
#include "test_support.hpp"

namespace {

constexpr int kItems = 101;  // not a multiple of the world size: the slices differ by one

int failures = 0;
int rank = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
  }
}

// The folder of rank 0's data set, on every rank (one machine: ctest runs the ranks locally).
std::string shared_folder(const std::filesystem::path& mine) {
  std::string path = mine.string();
  int length = static_cast<int>(path.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
  path.resize(static_cast<std::size_t>(length));
  MPI_Bcast(path.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
  return path;
}

// One epoch of this rank's shard: the labels in delivery order, each checked against its pixels;
// padding (a rank short of samples repeats some in its last batch) is checked but not kept.
std::vector<std::int32_t> shard_labels(sluice::Loader& loader, std::int64_t epoch) {
  std::vector<std::int32_t> labels;
  for (sluice::Batch& b : loader.epoch(epoch)) {
    const auto* pixels = static_cast<const std::uint8_t*>(b.data().data);
    const std::int64_t per_sample = b.data().shape.elements() / b.data().shape[0];
    for (std::int64_t i = 0; i < b.size(); ++i) {
      const std::int32_t label = b.labels()[static_cast<std::size_t>(i)];
      const int decoded = sluice::test::index_of_colour(pixels + i * per_sample);
      check(decoded == label, "epoch " + std::to_string(epoch) + ": sample labelled " + std::to_string(label) +
                                  " has the pixels of item " + std::to_string(decoded));
      if (i < b.size() - b.padding()) labels.push_back(label);
    }
  }
  return labels;
}

void check_epoch(const std::vector<std::int32_t>& mine, int world, std::int64_t epoch) {
  const int count = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<std::size_t>(world));
  MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::vector<int> offsets(static_cast<std::size_t>(world), 0);
  for (int r = 1; r < world; ++r) offsets[r] = offsets[r - 1] + counts[r - 1];
  std::vector<std::int32_t> all(static_cast<std::size_t>(offsets.back() + counts.back()));
  MPI_Allgatherv(mine.data(), count, MPI_INT32_T, all.data(), counts.data(), offsets.data(), MPI_INT32_T,
                 MPI_COMM_WORLD);

  const std::string e = "epoch " + std::to_string(epoch) + ": ";
  check(static_cast<int>(all.size()) == kItems,
        e + "the ranks delivered " + std::to_string(all.size()) + " samples in all, expected " + std::to_string(kItems));
  const auto [low, high] = std::minmax_element(counts.begin(), counts.end());
  check(*high - *low <= 1, e + "slices of " + std::to_string(*low) + " and " + std::to_string(*high) + " samples");
  std::vector<int> times(kItems, 0);
  for (const std::int32_t label : all) {
    check(label >= 0 && label < kItems, e + "label " + std::to_string(label) + " out of range");
    if (label >= 0 && label < kItems) ++times[static_cast<std::size_t>(label)];
  }
  for (int i = 0; i < kItems; ++i) {
    check(times[static_cast<std::size_t>(i)] == 1,
          e + "item " + std::to_string(i) + " delivered " + std::to_string(times[static_cast<std::size_t>(i)]) +
              " times across the ranks, expected once");
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  try {
    check(world >= 2, "run under mpirun -np 2 (or more); world size is " + std::to_string(world));
    const sluice::LauncherRank launched = sluice::launcher_rank();
    check(launched.rank == rank && launched.world == world,
          "launcher_rank() says " + std::to_string(launched.rank) + " of " + std::to_string(launched.world) +
              " (from " + (launched.source.empty() ? std::string("no launcher") : launched.source) +
              "), MPI says " + std::to_string(rank) + " of " + std::to_string(world));

    std::unique_ptr<sluice::test::TempDir> dir;
    if (rank == 0) {
      dir = std::make_unique<sluice::test::TempDir>();
      sluice::test::make_coded_items(dir->path(), kItems);
    }
    const std::filesystem::path folder = shared_folder(rank == 0 ? dir->path() : std::filesystem::path());
    std::vector<sluice::Item> items;
    for (int i = 0; i < kItems; ++i) items.push_back({(folder / ("item_" + std::to_string(i) + ".jpg")).string(), i});

    sluice::Loader loader = sluice::Pipeline::from_items(items)
                                .shard_from_launcher()
                                .shuffle_files(17)
                                .read()
                                .decode_jpeg()
                                .batch(8)
                                .build({.threads = 1});
    check(loader.samples_per_epoch() == kItems / world || loader.samples_per_epoch() == kItems / world + 1,
          "samples_per_epoch " + std::to_string(loader.samples_per_epoch()) + " is not this rank's slice");
    std::vector<std::int32_t> first;
    for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
      const std::vector<std::int32_t> labels = shard_labels(loader, epoch);
      check(static_cast<std::int64_t>(labels.size()) == loader.samples_per_epoch(),
            "epoch " + std::to_string(epoch) + " delivered " + std::to_string(labels.size()) + " samples, expected " +
                std::to_string(loader.samples_per_epoch()));
      check_epoch(labels, world, epoch);
      if (epoch == 0) {
        first = labels;
      } else {
        // shuffle_files reshuffles each epoch before sharding: a rank's slice changes.
        std::vector<std::int32_t> a = first, b = labels;
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        check(a != b, "the slice of epoch 1 equals epoch 0's: files were not reshuffled across ranks");
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);  // rank 0's folder outlives every rank's reads
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: exception: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);  // the other rank may be waiting in a collective
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("mpi_shard_test: %d ranks, %d failed checks\n", world, total);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
