// The compiled part of the Python package `sluice` (sluice._sluice, re-exported by
// sluice/__init__.py): the entry point that assembles the exceptions (errors.cpp), the pipeline
// and its epoch iterators (pipeline_binding.cpp), and batches with their DLPack tensors
// (batch_binding.cpp). docs/python.md is the user's page.
#include "python_module.hpp"
#include "sluice/pipeline/launcher.hpp"

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "unknown"
#endif

namespace py = pybind11;

PYBIND11_MODULE(_sluice, m) {
  m.doc() =
      "sluice: image batches for training from a JSON pipeline spec, handed over as DLPack tensors that "
      "share the pipeline's memory.\n\n"
      "    pipeline = sluice.Pipeline(\"train.json\")          # or a dict\n"
      "    for batch in pipeline.epoch(0):\n"
      "        images = torch.from_dlpack(batch.data)          # no copy\n"
      "        labels = torch.from_dlpack(batch.labels)\n\n"
      "A batch's memory stays valid while the Batch or any tensor made from it is alive, and returns to the "
      "pipeline's ring when all are released; holding more batches than the ring has slots (prefetch depth + 2) "
      "stops production until one is released.";
  m.attr("__version__") = SLUICE_VERSION;
  sluice::python::register_errors(m);
  sluice::python::bind_batch(m);
  sluice::python::bind_pipeline(m);
  m.def(
      "launcher_rank",
      [] {
        const sluice::LauncherRank r = sluice::launcher_rank();
        py::dict out;
        out["rank"] = r.rank;
        out["world"] = r.world;
        out["source"] = r.source;
        return out;
      },
      "The rank and world size torchrun, mpirun or srun gave this process, as {\"rank\", \"world\", \"source\"} "
      "(rank 0 of 1 and source \"\" without a launcher); spec[\"shard\"] = {\"rank\": r[\"rank\"], "
      "\"world\": r[\"world\"]} gives each process its disjoint slice (docs/distributed.md).");
}
