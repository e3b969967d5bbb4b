// The compact item table: building from sources, locating an item's bytes, its accounting.
#include "stages/source/item_table.hpp"

#include <algorithm>
#include <cstring>

#include "sluice/core/error.hpp"
#include "sluice/core/rng.hpp"
#include "sluice/core/units.hpp"

namespace sluice::stages {

namespace {
constexpr std::uint32_t kDamagedSize = UINT32_MAX;
constexpr std::uint64_t kNameChunk = std::uint64_t{1} << 16;
}  // namespace

void ItemTable::start_kind(Kind kind) {
  if (empty()) {
    kind_ = kind;
  } else if (kind_ != kind) {
    throw Error(ErrorCode::kInternal, "an item table holds files or tar members, not both");
  }
  if (size() >= kMaxItems - 1) {
    throw Error(ErrorCode::kTooLarge, "the data set has more than " + std::to_string(kMaxItems - 1) +
                                          " items, more than sluice indexes");
  }
}

void ItemTable::add_name(std::string_view name) {
  if (name.size() > kMaxNameBytes) {
    throw Error(ErrorCode::kInvalidArgument,
                "a name of " + std::to_string(name.size()) + " bytes, above the " +
                    std::to_string(kMaxNameBytes) + " a path may have",
                std::string(name.substr(0, 200)) + "...");
  }
  // A name starts inside its chunk (even an empty one: its offset must name this chunk).
  if (name_chunks_.empty() || chunk_used_.back() >= kNameChunk || chunk_used_.back() + name.size() > kNameChunk) {
    if (name_chunks_.size() >= (std::uint64_t{1} << 32) / kNameChunk) {
      throw Error(ErrorCode::kTooLarge, "the data set's names take more than 4 GiB, more than sluice indexes");
    }
    name_chunks_.push_back(std::make_unique_for_overwrite<char[]>(kNameChunk));
    chunk_used_.push_back(0);
  }
  const std::uint64_t chunk = name_chunks_.size() - 1;
  std::copy_n(name.begin(), name.size(), name_chunks_.back().get() + chunk_used_.back());  // an empty name's data() may be null
  name_start_.push_back(static_cast<std::uint32_t>(chunk * kNameChunk + chunk_used_.back()));
  chunk_used_.back() += static_cast<std::uint32_t>(name.size());
}

void ItemTable::add_run(std::int32_t container, std::int32_t label) {
  if (!runs_.empty() && runs_.back().container == container && runs_.back().label == label) return;
  runs_.push_back(Run{size() - 1, container, label});
}

std::string_view ItemTable::name_of(std::int64_t item) const {
  const std::uint32_t start = name_start_[item];
  const std::uint32_t chunk = start >> kNameChunkShift;
  std::uint32_t end = chunk * static_cast<std::uint32_t>(kNameChunk) + chunk_used_[chunk];
  if (item + 1 < size()) {
    const std::uint32_t next = name_start_[item + 1];
    if (next >> kNameChunkShift == chunk) end = next;
  }
  const std::size_t begin = start & (kNameChunk - 1);
  return {name_chunks_[chunk].get() + begin, end - start};
}

std::int64_t ItemTable::run_of(std::int64_t item) const {
  std::int64_t lo = 0;
  std::int64_t hi = runs_.size();  // the run holding `item` is the last one with first <= item
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (runs_[mid].first <= item) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

std::int32_t ItemTable::add_folder(std::string prefix) {
  if (folders_.size() >= static_cast<std::size_t>(INT32_MAX)) {
    throw Error(ErrorCode::kTooLarge, "the data set has more folders than sluice indexes");
  }
  folders_.push_back(std::move(prefix));
  return static_cast<std::int32_t>(folders_.size() - 1);
}

void ItemTable::add_file(std::int32_t folder, std::string_view name, std::int32_t label) {
  start_kind(Kind::kFile);
  add_name(name);
  add_run(folder, label);
}

void ItemTable::add_path(std::string_view path, std::int32_t label) {
  const std::size_t slash = path.rfind('/');
  const std::string_view prefix = slash == std::string_view::npos ? std::string_view{} : path.substr(0, slash + 1);
  std::int32_t folder = -1;
  // Consecutive items share a folder far more often than not: try the last one before hashing.
  if (!runs_.empty() && folders_[static_cast<std::size_t>(runs_.back().container)] == prefix) {
    folder = runs_.back().container;
  } else {
    const auto [it, inserted] = folder_ids_.try_emplace(std::string(prefix), 0);
    if (inserted) it->second = add_folder(std::string(prefix));
    folder = it->second;
  }
  add_file(folder, path.substr(prefix.size()), label);
}

std::int32_t ItemTable::add_shard(Shard shard) {
  if (shards_.size() >= static_cast<std::size_t>(INT32_MAX)) {
    throw Error(ErrorCode::kTooLarge, "more shards than sluice indexes");
  }
  shards_.push_back(std::move(shard));
  return static_cast<std::int32_t>(shards_.size() - 1);
}

void ItemTable::add_member(std::int32_t shard, std::string_view name, std::uint64_t offset, std::uint64_t size,
                           std::int32_t label, SizeField size_field) {
  if (offset % 512 != 0) throw Error(ErrorCode::kInternal, "a tar member's data offset must be a multiple of 512");
  if (size >= kDamagedSize) {
    add_damaged_member(shard, name, offset,
                       "member of " + format_bytes(size) + ", larger than the 4 GiB sluice reads from a shard");
    return;
  }
  start_kind(Kind::kMember);
  add_name(name);
  add_run(shard, label);
  member_offset_.push_back(offset | (size_field == SizeField::kOverridden ? 1 : 0));
  member_size_.push_back(static_cast<std::uint32_t>(size));
}

void ItemTable::add_damaged_member(std::int32_t shard, std::string_view name, std::uint64_t offset,
                                   std::string cause) {
  start_kind(Kind::kMember);
  add_name(name.substr(0, kMaxNameBytes));
  // A damaged item keeps the label of its neighbours' run: it is never delivered, and a run of
  // its own would cost a run per damaged member.
  add_run(shard, !runs_.empty() && runs_.back().container == shard ? runs_.back().label : 0);
  member_offset_.push_back(offset & ~std::uint64_t{1});
  member_size_.push_back(kDamagedSize);
  damage_.emplace_back(size() - 1, std::move(cause));
}

void ItemTable::mark_damaged(std::int64_t item, std::string cause) {
  if (kind_ != Kind::kMember || item < 0 || item >= size()) {
    throw Error(ErrorCode::kInternal, "mark_damaged: not a member of this table");
  }
  if (member_size_[item] == kDamagedSize) return;  // keeps the first cause
  member_size_[item] = kDamagedSize;
  damage_.emplace_back(item, std::move(cause));
}

void ItemTable::relabel(const std::vector<std::int32_t>& relabel, std::int32_t unlabelled) {
  for (std::int64_t r = 0; r < runs_.size(); ++r) {
    const std::int32_t old = runs_[r].label;
    if (old < 0) {
      runs_[r].label = unlabelled;
    } else if (static_cast<std::size_t>(old) < relabel.size()) {
      runs_[r].label = relabel[static_cast<std::size_t>(old)];
    }
  }
}

void ItemTable::finish() {
  std::stable_sort(damage_.begin(), damage_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  damage_.shrink_to_fit();
  folder_ids_ = {};
}

std::uint64_t ItemTable::fingerprint() const {
  std::call_once(fingerprint_->once, [this] { fingerprint_->value = compute_fingerprint(); });
  return fingerprint_->value;
}

std::uint64_t ItemTable::compute_fingerprint() const {
  // The fingerprint the loader state had when items were a vector of (path, label): FNV-style
  // over each path's bytes, then the label.
  std::uint64_t h = derive_key(static_cast<std::uint64_t>(size()), 0x7374617465);
  const auto hash = [&h](std::string_view bytes) {
    for (const char c : bytes) h = h * 1099511628211ull ^ static_cast<unsigned char>(c);
  };
  for (std::int64_t r = 0; r < runs_.size(); ++r) {  // run by run: no search per item
    const Run& run = runs_[r];
    const std::int64_t end = r + 1 < runs_.size() ? runs_[r + 1].first : size();
    const std::string_view container = kind_ == Kind::kFile ? std::string_view(folders_[static_cast<std::size_t>(run.container)])
                                                            : std::string_view(shards_[static_cast<std::size_t>(run.container)].name());
    for (std::int64_t i = run.first; i < end; ++i) {
      hash(container);
      if (kind_ == Kind::kMember) hash(":");
      hash(name_of(i));
      h = derive_key(h, static_cast<std::uint64_t>(run.label));
    }
  }
  return h;
}

ItemTable::Location ItemTable::locate(std::int64_t item) const {
  const Run& run = runs_[run_of(item)];
  Location at;
  at.kind = kind_;
  at.name = name_of(item);
  if (kind_ == Kind::kFile) {
    at.folder = folders_[static_cast<std::size_t>(run.container)];
    return at;
  }
  at.shard = run.container;
  at.offset = member_offset_[item] & ~std::uint64_t{1};
  at.size_in_header = (member_offset_[item] & 1) == 0;
  const std::uint32_t size = member_size_[item];
  if (size == kDamagedSize) {
    const auto it = std::lower_bound(damage_.begin(), damage_.end(), item,
                                     [](const auto& d, std::int64_t i) { return d.first < i; });
    at.damage = it != damage_.end() && it->first == item ? &it->second : nullptr;
    static const std::string kUnknown = "damaged member";
    if (at.damage == nullptr) at.damage = &kUnknown;  // mark_damaged after finish(): still unreadable
  } else {
    at.size = size;
  }
  return at;
}

void ItemTable::append_path(std::int64_t item, std::string& out) const {
  const Run& run = runs_[run_of(item)];
  if (kind_ == Kind::kFile) {
    out += folders_[static_cast<std::size_t>(run.container)];
  } else {
    out += shards_[static_cast<std::size_t>(run.container)].name();
    out += ':';
  }
  out += name_of(item);
}

std::string ItemTable::path(std::int64_t item) const {
  std::string out;
  append_path(item, out);
  return out;
}

std::vector<std::int64_t> ItemTable::shard_starts() const {
  std::vector<std::int64_t> starts;
  if (kind_ != Kind::kMember) return starts;
  for (std::int64_t r = 0; r < runs_.size(); ++r) {
    if (r == 0 || runs_[r].container != runs_[r - 1].container) starts.push_back(runs_[r].first);
  }
  starts.push_back(size());
  return starts;
}

std::uint64_t ItemTable::bytes() const {
  std::uint64_t b = name_chunks_.size() * kNameChunk + name_chunks_.capacity() * sizeof(name_chunks_[0]) +
                    chunk_used_.capacity() * sizeof(std::uint32_t) + name_start_.bytes() + runs_.bytes() +
                    member_offset_.bytes() + member_size_.bytes();
  for (const std::string& f : folders_) b += sizeof(std::string) + f.capacity();
  for (const Shard& s : shards_) b += sizeof(Shard) + s.path.capacity();
  for (const auto& d : damage_) b += sizeof(d) + d.second.capacity();
  return b;
}

}  // namespace sluice::stages
