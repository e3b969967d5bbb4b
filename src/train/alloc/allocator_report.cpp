// The allocator's reports and self-check: the text sluice::OutOfMemory carries and report()
// returns (stats, free chunks per bin, an occupancy map of the regions; at most kMaxLines lines,
// at most 80 columns), and check_invariants() for tests.
#include <algorithm>
#include <cstdarg>
#include <cstdio>

#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"
#include "sluice/train/allocator.hpp"
#include "sluice/train/out_of_memory.hpp"

namespace sluice {
namespace {

constexpr std::size_t kMaxLines = 60;
constexpr std::size_t kMapColumns = 64;
constexpr std::size_t kMaxColumns = 80;

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  char text[256];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  return text;
}

std::string bytes(std::uint64_t n) { return format_bytes(n); }

// `text` broken at spaces into lines of at most kMaxColumns, each indented by `indent`.
std::string wrap(const std::string& text, std::size_t indent) {
  std::string out, line(indent, ' ');
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find(' ', at);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(at, end - at);
    if (line.size() > indent && line.size() + 1 + word.size() > kMaxColumns) {
      out += line + "\n";
      line = std::string(indent + 2, ' ');
    } else if (line.size() > indent) {
      line += ' ';
    }
    line += word;
    at = end + 1;
  }
  return out + line;
}

std::size_t count_lines(const std::string& text) { return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')); }

[[noreturn]] void broken(const std::string& what) {
  throw Error(ErrorCode::kInternal, "allocator invariant broken: " + what);
}

}  // namespace

std::string Allocator::report() const {
  std::lock_guard lock(mutex_);
  return report_locked({});
}

void Allocator::throw_out_of_memory(std::uint64_t requested, std::uint64_t rounded,
                                    std::optional<TensorCategory> category, const std::string& why) const {
  std::string request =
      "OUT OF MEMORY: " +
      (category ? format("allocate(%llu B = %s, %s), rounded to %s", static_cast<unsigned long long>(requested),
                         bytes(requested).c_str(), std::string(to_string(*category)).c_str(), bytes(rounded).c_str())
                : format("preallocating %s", bytes(requested).c_str())) +
      "\n" + wrap("why: " + why, 2) + "\n";
  throw OutOfMemory(report_locked(request), requested, category, stats_locked());
}

std::string Allocator::report_locked(const std::string& request_lines) const {
  const AllocatorStats s = stats_locked();
  std::string out;
  std::string mode = options_.mode == AllocatorMode::kPreallocate ? "preallocated " + bytes(options_.limit)
                     : options_.limit != 0                        ? "grows up to " + bytes(options_.limit)
                                                                  : "grows without limit";
  out += "allocator '" + options_.name + "' on " + backing_->describe() + ", " + mode + "\n";
  out += request_lines;
  out += format("in use      %s in %llu blocks, peak %s, requested %s\n", bytes(s.in_use_bytes).c_str(),
                static_cast<unsigned long long>(s.live_allocations), bytes(s.peak_in_use_bytes).c_str(),
                bytes(s.requested_bytes).c_str());
  out += format("reserved    %s in %llu region%s, %llu allocations since the start\n", bytes(s.reserved_bytes).c_str(),
                static_cast<unsigned long long>(s.regions), s.regions == 1 ? "" : "s",
                static_cast<unsigned long long>(s.total_allocations));
  out += format("free        %s, largest free block %s, fragmentation %.3f\n", bytes(s.free_bytes).c_str(),
                bytes(s.largest_free_block).c_str(), s.fragmentation);
  for (std::size_t i = 0; i < kTensorCategoryCount; ++i) {
    const CategoryStats& c = s.by_category[i];
    if (c.in_use_bytes == 0 && c.peak_in_use_bytes == 0) continue;
    out += format("  %-16s %12s in %6llu blocks, peak %s\n",
                  std::string(to_string(static_cast<TensorCategory>(i))).c_str(), bytes(c.in_use_bytes).c_str(),
                  static_cast<unsigned long long>(c.live_allocations), bytes(c.peak_in_use_bytes).c_str());
  }

  // Free chunks per bin; empty bins are left out (21 rows of zeros hide the few that matter).
  out += "free chunks by bin:\n";
  if (nonempty_bins_ == 0) {
    out += "  (none)\n";
  } else {
    out += "  bin  chunk sizes                chunks          bytes        largest\n";
    for (int b = 0; b < kBinCount; ++b) {
      const Bin& bin = bins_[b];
      if (bin.empty()) continue;
      std::uint64_t total = 0;
      for (const FreeKey& k : bin) total += k.size;
      const std::uint64_t low = kGranularity << b;
      const std::string high = b == kBinCount - 1 ? std::string("any") : bytes(2 * low);
      const std::string range = format("[%s, %s)", bytes(low).c_str(), high.c_str());
      out += format("  %3d  %-24s %8zu %14s %14s\n", b, range.c_str(), bin.size(), bytes(total).c_str(),
                    bytes(bin.rbegin()->size).c_str());
    }
  }

  // The occupancy map: each character a cell of the regions, '.' when the whole cell is free,
  // the category's initial when blocks of one category use part of it, '#' for several. The cell
  // is the smallest power-of-two multiple of 256 B that fits every region into the lines left.
  out += format("occupancy map (. free, W weights, G gradients, O optimizer state, A activations,\n");
  out += format("  w workspace, I input (host), P input (pinned), # several), per region:\n");
  const std::size_t used_lines = count_lines(out);
  const std::size_t budget = used_lines + 2 <= kMaxLines ? kMaxLines - used_lines - 1 : 1;  // - the scale line
  std::size_t shown = regions_.size();
  if (shown > budget) shown = budget > 1 ? budget - 1 : 0;  // one line for "... more regions"
  const std::size_t map_lines = budget - (shown < regions_.size() ? 1 : 0);
  std::uint64_t cell = kGranularity;
  auto lines_for = [&](std::uint64_t cell_bytes) {
    std::size_t lines = 0;
    for (std::size_t i = 0; i < shown; ++i) {
      const std::uint64_t cells = (regions_[i].size + cell_bytes - 1) / cell_bytes;
      lines += static_cast<std::size_t>((cells + kMapColumns - 1) / kMapColumns);
    }
    return lines;
  };
  while (lines_for(cell) > map_lines) cell *= 2;
  out += regions_.empty() ? std::string("  (no regions yet)\n") : "  1 character = " + bytes(cell) + "\n";
  for (std::size_t i = 0; i < shown; ++i) {
    const Region& r = regions_[i];
    const std::uint64_t cells = (r.size + cell - 1) / cell;
    std::string row;
    Handle h = r.first;
    for (std::uint64_t k = 0; k < cells; ++k) {
      const std::uintptr_t begin = r.base + k * cell;
      const std::uintptr_t end = std::min<std::uintptr_t>(begin + cell, r.base + r.size);
      while (chunks_[h].addr + chunks_[h].size <= begin) h = chunks_[h].next;
      char mark = '.';
      for (Handle j = h; j != kNone && chunks_[j].addr < end; j = chunks_[j].next) {
        if (!chunks_[j].in_use) continue;
        const char initial = category_initial(chunks_[j].category);
        mark = mark == '.' || mark == initial ? initial : '#';
      }
      row += mark;
    }
    for (std::size_t at = 0; at < row.size(); at += kMapColumns) {
      const std::string label = at == 0 ? format("  r%-3zu", i) : std::string(6, ' ');
      out += label + row.substr(at, kMapColumns) + "\n";
    }
  }
  if (shown < regions_.size()) {
    std::uint64_t rest = 0;
    for (std::size_t i = shown; i < regions_.size(); ++i) rest += regions_[i].size;
    out += format("  ... %zu more regions, %s\n", regions_.size() - shown, bytes(rest).c_str());
  }
  return out;
}

void Allocator::check_invariants() const {
  std::lock_guard lock(mutex_);
  std::uint64_t reserved = 0, in_use = 0, requested = 0, live = 0;
  std::size_t free_chunks = 0;
  std::array<CategoryStats, kTensorCategoryCount> by_category{};
  for (std::size_t i = 0; i < regions_.size(); ++i) {
    const Region& r = regions_[i];
    if (i > 0 && regions_[i - 1].base + regions_[i - 1].size > r.base) broken("regions overlap or are out of order");
    if (r.base % kGranularity != 0 || r.size % kGranularity != 0 || r.size == 0) broken("region not 256-byte aligned");
    reserved += r.size;
    std::uintptr_t expect = r.base;
    Handle prev = kNone;
    for (Handle h = r.first; h != kNone; h = chunks_[h].next) {
      if (h >= chunks_.size()) broken("chunk handle out of range");
      const Chunk& c = chunks_[h];
      if (c.addr != expect) broken(format("chunk at %#zx does not follow its left neighbour", c.addr));
      if (c.prev != prev) broken("chunk's prev link disagrees with the list");
      if (c.size == 0 || c.size % kGranularity != 0) broken("chunk size not a positive multiple of 256");
      if (c.in_use) {
        const auto it = live_.find(c.addr);
        if (it == live_.end() || it->second != h) broken("used chunk missing from the live map");
        if (c.requested > c.size || c.size - Allocator::rounded_size(c.requested) >= kGranularity) {
          broken("used chunk not the rounded request (an unsplit remainder)");
        }
        in_use += c.size;
        requested += c.requested;
        ++live;
        CategoryStats& cat = by_category[index_of(c.category)];
        cat.in_use_bytes += c.size;
        ++cat.live_allocations;
      } else {
        if (prev != kNone && !chunks_[prev].in_use) broken("two adjacent free chunks (missed coalescing)");
        if (bins_[bin_of(c.size)].count(FreeKey{c.size, c.addr, h}) != 1) broken("free chunk not in its bin");
        ++free_chunks;
      }
      expect = c.addr + c.size;
      prev = h;
    }
    if (expect != r.base + r.size) broken("chunks do not tile their region");
  }
  std::size_t binned = 0;
  for (int b = 0; b < kBinCount; ++b) {
    if (((nonempty_bins_ >> b) & 1u) != (bins_[b].empty() ? 0u : 1u)) broken("non-empty bin mask is stale");
    for (const FreeKey& k : bins_[b]) {
      if (bin_of(k.size) != b || chunks_[k.chunk].in_use || chunks_[k.chunk].size != k.size) broken("bad bin entry");
    }
    binned += bins_[b].size();
  }
  if (binned != free_chunks) broken("bins hold chunks that are not in any region");
  if (live != live_.size()) broken("live map holds blocks that are not in any region");
  if (reserved != reserved_ || in_use != in_use_ || requested != requested_) broken("byte counters disagree with the chunks");
  if (peak_ < in_use_) broken("peak below in use");
  for (std::size_t i = 0; i < kTensorCategoryCount; ++i) {
    if (by_category[i].in_use_bytes != by_category_[i].in_use_bytes ||
        by_category[i].live_allocations != by_category_[i].live_allocations ||
        by_category_[i].peak_in_use_bytes < by_category_[i].in_use_bytes) {
      broken("per-category counters disagree with the chunks");
    }
  }
  if (spare_bin_nodes_.size() + binned != chunks_.size()) broken("a bin node went missing");
  if (free_handles_.size() + free_chunks + live != chunks_.size()) broken("a chunk slot went missing");
}

}  // namespace sluice
