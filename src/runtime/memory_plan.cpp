// Probing a few files for the working-memory estimate, and the arithmetic of the minimum.
#include "runtime/memory_plan.hpp"

#include <algorithm>

#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"
#include "sluice/memory/aligned_buffer.hpp"
#include "stages/jpeg_decoder.hpp"
#include "stages/read_file.hpp"

namespace sluice::runtime {

namespace {
// Sizes come from stat (cheap), dimensions from reading headers (a file read each): many of the
// first, fewer of the second, spread evenly over the data set. Images larger than any probed
// one grow their worker's buffers at run time; the headroom makes that rare.
constexpr int kSizeProbes = 1024;
constexpr int kHeaderProbes = 32;
constexpr double kHeadroom = 1.25;
constexpr std::uint64_t kDiskIndexEntryBytes = 136;
// The resampler's intermediate rows and tap tables, per output row byte: generous, they are small.
constexpr std::uint64_t kScratchPerRowByte = 16;
}  // namespace

std::string MemoryPlan::explain() const {
  return "ring " + std::to_string(min_slots) + " x " + format_bytes(batch_bytes) + " + " + std::to_string(threads) +
         " workers x " + format_bytes(workspace_bytes()) + " + indices " + format_bytes(index_bytes) + " = " +
         format_bytes(minimum());
}

MemoryPlan plan_memory(const stages::PipelinePlan& plan, std::size_t sample_bytes, int threads, int min_prefetch) {
  MemoryPlan m;
  m.threads = threads;
  m.min_slots = min_prefetch + 2;
  m.batch_bytes = AlignedBuffer::page_capacity(sample_bytes * static_cast<std::size_t>(plan.batch_size)) +
                  sizeof(std::int32_t) * static_cast<std::uint64_t>(plan.batch_size);
  const auto n = static_cast<std::int64_t>(plan.dataset.items.size());
  // EpochOrder: the permutation of all items, this shard's order, the shuffle buffer; and the
  // batch-to-slot table.
  m.index_bytes = 8 * static_cast<std::uint64_t>(n + n / plan.order.shard_world + 1 + plan.order.shuffle_buffer) +
                  4 * static_cast<std::uint64_t>(n / plan.batch_size + 1);
  if (plan.cache && std::holds_alternative<DiskCache>(plan.cache->store)) {
    // The disk cache keeps an in-memory index: about 136 bytes an entry plus its path
    // (docs/decisions/disk-cache.md).
    for (const Item& item : plan.dataset.items) m.index_bytes += kDiskIndexEntryBytes + item.path.size();
  }

  const stages::SampleProgramConfig& config = plan.program;
  const int channels = config.decode.color == Color::kGrey ? 1 : 3;
  std::uint64_t largest_file = 0;
  std::uint64_t largest_image = 0;
  std::uint64_t decoder_bytes = 0;  // the decoder's own working memory (component planes)
  const std::int64_t size_step = std::max<std::int64_t>(1, n / kSizeProbes);
  for (std::int64_t i = 0; i < n; i += size_step) {
    try {
      largest_file = std::max(largest_file, stages::file_size(plan.dataset.items[static_cast<std::size_t>(i)].path,
                                                              plan.program.file_ops));
    } catch (const Error&) {
      // A missing file says nothing about memory; the run will report it.
    }
  }
  AlignedBuffer bytes;
  stages::JpegDecoder decoder(config.decode);
  const std::int64_t header_step = std::max<std::int64_t>(1, n / kHeaderProbes);
  for (std::int64_t i = 0; i < n && m.probed < kHeaderProbes; i += header_step) {
    try {
      const auto& item = plan.dataset.items[static_cast<std::size_t>(i)];
      const std::size_t size = stages::read_file(item.path, bytes, config.read.max_file_size, plan.program.file_ops);
      const stages::JpegHeader h = decoder.read_header({bytes.data(), size});
      largest_image = std::max<std::uint64_t>(largest_image, static_cast<std::uint64_t>(h.width) * h.height * channels);
      if (const std::size_t planes = stages::JpegDecoder::working_bytes(h.width, h.height); planes > 0) {
        decoder_bytes = std::max<std::uint64_t>(decoder_bytes, AlignedBuffer::rounded_capacity(planes));
      }
      ++m.probed;
    } catch (const Error&) {
      // A bad file says nothing about memory; the run will report it.
    }
  }
  const auto with_headroom = [](std::uint64_t v) {
    return AlignedBuffer::rounded_capacity(static_cast<std::size_t>(static_cast<double>(v) * kHeadroom) + 64);
  };
  const std::uint64_t out_row = static_cast<std::uint64_t>(config.output.width) * channels;
  const std::uint64_t out = out_row * static_cast<std::uint64_t>(config.output.height);
  m.file_bytes = largest_file ? with_headroom(largest_file) : 0;
  m.decode_bytes = (largest_image ? with_headroom(largest_image) : 0) + decoder_bytes +
                   AlignedBuffer::rounded_capacity(out) + AlignedBuffer::rounded_capacity(out_row * kScratchPerRowByte);
  return m;
}

}  // namespace sluice::runtime
