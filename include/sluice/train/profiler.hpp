// Profiler: the training core's memory over time. Attached to an Allocator as its observer, it
// records every allocation's effect on the in-use bytes of its category (weights, gradients,
// optimizer state, activations, workspace), the total in use and the reserved bytes; it takes
// samples of counters the allocator does not see (the input pipeline's host and pinned bytes,
// given as plain numbers by the caller, so the train module needs no pipeline header); it keeps
// per-step peaks; and it writes everything as a Chrome trace (JSON, the "Trace Event Format"):
// one counter track ("ph": "C") per category plus "in use" and "reserved", and a slice
// ("ph": "X") per step and per named phase. Perfetto (ui.perfetto.dev) and chrome://tracing
// open it; scripts/render-trace draws its counter tracks as a PNG.
//
// Cost: one short, uncontended mutex and a 24-byte record per allocator event (a few hundred a
// training step). Without a profiler the allocator only tests a null pointer.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/train/allocator.hpp"
#include "sluice/train/category.hpp"

namespace sluice::train {

struct ProfilerOptions {
  // Samples kept at most (24 B each); later ones are counted in dropped_samples, not kept. The
  // peaks stay exact either way.
  std::size_t max_samples = std::size_t{1} << 22;
};

// What one step held at its highest.
struct StepMemory {
  std::int64_t step = 0;
  double start_seconds = 0;  // since the profiler started
  double seconds = 0;
  std::uint64_t peak_in_use_bytes = 0;
  std::uint64_t reserved_bytes = 0;  // at the step's end
  std::array<std::uint64_t, kTensorCategoryCount> peak_by_category{};
};

struct ProfileSummary {
  std::array<std::uint64_t, kTensorCategoryCount> peak_by_category{};  // allocator and samples
  std::uint64_t peak_in_use_bytes = 0;   // the allocator's, all its categories together
  std::uint64_t peak_reserved_bytes = 0;
  std::uint64_t events = 0;              // allocator events seen
  std::uint64_t samples = 0;             // counter samples kept
  std::uint64_t dropped_samples = 0;
  std::int64_t steps = 0;
};

class Profiler final : public AllocatorObserver {
 public:
  // Starts observing `allocator` (which must outlive the profiler), beginning with its current
  // use; the destructor detaches.
  explicit Profiler(Allocator& allocator, ProfilerOptions options = {});
  ~Profiler() override;
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  void on_allocator_event(const AllocatorEventInfo& info) noexcept override;

  // A sample of a counter the allocator does not keep: the bytes of `category` (kInputHost,
  // kInputPinned) now.
  void sample(TensorCategory category, std::uint64_t bytes);

  // Steps: per-step peaks, and a "step N" slice in the trace. Steps do not nest.
  void begin_step(std::int64_t step);
  void end_step();
  // A named slice ("forward", "evaluate"); slices nest inside steps and each other.
  void begin(std::string_view name);
  void end();

  const std::vector<StepMemory>& steps() const { return steps_; }
  ProfileSummary summary() const;
  // The summary as a table: peak per category, the total in use and the reserved bytes apart.
  // `format` writes a byte count (default: sluice::format_bytes, binary units).
  std::string summary_table(const std::function<std::string(std::uint64_t)>& format = {}) const;

  // The Chrome trace as JSON text, and written to `path` atomically (a temporary beside it, fsync,
  // rename), replacing only a trace this profiler wrote; throws sluice::Error naming the path and
  // the reason when it cannot be written, or when something else (a symlink, another file) is there.
  std::string trace_json() const;
  void write_trace(const std::string& path) const;
  // Throws what write_trace would for a path it cannot write, before a run.
  static void check_trace_output(const std::string& path);

  // Counter tracks: the categories by index_of(), then these two.
  static constexpr std::size_t kInUseTrack = kTensorCategoryCount;
  static constexpr std::size_t kReservedTrack = kTensorCategoryCount + 1;
  static constexpr std::size_t kTrackCount = kTensorCategoryCount + 2;
  // "weights", ..., "input (pinned)", "in use (allocator total)", "reserved (allocator)".
  static std::string track_name(std::size_t track);

 private:
  struct Sample {
    std::uint64_t ns;     // since start_
    std::uint64_t bytes;
    std::uint32_t track;
  };
  struct Slice {
    std::string name;
    std::uint64_t begin_ns;
    std::uint64_t end_ns;
    int depth;
  };
  std::uint64_t now_ns() const;
  void record(std::uint64_t ns, std::size_t track, std::uint64_t bytes);  // mutex_ held

  Allocator& allocator_;
  ProfilerOptions options_;
  std::chrono::steady_clock::time_point start_;
  mutable std::mutex mutex_;
  std::vector<Sample> samples_;
  std::uint64_t dropped_ = 0;
  std::uint64_t events_ = 0;
  std::array<std::uint64_t, kTrackCount> current_{};
  std::array<std::uint64_t, kTrackCount> peak_{};
  bool in_step_ = false;
  StepMemory step_;
  std::vector<StepMemory> steps_;
  std::vector<Slice> slices_;
  std::vector<std::size_t> open_;  // indices into slices_ of the slices begun and not ended
};

}  // namespace sluice::train
