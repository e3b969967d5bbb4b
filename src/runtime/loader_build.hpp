// build_loader: Pipeline::build with the file-system seam. Every file the pipeline opens (data,
// header probes, the disk cache) goes through `file_ops` instead of the real file system, so
// tests can inject faults (tests/support/fault_fs.hpp). Internal: users call Pipeline::build(),
// and BuildOptions carries nothing that is not theirs to set.
#pragma once

#include "sluice/pipeline/options.hpp"
#include "sluice/pipeline/pipeline.hpp"
#include "sluice/runtime/loader.hpp"
#include "stages/source/file_ops.hpp"

namespace sluice::runtime {

// `file_ops` (null: the real file system) must outlive the loader and be safe to call from every
// worker at once.
Loader build_loader(const Pipeline& pipeline, const BuildOptions& options, stages::FileOps* file_ops);

}  // namespace sluice::runtime
