// Which slice of the data this process reads when a parallel launcher started it: the rank and
// world size that torchrun, mpirun (OpenMPI, MPICH, Intel MPI, MVAPICH) or Slurm's srun put in
// each process's environment, read without linking MPI. Pipeline::shard_from_launcher() applies it;
// docs/distributed.md says how to launch.
#pragma once

#include <string>

namespace sluice {

struct LauncherRank {
  int rank = 0;
  int world = 1;
  // The variables it came from ("OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE", ...), or empty when
  // no launcher was found and the process is rank 0 of 1.
  std::string source;
};

// Reads, first found wins (the innermost launcher's variables first: torchrun started by srun or
// mpirun gives torchrun's ranks, as torch.distributed's env:// init reads them; mpirun inside a
// Slurm allocation gives mpirun's):
//   RANK / WORLD_SIZE                             torchrun (torch.distributed.run); RANK without
//                                                 WORLD_SIZE is not taken for a launcher's
//   OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE   OpenMPI's mpirun
//   PMI_RANK / PMI_SIZE                           MPICH and Intel MPI (Hydra), srun --mpi=pmi2
//   MV2_COMM_WORLD_RANK / MV2_COMM_WORLD_SIZE     MVAPICH's mpirun_rsh
//   SLURM_PROCID / SLURM_STEP_NUM_TASKS           a task that srun started (not the batch script
//                                                 itself, which has SLURM_PROCID=0 and the job's
//                                                 SLURM_NTASKS but is one process)
// Neither found: rank 0 of 1. A rank without its size, a value that is not an integer, a world
// below 1 or a rank outside [0, world) throws Error(kInvalidArgument) naming the variables.
LauncherRank launcher_rank();

}  // namespace sluice
