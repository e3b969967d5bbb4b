// Saved loader states: their layout, check word and fingerprint.
#include "runtime/loader_state.hpp"

#include <cstring>
#include <string>

#include "sluice/core/error.hpp"
#include "sluice/core/rng.hpp"

namespace sluice::runtime {

namespace {
constexpr std::uint32_t kStateMagic = 0x54534c53;  // "SLST"
constexpr std::uint32_t kStateVersion = 1;

struct SavedState {
  std::uint32_t magic;
  std::uint32_t version;
  std::uint64_t fingerprint;
  std::int64_t epoch;
  std::int64_t batch;
  std::uint64_t check;  // of the fields above
};

std::uint64_t check_of(const SavedState& s) {
  std::uint64_t h = derive_key(s.magic ^ (std::uint64_t{s.version} << 32), s.fingerprint);
  h = derive_key(h, static_cast<std::uint64_t>(s.epoch));
  return derive_key(h, static_cast<std::uint64_t>(s.batch));
}
}  // namespace

std::uint64_t LoaderState::fingerprint() const {
  std::uint64_t h = plan_.dataset.items.fingerprint();  // of every item's path and label
  const auto mix = [&h](std::uint64_t v) { h = derive_key(h, v); };
  mix(static_cast<std::uint64_t>(plan_.batch_size));
  mix(plan_.drop_last ? 1 : 0);
  mix(static_cast<std::uint64_t>(plan_.order.shard_rank) << 32 | static_cast<std::uint32_t>(plan_.order.shard_world));
  mix(plan_.order.file_seed.value_or(~0ull));
  mix(static_cast<std::uint64_t>(plan_.order.shuffle_buffer));
  mix(plan_.order.shuffle_seed);
  mix(plan_.options.seed);
  mix(static_cast<std::uint64_t>(plan_.program.output.width) << 32 | static_cast<std::uint32_t>(plan_.program.output.height));
  return h;
}

std::vector<std::uint8_t> LoaderState::save(std::int64_t epoch, std::int64_t returned, std::int64_t batches) const {
  if (resume_.epoch >= 0) return encode(resume_);
  ResumePoint at{0, 0};
  if (epoch >= 0) {
    // Past the last batch handed out; a finished epoch resumes at the next one's start.
    at.epoch = returned >= batches ? epoch + 1 : epoch;
    at.batch = returned >= batches ? 0 : returned;
  }
  return encode(at);
}

std::vector<std::uint8_t> LoaderState::encode(ResumePoint point) const {
  SavedState s{kStateMagic, kStateVersion, fingerprint(), point.epoch, point.batch, 0};
  s.check = check_of(s);
  std::vector<std::uint8_t> bytes(sizeof s);
  std::memcpy(bytes.data(), &s, sizeof s);
  return bytes;
}

ResumePoint LoaderState::parse(std::span<const std::uint8_t> bytes) const {
  SavedState s{};
  if (bytes.size() != sizeof s) {
    throw Error(ErrorCode::kInvalidArgument, "restore: a loader state is " + std::to_string(sizeof s) +
                                                 " bytes, got " + std::to_string(bytes.size()));
  }
  std::memcpy(&s, bytes.data(), sizeof s);
  if (s.magic != kStateMagic || s.check != check_of(s) || s.epoch < 0 || s.batch < 0) {
    throw Error(ErrorCode::kInvalidArgument, "restore: not a sluice loader state, or a damaged one");
  }
  if (s.version != kStateVersion) {
    throw Error(ErrorCode::kInvalidArgument, "restore: state version " + std::to_string(s.version) +
                                                 ", this sluice reads version " + std::to_string(kStateVersion));
  }
  if (s.fingerprint != fingerprint()) {
    throw Error(ErrorCode::kInvalidArgument,
                "restore: the state comes from a different pipeline (items, batching, order or seeds differ)");
  }
  return ResumePoint{s.epoch, s.batch};
}

std::int64_t LoaderState::take_first_batch(std::int64_t epoch) {
  const std::int64_t first = epoch == resume_.epoch ? resume_.batch : 0;
  resume_ = ResumePoint{};
  return first;
}

}  // namespace sluice::runtime
