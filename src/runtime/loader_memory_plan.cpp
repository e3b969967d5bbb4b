// Probing a few files for the working-memory estimate, and the arithmetic of the minimum.
#include "runtime/loader_memory_plan.hpp"

#include <algorithm>
#include <span>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"
#include "runtime/device_delivery.hpp"
#include "runtime/executor.hpp"
#include "runtime/loader_tuning.hpp"
#include "sluice/detail/memory/aligned_buffer.hpp"
#include "stages/decode/image_decoder.hpp"
#include "stages/decode/jpeg_decoder.hpp"
#include "stages/source/read_file.hpp"
#include "stages/program/sample_program.hpp"

namespace sluice::runtime {

namespace {
// Sizes come from stat (cheap), dimensions from reading headers (a file read each): many of the
// first, fewer of the second, spread evenly over the data set.
constexpr int kSizeProbes = 1024;
constexpr int kHeaderProbes = 32;
constexpr std::uint64_t kDiskIndexEntryBytes = 136;

// The header probes: each reads one item's header into the plan's WorkspaceProbes, and counts
// its decoded-cache entry for the decoded set's estimate.
class HeaderProber {
 public:
  HeaderProber(const stages::ItemTable& items, const stages::SampleProgramConfig& config, stages::WorkspaceProbes& probes)
      : items_(items), config_(config), probes_(probes), reader_(config.file_ops), decoder_(config.decode),
        others_(config.decode), channels_(config.decode.color == Color::kGrey ? 1 : 3) {}

  // False where item i cannot be read now: a bad or missing file says nothing about memory (the
  // run will report it), and a remote shard not fetched yet has no bytes here.
  bool probe(std::int64_t i) {
    try {
      const std::span<const std::uint8_t> file = reader_.read(items_, i, bytes_, config_.read.max_file_size);
      if (stages::ImageDecoder::handles(file)) {
        const stages::ImageProbe p = others_.probe(file);
        count(p.width, p.height);
        probes_.formats = std::max(probes_.formats, others_.workspace_requirements(p));
        return true;
      }
      const stages::JpegHeader h = decoder_.read_header(file);
      count(h.width, h.height);
      probes_.decoder.include(stages::JpegDecoder::workspace_requirements(h));
      return true;
    } catch (const Error&) {
      return false;
    }
  }
  int probed() const { return probed_; }
  std::uint64_t entry_sum() const { return entry_sum_; }

 private:
  void count(int width, int height) {
    const auto w = static_cast<std::uint64_t>(width), h = static_cast<std::uint64_t>(height);
    probes_.largest_image = std::max<std::uint64_t>(probes_.largest_image, w * h * static_cast<std::uint64_t>(channels_));
    entry_sum_ += stages::SampleProgram::decoded_entry_bytes(w, h, channels_);
    ++probed_;
  }

  const stages::ItemTable& items_;
  const stages::SampleProgramConfig& config_;
  stages::WorkspaceProbes& probes_;
  stages::ItemReader reader_;
  AlignedBuffer bytes_;
  stages::JpegDecoder decoder_;
  stages::ImageDecoder others_;
  int channels_;
  int probed_ = 0;
  std::uint64_t entry_sum_ = 0;  // the decoded-cache entries of the probed items
};

}  // namespace

std::string LoaderMemoryPlan::explain() const {
  return "ring " + std::to_string(min_slots) + " x " + format_bytes(batch_bytes) + " + " + std::to_string(threads) +
         " workers x " + format_bytes(workspace_bytes()) + " + indices " + format_bytes(index_bytes) + " + items " +
         format_bytes(items_bytes) + (remote_bytes > 0 ? " + remote " + format_bytes(remote_bytes) : std::string()) +
         (resume_bytes > 0 ? " + resume points " + format_bytes(resume_bytes) : std::string()) + " = " + format_bytes(minimum());
}

LoaderMemoryPlan plan_memory(const stages::ResolvedPipeline& plan, std::size_t sample_bytes, int threads, int min_prefetch) {
  LoaderMemoryPlan m;
  m.threads = threads;
  m.min_slots = min_prefetch + 2;
  // A slot: the batch (64-byte aligned), mixup()/cutmix()'s soft labels and scratch, the labels.
  const std::size_t mix = plan.batch_mix.choices.empty()
                              ? 0
                              : stages::batch_mix_slot_bytes(plan.batch_size, plan.batch_mix.choices.front().num_classes, sample_bytes);
  m.batch_bytes = AlignedBuffer::page_capacity((sample_bytes * static_cast<std::size_t>(plan.batch_size) + 63) / 64 * 64 + mix) +
                  sizeof(std::int32_t) * static_cast<std::uint64_t>(plan.batch_size);
  const stages::ItemTable& items = plan.dataset.items;
  const std::int64_t n = items.size();
  // EpochOrder's arrays and scratch, and the batch-to-slot table; the item table itself.
  m.index_bytes = stages::EpochOrder::memory_bytes(plan.order) + 4 * static_cast<std::uint64_t>(n / plan.batch_size + 1);
  m.items_bytes = items.bytes();
  m.remote_bytes = plan.remote_bytes;
  // The JPEG resume points the sample program keeps per item (stages/program/resume_store.hpp),
  // where it decodes crops from them.
  m.resume_bytes = stages::SampleProgram::keeps_resume_points(plan.program) ? stages::ResumeStore::capacity_bytes(n) : 0;
  if (plan.cache && std::holds_alternative<DiskCache>(plan.cache->store)) {
    // The disk cache keeps an in-memory index: about 136 bytes an entry plus its path
    // (docs/decisions/disk-cache.md).
    std::string path;
    for (std::int64_t i = 0; i < n; ++i) {
      path.clear();
      items.append_path(i, path);
      m.index_bytes += kDiskIndexEntryBytes + path.size();
    }
  }

  const stages::SampleProgramConfig& config = plan.program;
  stages::WorkspaceProbes probes;
  probes.kind = items.kind();
  std::uint64_t file_sum = 0;   // of the size probes, for the encoded set
  std::int64_t files = 0;
  stages::ItemReader reader(plan.program.file_ops);
  const std::int64_t size_step = std::max<std::int64_t>(1, n / kSizeProbes);
  for (std::int64_t i = 0; i < n; i += size_step) {
    try {
      const std::uint64_t size = reader.size(items, i);
      probes.largest_file = std::max(probes.largest_file, size);
      file_sum += size;
      ++files;
    } catch (const Error&) {
      // A missing file says nothing about memory; the run will report it.
    }
  }
  HeaderProber headers(items, config, probes);
  std::vector<std::int64_t> readable;
  bool missed = false;
  const std::int64_t header_step = std::max<std::int64_t>(1, n / kHeaderProbes);
  for (std::int64_t i = 0; i < n && headers.probed() < kHeaderProbes; i += header_step) {
    if (headers.probe(i)) {
      readable.push_back(i);
    } else {
      missed = true;
    }
  }
  // Remote shards not fetched yet (on a cold cache all but epoch 0's first, which build() fetches
  // with the index files) cannot be read here: the probes they missed are taken from the items
  // after those that could be read (the same shard's: a shard's items are contiguous), so the
  // plan still sees kHeaderProbes headers and sizes a worker's buffers, faulted in at set-up
  // (SampleProgram::make_workspace), as it does for the same set on a local disk.
  for (std::size_t k = 0; missed && k < readable.size() && headers.probed() < kHeaderProbes; ++k) {
    const std::int64_t end = k + 1 < readable.size() ? readable[k + 1] : n;
    for (std::int64_t i = readable[k] + 1; i < end && headers.probed() < kHeaderProbes && headers.probe(i); ++i) {
    }
  }
  m.probed = headers.probed();
  const std::uint64_t entry_sum = headers.entry_sum();
  // Each buffer's size is said beside the code that uses it; the plan only adds them up.
  m.share = stages::SampleProgram::workspace_requirements(config, probes);
  // Means times the items, rounded up: a cache sized so holds every item when the probes are
  // typical (uniform data sets such as CIFAR-10 and Fashion-MNIST: exactly).
  const auto item_count = static_cast<std::uint64_t>(n);
  if (files > 0) m.encoded_set_bytes = (file_sum * item_count + static_cast<std::uint64_t>(files) - 1) / static_cast<std::uint64_t>(files);
  if (m.probed > 0) m.decoded_set_bytes = (entry_sum * item_count + static_cast<std::uint64_t>(m.probed) - 1) / static_cast<std::uint64_t>(m.probed);
  return m;
}

PipelineMemoryPlan describe_memory(const stages::ResolvedPipeline& plan) {
  const BuildOptions& options = plan.options;
  const int threads = options.threads == autotune ? Executor::available_cores() : options.threads;
  const stages::SampleProgram program(plan.program, stages::SampleCaches{});
  const LoaderTuning tuning(TuningInputs{.threads = threads, .batch_size = plan.batch_size,
                                         .fixed_in_flight = options.samples_in_flight,
                                         .autotune = options.threads == autotune, .prefetch = plan.prefetch,
                                         .prefetch_set = plan.prefetch_set,
                                         .fixed_depth = DeviceDelivery::wanted(plan)});
  const LoaderMemoryPlan m = plan_memory(plan, program.sample_bytes(), threads, tuning.min_prefetch());
  PipelineMemoryPlan out;
  auto at = [&out](MemoryUse use) -> std::uint64_t& { return out.minimum[static_cast<std::size_t>(use)]; };
  // The uses each worker's share is reserved under (SampleProgram::make_workspace).
  at(MemoryUse::kReadBuffers) = m.share.file * static_cast<std::uint64_t>(m.threads);
  // With the decoders' buffers: the resume points the sample program keeps for them.
  at(MemoryUse::kDecodeBuffers) = (m.share.total() - m.share.file) * static_cast<std::uint64_t>(m.threads) + m.resume_bytes;
  at(MemoryUse::kShuffle) = m.index_bytes;
  at(MemoryUse::kItems) = m.items_bytes;  // the item table, held from build() in the job's budget too
  at(MemoryUse::kRemote) = m.remote_bytes;
  at(MemoryUse::kBatches) = m.batch_bytes * static_cast<std::uint64_t>(m.min_slots);
  out.slot_bytes = m.batch_bytes;
  out.min_slots = m.min_slots;
  out.start_slots = tuning.start_prefetch() + 2;
  out.items = static_cast<std::int64_t>(plan.dataset.items.size());
  out.decoded_set_bytes = m.decoded_set_bytes;
  out.encoded_set_bytes = m.encoded_set_bytes;
  out.probed = m.probed;
  out.explain = m.explain();
  return out;
}

}  // namespace sluice::runtime
