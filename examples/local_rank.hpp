// The process's rank among the processes on its node: which GPU it takes (cuda:<local rank>) when
// a node runs one rank per GPU. From the launcher's variable, first found wins, else from MPI.
#pragma once

#include <mpi.h>

#include <cstdlib>
#include <string>

namespace sluice_examples {

struct LocalRank {
  int rank = 0;
  std::string source;  // the variable it came from, or "MPI_COMM_TYPE_SHARED"
};

inline LocalRank local_rank(MPI_Comm comm) {
  // Open MPI, MPICH and Intel MPI (Hydra), MVAPICH, Slurm's srun.
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK",
                           "SLURM_LOCALID"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    char* end = nullptr;
    const long r = std::strtol(value, &end, 10);
    if (*end == '\0' && r >= 0) return {static_cast<int>(r), name};
  }
  // No launcher variable: the rank among the processes that share memory with this one.
  MPI_Comm node;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  LocalRank out{0, "MPI_COMM_TYPE_SHARED"};
  MPI_Comm_rank(node, &out.rank);
  MPI_Comm_free(&node);
  return out;
}

}  // namespace sluice_examples
