// Saved loader states: their layout, check word and fingerprint.
#include "runtime/loader_state.hpp"

#include <cstring>
#include <string>

#include "sluice/core/error.hpp"
#include "sluice/core/rng.hpp"

namespace sluice::runtime {

namespace {
constexpr std::uint32_t kStateMagic = 0x54534c53;  // "SLST"
// Version 1 held one rank's batch and a fingerprint that included the rank and world size.
constexpr std::uint32_t kStateVersion = 2;
constexpr std::uint32_t kMaxSegments = 4096;

// Layout (native byte order, as version 1): u32 magic, u32 version, u64 fingerprint, i64 epoch,
// i64 global batch, u32 split, u32 segments, then per segment i64 world and i64 steps, then u64
// check of everything before it.
struct Header {
  std::uint32_t magic;
  std::uint32_t version;
  std::uint64_t fingerprint;
  std::int64_t epoch;
  std::int64_t global_batch;
  std::uint32_t split;
  std::uint32_t segments;
};
static_assert(sizeof(Header) == 40);

std::uint64_t check_of(std::span<const std::uint8_t> bytes) {
  std::uint64_t h = derive_key(kStateMagic, bytes.size());
  for (std::size_t i = 0; i + 8 <= bytes.size(); i += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, bytes.data() + i, 8);
    h = derive_key(h, word);
  }
  return h;
}

template <class T>
void put(std::vector<std::uint8_t>& out, const T& value) {
  const std::size_t at = out.size();
  out.resize(at + sizeof value);
  std::memcpy(out.data() + at, &value, sizeof value);
}

[[noreturn]] void refuse(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, "restore: " + message); }

// "1, 2, 4 or 8": the world sizes a global batch splits over, for messages.
std::string worlds_that_divide(std::int64_t global_batch) {
  std::string out;
  int listed = 0;
  for (std::int64_t w = 1; w <= global_batch && listed < 16; ++w) {
    if (global_batch % w != 0) continue;
    out += (out.empty() ? "" : ", ") + std::to_string(w);
    ++listed;
  }
  return out;
}
}  // namespace

std::int64_t LoaderState::global_batch() const {
  return static_cast<std::int64_t>(plan_.batch_size) * plan_.order.shard_world;
}

std::uint64_t LoaderState::fingerprint() const {
  std::uint64_t h = plan_.dataset.items.fingerprint();  // of every item's path and label
  const auto mix = [&h](std::uint64_t v) { h = derive_key(h, v); };
  mix(plan_.drop_last ? 1 : 0);
  mix(static_cast<std::uint64_t>(plan_.order.split));
  mix(plan_.order.file_seed.value_or(~0ull));
  mix(static_cast<std::uint64_t>(plan_.order.shuffle_buffer));
  mix(plan_.order.shuffle_seed);
  mix(plan_.options.seed);
  mix(static_cast<std::uint64_t>(plan_.program.output.width) << 32 | static_cast<std::uint32_t>(plan_.program.output.height));
  return h;
}

std::span<const stages::EpochSegment> LoaderState::begin_epoch(std::int64_t epoch) {
  current_ = epoch == resume_.epoch ? std::move(resume_) : ResumePoint{epoch, {}};
  current_.epoch = epoch;
  resume_ = ResumePoint{};
  return current_.done;
}

std::vector<std::uint8_t> LoaderState::save(std::int64_t epoch, std::int64_t returned, std::int64_t batches) const {
  if (resume_.epoch >= 0) return encode(resume_);
  if (epoch < 0) return encode(ResumePoint{0, {}});
  if (returned >= batches) return encode(ResumePoint{epoch + 1, {}});  // a finished epoch: the next one's start
  ResumePoint at{epoch, {}};
  const int world = plan_.order.shard_world;
  if (plan_.order.split == stages::ShardSplit::kSamples) {
    // Round robin: every segment delivered a prefix of what was left, and `returned` counts them all.
    if (returned > 0) at.done.push_back(stages::EpochSegment{1, returned});
    return encode(at);
  }
  if (current_.epoch == epoch) at.done = current_.done;
  // A last segment at this world size was continued by this run (EpochOrder::compute's skip).
  if (!at.done.empty() && at.done.back().world == world) at.done.pop_back();
  std::int64_t before = 0;
  for (const stages::EpochSegment& s : at.done) before += s.steps;
  if (returned > before) at.done.push_back(stages::EpochSegment{world, returned - before});
  return encode(at);
}

std::vector<std::uint8_t> LoaderState::encode(const ResumePoint& point) const {
  const Header header{kStateMagic, kStateVersion, fingerprint(), point.epoch, global_batch(),
                      static_cast<std::uint32_t>(plan_.order.split), static_cast<std::uint32_t>(point.done.size())};
  std::vector<std::uint8_t> bytes;
  put(bytes, header);
  for (const stages::EpochSegment& s : point.done) {
    put(bytes, static_cast<std::int64_t>(s.world));
    put(bytes, s.steps);
  }
  put(bytes, check_of(bytes));
  return bytes;
}

ResumePoint LoaderState::parse(std::span<const std::uint8_t> bytes) const {
  Header h{};
  // Magic and version first: a version 1 state (40 bytes) is shorter than any of this version.
  if (bytes.size() >= 8) std::memcpy(&h, bytes.data(), 8);
  if (bytes.size() >= 8 && h.magic == kStateMagic && h.version == 1) {
    refuse("this state is version 1, written by an older sluice for one rank at one world size; this sluice "
           "reads version 2 (the job's position at any world size): start the saved epoch again from its beginning");
  }
  if (bytes.size() < sizeof h + 8) {
    refuse("a loader state is at least " + std::to_string(sizeof h + 8) + " bytes, got " + std::to_string(bytes.size()));
  }
  std::memcpy(&h, bytes.data(), sizeof h);
  if (h.magic != kStateMagic) refuse("not a sluice loader state, or a damaged one");
  if (h.version != kStateVersion) {
    refuse("state version " + std::to_string(h.version) + ", this sluice reads version " + std::to_string(kStateVersion));
  }
  const std::size_t expected = sizeof h + 16 * std::size_t{std::min(h.segments, kMaxSegments)} + 8;
  std::uint64_t check = 0;
  if (h.segments > kMaxSegments || bytes.size() != expected ||
      (std::memcpy(&check, bytes.data() + bytes.size() - 8, 8), check != check_of(bytes.first(bytes.size() - 8))) ||
      h.epoch < 0 || h.global_batch < 1) {
    refuse("not a sluice loader state, or a damaged one");
  }
  if (h.fingerprint != fingerprint() || h.split != static_cast<std::uint32_t>(plan_.order.split)) {
    refuse("the state comes from a different pipeline (items, order, shard_by, drop_last or seeds differ)");
  }
  const int world = plan_.order.shard_world;
  if (h.global_batch != global_batch()) {
    const std::string saved = std::to_string(h.global_batch);
    if (h.global_batch % world != 0) {
      refuse("the state's global batch of " + saved + " samples does not split over " + std::to_string(world) +
             " ranks; world sizes that divide it: " + worlds_that_divide(h.global_batch));
    }
    refuse("the state's global batch is " + saved + " samples, this loader's " + std::to_string(plan_.batch_size) +
           " x " + std::to_string(world) + " ranks = " + std::to_string(global_batch()) + ": at " +
           std::to_string(world) + " ranks use batch(" + std::to_string(h.global_batch / world) + ")");
  }
  ResumePoint point{h.epoch, {}};
  for (std::uint32_t i = 0; i < h.segments; ++i) {
    std::int64_t w = 0;
    std::int64_t steps = 0;
    std::memcpy(&w, bytes.data() + sizeof h + 16 * i, 8);
    std::memcpy(&steps, bytes.data() + sizeof h + 16 * i + 8, 8);
    if (w < 1 || w > h.global_batch || h.global_batch % w != 0 || steps < 0) refuse("not a sluice loader state, or a damaged one");
    point.done.push_back(stages::EpochSegment{static_cast<int>(w), steps});
  }
  return point;
}

}  // namespace sluice::runtime
