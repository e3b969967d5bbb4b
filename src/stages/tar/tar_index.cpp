// Indexing a tar shard by its headers, and the index file's encoding.
#include "stages/tar/tar_index.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "sluice/detail/core/binary_io.hpp"
#include "sluice/detail/core/numbers.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"
#include "stages/source/file_ops.hpp"
#include "stages/source/item_table.hpp"
#include "stages/source/source.hpp"
#include "stages/tar/tar_format.hpp"

namespace sluice::stages {

namespace {

// Headers are read through a window: 1 MiB reads while members are small (many headers per read,
// sequential), one page per header once they are large (the images between need not be read).
constexpr std::size_t kWideRead = std::size_t{1} << 20;
constexpr std::size_t kPageRead = 4096;
constexpr std::uint64_t kSparseMembers = 64 * 1024;
constexpr std::uint64_t kMaxMetadata = 64 * 1024;  // a pax header's data, a GNU long name
constexpr std::uint64_t kMaxNumberLabel = 64;      // key.cls
constexpr std::uint64_t kMaxClassName = 1024;      // key.class

// The shard's bytes through core::WindowReader (one error handling: a failed read is kIo naming
// the shard); `sparse` picks the read size.
class Window {
 public:
  Window(FileOps& ops, int fd, std::uint64_t size, const std::string& path)
      : reader_([&ops, fd](void* buffer, std::size_t bytes, std::uint64_t offset) {
                  return static_cast<long>(pread_full(ops, fd, buffer, bytes, offset));
                },
                size, path, kWideRead) {}

  // Bytes [pos, pos + n) of the shard, or null when the shard ends before them.
  const std::uint8_t* at(std::uint64_t pos, std::uint64_t n, bool sparse) {
    return reader_.at(pos, static_cast<std::size_t>(n), sparse ? kPageRead : kWideRead);
  }

 private:
  core::WindowReader reader_;
};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trimmed(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\0'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

std::string at_offset(std::uint64_t offset) { return "at offset " + std::to_string(offset); }

class Scanner {
 public:
  Scanner(FileOps& ops, int fd, std::uint64_t size, const std::string& path, std::vector<ShardSample>& out)
      : window_(ops, fd, size, path), size_(size), out_(out) {}

  void run() {
    while (step()) {
    }
    flush();
  }

 private:
  struct Group {
    bool open = false;
    std::string key;
    ShardSample sample;
    bool image = false;
    std::string label_member;  // the label member's name, once seen
  };

  // One header and what follows it; false at the end of the archive.
  bool step() {
    if (pos_ >= size_) return false;
    if (size_ - pos_ < tar::kBlock) {
      const std::uint8_t* rest = window_.at(pos_, size_ - pos_, false);
      if (rest != nullptr && std::any_of(rest, rest + (size_ - pos_), [](std::uint8_t b) { return b != 0; })) {
        lost("header " + at_offset(pos_), "cut: the shard ends inside this header");
      }
      return false;
    }
    const std::uint8_t* block = window_.at(pos_, tar::kBlock, sparse_);
    if (block == nullptr) return lost("header " + at_offset(pos_), "cut: the shard shrank while it was indexed");
    tar::Header h;
    std::string why;
    switch (tar::parse_header(block, h, why)) {
      case tar::Block::kZero:
        return past_end_marker();
      case tar::Block::kBadChecksum:
      case tar::Block::kBadField:
        return bad_header(block, why);
      case tar::Block::kHeader:
        break;
    }
    return member(h);
  }

  // A zero block ends the archive, unless a valid header follows it (tars joined with cat): then
  // the members after it are read too, as GNU tar --ignore-zeros does.
  bool past_end_marker() {
    for (std::uint64_t p = pos_ + tar::kBlock; size_ - p >= tar::kBlock; p += tar::kBlock) {
      const std::uint8_t* block = window_.at(p, tar::kBlock, false);
      tar::Header h;
      std::string why;
      const tar::Block kind = block == nullptr ? tar::Block::kZero : tar::parse_header(block, h, why);
      if (kind != tar::Block::kZero) {
        if (kind != tar::Block::kHeader) return false;
        pos_ = p;
        return true;
      }
      if (p - pos_ > 64 * tar::kBlock) return false;  // a run of zeros: the record's padding
    }
    return false;
  }

  bool bad_header(const std::uint8_t* block, const std::string& why) {
    if (const char* compressor = pos_ == 0 ? tar::compression_magic(block) : nullptr) {
      lost("header " + at_offset(0), std::string("the shard is ") + compressor +
                                         "-compressed; sluice reads uncompressed tar shards (decompress it first)");
      pos_ = size_;
      return false;
    }
    const char* raw = reinterpret_cast<const char*>(block);
    const std::string name = tar::printable(std::string_view(raw, strnlen(raw, 100)));
    const std::uint64_t at = pos_;
    pos_ = resync(pos_ + tar::kBlock);
    lost(name.empty() ? "header " + at_offset(at) : name,
         why + " in the header " + at_offset(at) + "; " +
             (pos_ < size_ ? "indexing resumed at the next valid header, " + at_offset(pos_)
                           : std::string("no valid header follows")));
    pax_ = {};
    long_name_.reset();
    return pos_ < size_;
  }

  std::uint64_t resync(std::uint64_t from) const {
    for (std::uint64_t p = from; p <= size_ && size_ - p >= tar::kBlock; p += tar::kBlock) {
      const std::uint8_t* block = window_.at(p, tar::kBlock, false);
      if (block == nullptr) break;
      tar::Header h;
      std::string why;
      if (tar::parse_header(block, h, why) == tar::Block::kHeader && h.ustar) return p;
    }
    return size_;
  }

  bool member(const tar::Header& h) {
    const std::uint64_t data = pos_ + tar::kBlock;
    const bool metadata = h.type == 'x' || h.type == 'g' || h.type == 'L' || h.type == 'K';
    std::string name = h.name;
    std::uint64_t size = h.size;
    bool size_agrees = true;
    std::string pax_error;
    if (!metadata) {
      if (long_name_) name = std::move(*long_name_);
      if (pax_.path) name = std::move(*pax_.path);
      if (pax_.size) {
        size = *pax_.size;
        size_agrees = size == h.size;
      }
      pax_error = std::move(pax_error_);
      pax_ = {};
      long_name_.reset();
      pax_error_.clear();
    }
    const bool carries = tar::has_data(h.type);
    if (carries && size > size_ - data) {
      const std::string cut = "cut: the member's " + std::to_string(size) + " bytes " + at_offset(data) +
                              " run past the end of the shard (" + std::to_string(size_) + " bytes)";
      if (!tar::is_regular(h.type) || !sample_member(name, data, size, size_agrees, cut)) {
        lost(tar::printable(name) + " (type '" + tar::printable(std::string(1, h.type)) + "' " + at_offset(pos_) + ")",
             cut);
      }
      return false;
    }
    if (h.type == 'x' || h.type == 'L') {
      read_metadata(h.type, data, size);
    } else if (tar::is_regular(h.type)) {
      sample_member(name, data, size, size_agrees, pax_error);
    }
    pos_ = data + (carries ? tar::padded(size) : 0);
    sparse_ = carries && size > kSparseMembers;
    return true;
  }

  void read_metadata(char type, std::uint64_t data, std::uint64_t size) {
    const std::uint8_t* bytes = size <= kMaxMetadata ? window_.at(data, size, false) : nullptr;
    if (bytes == nullptr) {
      pax_error_ = std::string(type == 'x' ? "pax header" : "GNU long name") + " of " + std::to_string(size) +
                   " bytes, more than the " + std::to_string(kMaxMetadata) + " sluice reads";
      return;
    }
    const std::string_view text(reinterpret_cast<const char*>(bytes), static_cast<std::size_t>(size));
    std::string why;
    if (type == 'L') {
      long_name_ = std::string(text.substr(0, text.find('\0')));
    } else if (!tar::parse_pax(text, pax_, why)) {
      pax_error_ = why + " in the pax header " + at_offset(data - tar::kBlock);
    }
  }

  // A regular member: joins its key's sample if it is the image or a label. False when it is
  // neither (a cut one is then reported by the caller). `damage` marks the sample.
  bool sample_member(const std::string& name, std::uint64_t data, std::uint64_t size, bool size_agrees,
                     const std::string& damage) {
    const std::size_t slash = name.rfind('/');
    const std::size_t base = slash == std::string::npos ? 0 : slash + 1;
    const std::size_t dot = name.find('.', base);
    if (dot == std::string::npos || dot == base || name[base] == '.') return false;  // no key, or hidden
    const std::string key = name.substr(0, dot);
    const std::string ext = lower(std::string_view(name).substr(dot + 1));
    const bool image = has_image_extension("." + ext) && ext.find('.') == std::string::npos;
    if (!image && ext != "cls" && ext != "class") return false;
    if (!group_.open || group_.key != key) {
      flush();
      group_.open = true;
      group_.key = key;
    }
    ShardSample& s = group_.sample;
    if (!damage.empty()) mark(damage);
    if (name.size() > ItemTable::kMaxNameBytes) {
      mark("member name of " + std::to_string(name.size()) + " bytes, more than the " +
           std::to_string(ItemTable::kMaxNameBytes) + " sluice takes");
    }
    if (image) {
      if (group_.image) {
        mark("two image members for key " + tar::printable(key) + ": " + tar::printable(s.name) + " and " +
             tar::printable(name));
        return true;
      }
      group_.image = true;
      s.name = name.substr(0, ItemTable::kMaxNameBytes);
      s.offset = data;
      s.size = size;
      s.header_size_agrees = size_agrees;
      return true;
    }
    if (!group_.label_member.empty()) {
      mark("two label members for key " + tar::printable(key) + ": " + tar::printable(group_.label_member) + " and " +
           tar::printable(name));
      return true;
    }
    group_.label_member = name.substr(0, ItemTable::kMaxNameBytes);
    if (damage.empty()) read_label(ext == "cls", data, size);
    return true;
  }

  void read_label(bool number, std::uint64_t data, std::uint64_t size) {
    const std::string& member = group_.label_member;
    const std::uint64_t limit = number ? kMaxNumberLabel : kMaxClassName;
    const std::uint8_t* bytes = size <= limit ? window_.at(data, size, sparse_) : nullptr;
    if (bytes == nullptr) {
      return mark("label member " + tar::printable(member) + " of " + std::to_string(size) + " bytes, more than a " +
                  (number ? "number" : "class name") + " takes");
    }
    const std::string_view text = trimmed({reinterpret_cast<const char*>(bytes), static_cast<std::size_t>(size)});
    ShardSample& s = group_.sample;
    if (!number) {
      if (text.empty()) return mark("label member " + tar::printable(member) + " is empty");
      s.label_kind = LabelKind::kClassName;
      s.class_name = std::string(text);
      return;
    }
    // The member's bytes are not quoted: messages never carry a file's contents.
    const auto value = core::parse_int(text, 0, INT32_MAX);
    if (!value) {
      return mark("label member " + tar::printable(member) + " does not hold a whole number from 0 to 2147483647");
    }
    s.label_kind = LabelKind::kNumber;
    s.number = static_cast<std::int32_t>(*value);
  }

  void mark(const std::string& cause) {
    if (group_.sample.damage.empty()) group_.sample.damage = cause;
  }

  void flush() {
    if (!group_.open) return;
    ShardSample& s = group_.sample;
    if (!group_.image) {
      s.name = group_.label_member;
      mark("no image member (.jpg, .png, .webp, ...) for key " + tar::printable(group_.key));
    }
    out_.push_back(std::move(s));
    group_ = {};
  }

  // A member that indexing could not read. It most likely completed the open sample when that
  // one lacks its image or label (the cut or bad header is then the sample's), else it starts a
  // damaged sample of its own.
  bool lost(const std::string& name, const std::string& cause) {
    if (group_.open && (!group_.image || group_.label_member.empty())) {
      mark(cause + " (after " + tar::printable(group_.image ? group_.sample.name : group_.label_member) + ")");
      flush();
      return false;
    }
    flush();
    ShardSample s;
    s.name = name.substr(0, ItemTable::kMaxNameBytes);
    s.offset = pos_;
    s.damage = cause;
    out_.push_back(std::move(s));
    return false;
  }

  mutable Window window_;
  std::uint64_t size_;
  std::vector<ShardSample>& out_;
  std::uint64_t pos_ = 0;
  bool sparse_ = false;
  Group group_;
  tar::PaxOverrides pax_;
  std::optional<std::string> long_name_;
  std::string pax_error_;
};

// ---- index file encoding ----------------------------------------------------------------------

constexpr char kMagic[8] = {'S', 'L', 'U', 'I', 'C', 'E', 'T', 'I'};
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kRecordBytes = 28;

template <class T>
void put(std::vector<std::uint8_t>& out, T value) {
  core::append_le(out, value);
}

template <class T>
T get(const std::uint8_t* p) {
  return core::get_le<T>(p);
}

std::optional<IndexedShard> refuse(std::string& why, std::string reason) {
  why = std::move(reason);
  return std::nullopt;
}

std::uint16_t clipped_length(const std::string& s) { return static_cast<std::uint16_t>(std::min<std::size_t>(s.size(), 65535)); }

}  // namespace

IndexedShard scan_shard(FileOps& ops, int fd, std::uint64_t shard_size, std::int64_t mtime_ns, const std::string& path) {
  IndexedShard index{shard_size, mtime_ns, {}};
  Scanner(ops, fd, shard_size, path, index.samples).run();
  return index;
}

std::vector<std::uint8_t> encode_shard_index(const IndexedShard& index) {
  std::vector<std::uint8_t> out(kShardIndexHeaderBytes, 0);
  for (const ShardSample& s : index.samples) {
    put<std::uint64_t>(out, s.offset);
    put<std::uint64_t>(out, s.size);
    put<std::uint8_t>(out, s.header_size_agrees ? 1 : 0);
    put<std::uint8_t>(out, static_cast<std::uint8_t>(s.label_kind));
    put<std::int32_t>(out, s.number);
    put<std::uint16_t>(out, clipped_length(s.name));
    put<std::uint16_t>(out, clipped_length(s.class_name));
    put<std::uint16_t>(out, clipped_length(s.damage));
    for (const std::string* text : {&s.name, &s.class_name, &s.damage}) {
      out.insert(out.end(), text->begin(), text->begin() + clipped_length(*text));
    }
  }
  std::vector<std::uint8_t> header;
  header.insert(header.end(), kMagic, kMagic + 8);
  put<std::uint32_t>(header, kVersion);
  put<std::uint32_t>(header, 0);
  put<std::uint64_t>(header, index.shard_size);
  put<std::int64_t>(header, index.mtime_ns);
  put<std::uint64_t>(header, index.samples.size());
  put<std::uint64_t>(header, out.size() - kShardIndexHeaderBytes);
  put<std::uint64_t>(header, XXH3_64bits(out.data() + kShardIndexHeaderBytes, out.size() - kShardIndexHeaderBytes));
  put<std::uint64_t>(header, XXH3_64bits(header.data(), header.size()));
  std::memcpy(out.data(), header.data(), kShardIndexHeaderBytes);
  return out;
}

bool is_shard_index(std::span<const std::uint8_t> first_bytes) {
  return first_bytes.size() >= 8 && std::memcmp(first_bytes.data(), kMagic, 8) == 0;
}

std::optional<IndexedShard> decode_shard_index(std::span<const std::uint8_t> bytes, std::uint64_t shard_size,
                                             std::int64_t mtime_ns, std::string& why) {
  if (bytes.size() < kShardIndexHeaderBytes || !is_shard_index(bytes)) return refuse(why, "not a sluice shard index");
  const std::uint8_t* h = bytes.data();
  if (get<std::uint64_t>(h + 56) != XXH3_64bits(h, 56)) return refuse(why, "damaged header");
  if (get<std::uint32_t>(h + 8) != kVersion) return refuse(why, "another format version");
  if (get<std::uint64_t>(h + 16) != shard_size || get<std::int64_t>(h + 24) != mtime_ns) {
    return refuse(why, "the shard changed since it was indexed (size or mtime)");
  }
  const std::uint64_t count = get<std::uint64_t>(h + 32);
  const std::span<const std::uint8_t> payload = bytes.subspan(kShardIndexHeaderBytes);
  if (get<std::uint64_t>(h + 40) != payload.size() || get<std::uint64_t>(h + 48) != XXH3_64bits(payload.data(), payload.size())) {
    return refuse(why, "damaged (its checksum does not match)");
  }
  if (count > payload.size() / kRecordBytes) return refuse(why, "damaged (more samples than records)");
  IndexedShard index{shard_size, mtime_ns, {}};
  index.samples.reserve(static_cast<std::size_t>(count));
  std::size_t at = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    if (payload.size() - at < kRecordBytes) return refuse(why, "damaged (a record is cut)");
    const std::uint8_t* r = payload.data() + at;
    ShardSample s;
    s.offset = get<std::uint64_t>(r);
    s.size = get<std::uint64_t>(r + 8);
    s.header_size_agrees = (r[16] & 1) != 0;
    const std::uint8_t kind = r[17];
    s.number = get<std::int32_t>(r + 18);
    const std::size_t lengths[3] = {get<std::uint16_t>(r + 22), get<std::uint16_t>(r + 24), get<std::uint16_t>(r + 26)};
    at += kRecordBytes;
    if (payload.size() - at < lengths[0] + lengths[1] + lengths[2]) return refuse(why, "damaged (a record is cut)");
    std::string* texts[3] = {&s.name, &s.class_name, &s.damage};
    for (int t = 0; t < 3; ++t) {
      texts[t]->assign(reinterpret_cast<const char*>(payload.data() + at), lengths[t]);
      at += lengths[t];
    }
    // A readable record must point at data after a header, inside the shard.
    const bool readable = s.damage.empty();
    if (kind > static_cast<std::uint8_t>(LabelKind::kClassName) || s.name.size() > ItemTable::kMaxNameBytes ||
        (kind == static_cast<std::uint8_t>(LabelKind::kNumber) && s.number < 0) ||
        (readable && (s.offset < tar::kBlock || s.offset % tar::kBlock != 0 || s.offset > shard_size ||
                      s.size > shard_size - s.offset || s.name.empty()))) {
      return refuse(why, "damaged (record " + std::to_string(i) + " is out of bounds)");
    }
    s.label_kind = static_cast<LabelKind>(kind);
    index.samples.push_back(std::move(s));
  }
  if (at != payload.size()) return refuse(why, "damaged (bytes after the last record)");
  return index;
}

}  // namespace sluice::stages
