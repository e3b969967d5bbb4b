// The OpenCV peer: the loader a competent engineer writes by hand with OpenCV and std::thread,
// as the baseline sluice should clearly beat. Per image: cv::imread (IMREAD_COLOR), the
// scenario's geometry (shorter-side resize + center crop, random resized crop, or pad + random
// crop), horizontal flip where the transform has one, then float32 CHW normalised (RGB) straight
// into a batch buffer allocated once. `threads` persistent std::threads share each batch through
// an atomic image counter (load balanced across unequal image sizes); the calling thread only
// waits for and touches finished batches, as a training loop would.
//
// cv::setNumThreads(1) while it runs: the parallelism is ours, and OpenCV's own pool inside
// cv::resize would oversubscribe the cores (restored afterwards).
#pragma once

#include "image_list.hpp"
#include "scenario.hpp"

namespace sluice::bench {

// Runs one untimed warm-up epoch (page cache, thread start, scratch buffers), then
// scenario.epochs timed epochs over list in its order. Throws std::runtime_error naming a file
// OpenCV cannot read.
LoaderResult run_opencv_loop(const ImageList& list, const Scenario& scenario);

}  // namespace sluice::bench
