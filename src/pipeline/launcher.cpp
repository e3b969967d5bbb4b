// launcher_rank(): the rank and world size a parallel launcher (torchrun, mpirun, srun) exported
// to this process, from the environment alone, so libsluice needs no MPI or torch to shard by rank.
#include "sluice/pipeline/launcher.hpp"

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

#include "sluice/core/error.hpp"

namespace sluice {

namespace {

struct Variables {
  const char* rank;
  const char* world;
};

// In the order they are tried: see launcher.hpp for why.
constexpr Variables kLaunchers[] = {
    {"RANK", "WORLD_SIZE"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"PMI_RANK", "PMI_SIZE"},
    {"MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE"},
    {"SLURM_PROCID", "SLURM_STEP_NUM_TASKS"},
};

int parse_int(const char* name, const char* text) {
  errno = 0;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno == ERANGE || value < std::numeric_limits<int>::min() ||
      value > std::numeric_limits<int>::max()) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string(name) + ": expected an integer from the launcher, got \"" + text + "\"");
  }
  return static_cast<int>(value);
}

}  // namespace

LauncherRank launcher_rank() {
  for (const Variables& v : kLaunchers) {
    const char* rank = std::getenv(v.rank);
    if (rank == nullptr) continue;
    const std::string source = std::string(v.rank) + "/" + v.world;
    const char* world = std::getenv(v.world);
    if (world == nullptr) {
      // Slurm's batch script has SLURM_PROCID but no step: one process, not a rank of many. RANK
      // alone is too common a name to be taken for torchrun's (which always sets both).
      if (std::string_view(v.world) == "SLURM_STEP_NUM_TASKS" || std::string_view(v.world) == "WORLD_SIZE") continue;
      throw Error(ErrorCode::kInvalidArgument,
                  std::string(v.rank) + " is set but " + v.world + " is not: cannot tell the world size");
    }
    LauncherRank out;
    out.rank = parse_int(v.rank, rank);
    out.world = parse_int(v.world, world);
    out.source = source;
    if (out.world < 1) {
      throw Error(ErrorCode::kInvalidArgument,
                  std::string(v.world) + ": expected a world size of at least 1, got " + std::to_string(out.world));
    }
    if (out.rank < 0 || out.rank >= out.world) {
      throw Error(ErrorCode::kInvalidArgument, std::string(v.rank) + ": expected a rank in [0, " +
                                                   std::to_string(out.world - 1) + "], got " +
                                                   std::to_string(out.rank));
    }
    return out;
  }
  return LauncherRank{};
}

}  // namespace sluice
