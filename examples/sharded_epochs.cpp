// Data parallelism without a framework: each of WORLD processes takes shard(rank, world) of every
// epoch's shuffled order; together they cover the epoch exactly once. Run one per rank:
//   example_sharded_epochs DIR RANK WORLD
#include <cstdio>
#include <cstdlib>
#include <sluice/sluice.hpp>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s DIR RANK WORLD\n", argv[0]);
    return 2;
  }
  const int rank = std::atoi(argv[2]);
  const int world = std::atoi(argv[3]);
  try {
    sluice::Loader loader = sluice::Pipeline::from_folder(argv[1])
                                .shard(rank, world)
                                .shuffle_files(2024)  // the same seed on every rank
                                .read()
                                .decode_jpeg()
                                .random_resized_crop(96)
                                .flip_horizontal()
                                .normalize()
                                .batch(64)
                                .build({.seed = 7});
    for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
      std::int64_t samples = 0;
      for (sluice::Batch& batch : loader.epoch(epoch)) samples += batch.size();
      std::printf("rank %d/%d epoch %lld: %lld samples\n", rank, world, static_cast<long long>(epoch),
                  static_cast<long long>(samples));
    }
  } catch (const sluice::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
