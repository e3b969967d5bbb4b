// The memory profiler: allocator events and external samples as counter tracks, per-step peaks,
// and the Chrome trace writer.
#include "sluice/train/profiler.hpp"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "sluice/detail/core/atomic_file.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"

namespace sluice::train {

namespace {
// How every trace starts: the writer replaces only a file that starts so.
constexpr std::string_view kTraceStart = "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"sluice train profiler\"";
}  // namespace

Profiler::Profiler(Allocator& allocator, ProfilerOptions options)
    : allocator_(allocator), options_(options), start_(std::chrono::steady_clock::now()) {
  const AllocatorStats s = allocator_.stats();
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < kTensorCategoryCount; ++i) record(0, i, s.by_category[i].in_use_bytes);
  record(0, kInUseTrack, s.in_use_bytes);
  record(0, kReservedTrack, s.reserved_bytes);
  allocator_.set_observer(this);
}

Profiler::~Profiler() { allocator_.set_observer(nullptr); }

std::string Profiler::track_name(std::size_t track) {
  if (track == kInUseTrack) return "in use (allocator total)";
  if (track == kReservedTrack) return "reserved (allocator)";
  return std::string(to_string(static_cast<TensorCategory>(track)));
}

std::uint64_t Profiler::now_ns() const {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count());
}

void Profiler::record(std::uint64_t ns, std::size_t track, std::uint64_t bytes) {
  current_[track] = bytes;
  peak_[track] = std::max(peak_[track], bytes);
  if (in_step_) {
    if (track < kTensorCategoryCount) {
      step_.peak_by_category[track] = std::max(step_.peak_by_category[track], bytes);
    } else if (track == kInUseTrack) {
      step_.peak_in_use_bytes = std::max(step_.peak_in_use_bytes, bytes);
    }
  }
  if (samples_.size() >= options_.max_samples) {
    ++dropped_;
    return;
  }
  try {
    samples_.push_back({ns, bytes, static_cast<std::uint32_t>(track)});
  } catch (...) {  // under the allocator's lock: never throw, lose the sample instead
    ++dropped_;
  }
}

void Profiler::on_allocator_event(const AllocatorEventInfo& info) noexcept {
  const std::uint64_t ns = now_ns();
  std::lock_guard lock(mutex_);
  ++events_;
  record(ns, index_of(info.category), info.category_in_use_bytes);
  record(ns, kInUseTrack, info.in_use_bytes);
  if (info.reserved_bytes != current_[kReservedTrack]) record(ns, kReservedTrack, info.reserved_bytes);
}

void Profiler::sample(TensorCategory category, std::uint64_t bytes) {
  const std::uint64_t ns = now_ns();
  std::lock_guard lock(mutex_);
  record(ns, index_of(category), bytes);
}

void Profiler::begin_step(std::int64_t step) {
  const std::uint64_t ns = now_ns();
  {
    std::lock_guard lock(mutex_);
    if (in_step_) throw Error(ErrorCode::kInvalidArgument, "Profiler: begin_step inside a step");
    in_step_ = true;
    step_ = StepMemory{};
    step_.step = step;
    step_.start_seconds = 1e-9 * static_cast<double>(ns);
    step_.peak_in_use_bytes = current_[kInUseTrack];
    for (std::size_t i = 0; i < kTensorCategoryCount; ++i) step_.peak_by_category[i] = current_[i];
  }
  begin("step " + std::to_string(step));
}

void Profiler::end_step() {
  end();
  const std::uint64_t ns = now_ns();
  std::lock_guard lock(mutex_);
  if (!in_step_) throw Error(ErrorCode::kInvalidArgument, "Profiler: end_step outside a step");
  in_step_ = false;
  step_.seconds = 1e-9 * static_cast<double>(ns) - step_.start_seconds;
  step_.reserved_bytes = current_[kReservedTrack];
  steps_.push_back(step_);
}

void Profiler::begin(std::string_view name) {
  const std::uint64_t ns = now_ns();
  std::lock_guard lock(mutex_);
  slices_.push_back({std::string(name), ns, ns, static_cast<int>(open_.size())});
  open_.push_back(slices_.size() - 1);
}

void Profiler::end() {
  const std::uint64_t ns = now_ns();
  std::lock_guard lock(mutex_);
  if (open_.empty()) throw Error(ErrorCode::kInvalidArgument, "Profiler: end() without begin()");
  slices_[open_.back()].end_ns = ns;
  open_.pop_back();
}

ProfileSummary Profiler::summary() const {
  std::lock_guard lock(mutex_);
  ProfileSummary s;
  for (std::size_t i = 0; i < kTensorCategoryCount; ++i) s.peak_by_category[i] = peak_[i];
  s.peak_in_use_bytes = peak_[kInUseTrack];
  s.peak_reserved_bytes = peak_[kReservedTrack];
  s.events = events_;
  s.samples = samples_.size();
  s.dropped_samples = dropped_;
  s.steps = static_cast<std::int64_t>(steps_.size());
  return s;
}

std::string Profiler::summary_table(const std::function<std::string(std::uint64_t)>& format) const {
  const auto bytes = [&](std::uint64_t b) { return format ? format(b) : format_bytes(b); };
  const ProfileSummary s = summary();
  std::string out = "memory profile (" + std::to_string(s.steps) + " steps, " + std::to_string(s.events) +
                    " allocator events):\n";
  char line[160];
  std::snprintf(line, sizeof line, "  %-28s %14s\n", "category", "peak in use");
  out += line;
  for (std::size_t i = 0; i < kTensorCategoryCount; ++i) {
    const bool external = i == index_of(TensorCategory::kInputHost) || i == index_of(TensorCategory::kInputPinned);
    std::snprintf(line, sizeof line, "  %-28s %14s%s\n", track_name(i).c_str(), bytes(s.peak_by_category[i]).c_str(),
                  external ? "  (input pipeline, outside the allocator)" : "");
    out += line;
  }
  std::snprintf(line, sizeof line, "  %-28s %14s  (allocator: live tensors at the highest point)\n",
                "in use, peak", bytes(s.peak_in_use_bytes).c_str());
  out += line;
  std::snprintf(line, sizeof line, "  %-28s %14s  (allocator: regions taken from the device, used or not)\n",
                "reserved, peak", bytes(s.peak_reserved_bytes).c_str());
  out += line;
  if (s.dropped_samples > 0) {
    out += "  (" + std::to_string(s.dropped_samples) + " samples beyond ProfilerOptions::max_samples not traced)\n";
  }
  return out;
}

std::string Profiler::trace_json() const {
  using nlohmann::json;
  std::lock_guard lock(mutex_);
  std::string out = std::string(kTraceStart) + ",\"unit\":\"bytes\"},\"traceEvents\":[";
  bool first = true;
  auto add = [&](const json& e) {
    if (!first) out += ",\n";
    first = false;
    out += e.dump();
  };
  add({{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", "sluice training memory"}}}});
  add({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 1}, {"args", {{"name", "training loop"}}}});
  for (const Sample& s : samples_) {
    add({{"name", track_name(s.track)}, {"ph", "C"}, {"pid", 1}, {"ts", 1e-3 * static_cast<double>(s.ns)},
         {"args", {{"bytes", s.bytes}}}});
  }
  for (const Slice& sl : slices_) {
    add({{"name", sl.name}, {"ph", "X"}, {"pid", 1}, {"tid", 1}, {"ts", 1e-3 * static_cast<double>(sl.begin_ns)},
         {"dur", 1e-3 * static_cast<double>(sl.end_ns - sl.begin_ns)}});
  }
  out += "]}\n";
  return out;
}

namespace {

core::OutputFile trace_output(const std::string& path) {
  return core::OutputFile{.path = path, .noun = "profile trace", .mode = 0644,
                          .is_ours = [](std::string_view head) { return head.starts_with(kTraceStart); }};
}

}  // namespace

void Profiler::check_trace_output(const std::string& path) { core::check_output(trace_output(path)); }

void Profiler::write_trace(const std::string& path) const {
  core::write_file_atomically(trace_output(path), trace_json());
}

}  // namespace sluice::train
