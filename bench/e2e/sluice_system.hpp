// The sluice side of loader_compare: the scenario's transform written with the public API only
// (#include <sluice/sluice.hpp>), timed the way every peer is timed: one untimed warm-up epoch,
// then the timed epochs, the consumer touching each batch as a training step would.
#pragma once

#include <cstdint>
#include <string>

#include <sluice/sluice.hpp>

#include "scenario.hpp"

namespace sluice::bench {

enum class EncodedFiles : std::uint8_t { kRead, kInMemory };

// The scenario's pipeline over Pipeline::from_folder(dir), unbuilt: what run_sluice() measures
// (and epoch_marks profiles).
sluice::Pipeline make_sluice_pipeline(const std::string& dir, const Scenario& scenario, EncodedFiles files);

// Builds Pipeline::from_folder(dir) for the scenario with BuildOptions{.threads, .seed} and
// iterates 1 + scenario.epochs epochs; the first (untimed in the rate) is timed on its own. Throws std::runtime_error when sluice's epoch does not
// hold expected_images samples (the systems would not be reading the same files), and whatever
// sluice throws.
// EncodedFiles::kInMemory: the same pipeline with .cache(MemoryCache{}) after read(), which from
// the second epoch on works from files held in memory, as the decode limit does.
LoaderResult run_sluice(const std::string& dir, const Scenario& scenario, std::int64_t expected_images,
                        EncodedFiles files = EncodedFiles::kRead);

}  // namespace sluice::bench
