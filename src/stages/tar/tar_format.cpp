// ustar / GNU / pax header parsing and writing.
#include "stages/tar/tar_format.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <initializer_list>

namespace sluice::stages::tar {

namespace {

// Header field offsets and widths (POSIX.1-1988 ustar).
constexpr std::size_t kName = 0, kNameLen = 100;
constexpr std::size_t kMode = 100, kUid = 108, kGid = 116, kIdLen = 8;
constexpr std::size_t kSize = 124, kSizeLen = 12;
constexpr std::size_t kMtime = 136, kMtimeLen = 12;
constexpr std::size_t kChecksum = 148, kChecksumLen = 8;
constexpr std::size_t kType = 156;
constexpr std::size_t kMagic = 257;
constexpr std::size_t kVersion = 263;
constexpr std::size_t kPrefix = 345, kPrefixLen = 155;

std::string_view field_text(const std::uint8_t* block, std::size_t at, std::size_t len) {
  const char* p = reinterpret_cast<const char*>(block + at);
  return {p, static_cast<std::size_t>(std::find(p, p + len, '\0') - p)};
}

// An octal number (leading spaces allowed, ended by NUL or space, all-empty = 0) or GNU's
// base-256 (first byte 0x80, big-endian; 0xff would be negative, refused). Values of 2^63 and
// more are refused: offsets are added to them.
std::optional<std::uint64_t> parse_number(const std::uint8_t* field, std::size_t len) {
  if (field[0] == 0x80) {
    std::uint64_t v = 0;
    for (std::size_t i = 1; i < len; ++i) {
      if (v >> 55 != 0) return std::nullopt;
      v = v << 8 | field[i];
    }
    if (v >> 63 != 0) return std::nullopt;
    return v;
  }
  std::size_t i = 0;
  while (i < len && field[i] == ' ') ++i;
  std::uint64_t v = 0;
  std::size_t digits = 0;
  for (; i < len && field[i] >= '0' && field[i] <= '7'; ++i, ++digits) {
    if (v >> 60 != 0) return std::nullopt;
    v = v << 3 | static_cast<std::uint64_t>(field[i] - '0');
  }
  for (; i < len; ++i) {
    if (field[i] != ' ' && field[i] != '\0') return std::nullopt;
  }
  return v;
}

void put_octal(std::uint8_t* field, std::size_t len, std::uint64_t value) {
  // len - 1 digits, zero-padded, then NUL.
  for (std::size_t i = len - 1; i-- > 0;) {
    field[i] = static_cast<std::uint8_t>('0' + (value & 7));
    value >>= 3;
  }
  field[len - 1] = '\0';
}

void put_number(std::uint8_t* field, std::size_t len, std::uint64_t value) {
  if (value >> (3 * (len - 1)) == 0) return put_octal(field, len, value);
  std::memset(field, 0, len);
  field[0] = 0x80;
  for (std::size_t i = len; i-- > 1 && value != 0; value >>= 8) field[i] = static_cast<std::uint8_t>(value & 0xff);
}

void put_checksum(std::uint8_t* block) {
  std::memset(block + kChecksum, ' ', kChecksumLen);
  unsigned sum = 0;
  for (std::size_t i = 0; i < kBlock; ++i) sum += block[i];
  put_octal(block + kChecksum, 7, sum);  // six digits, NUL, then the space already there
}

void append_header_block(std::vector<std::uint8_t>& out, std::string_view name, std::string_view prefix,
                         std::uint64_t size, std::int64_t mtime, char type) {
  std::uint8_t block[kBlock] = {};
  // std::copy_n, not memcpy: an empty view's data() may be null, which memcpy must not get.
  std::copy_n(name.begin(), std::min(name.size(), kNameLen), block + kName);
  std::copy_n(prefix.begin(), std::min(prefix.size(), kPrefixLen), block + kPrefix);
  put_octal(block + kMode, kIdLen, 0644);
  put_octal(block + kUid, kIdLen, 0);
  put_octal(block + kGid, kIdLen, 0);
  put_number(block + kSize, kSizeLen, size);
  put_number(block + kMtime, kMtimeLen, static_cast<std::uint64_t>(std::max<std::int64_t>(0, mtime)));
  block[kType] = static_cast<std::uint8_t>(type);
  std::memcpy(block + kMagic, "ustar", 6);  // with its NUL
  std::memcpy(block + kVersion, "00", 2);
  put_checksum(block);
  out.insert(out.end(), block, block + kBlock);
}

}  // namespace

Block parse_header(const std::uint8_t* block, Header& out, std::string& why) {
  if (std::all_of(block, block + kBlock, [](std::uint8_t b) { return b == 0; })) return Block::kZero;
  const std::optional<std::uint64_t> stored = parse_number(block + kChecksum, kChecksumLen);
  // The checksum treats its own field as spaces; historic writers summed signed chars.
  std::uint64_t sum = 0;
  std::int64_t signed_sum = 0;
  for (std::size_t i = 0; i < kBlock; ++i) {
    const bool in_field = i >= kChecksum && i < kChecksum + kChecksumLen;
    const std::uint8_t b = in_field ? ' ' : block[i];
    sum += b;
    signed_sum += static_cast<signed char>(b);
  }
  if (!stored || (*stored != sum && static_cast<std::int64_t>(*stored) != signed_sum)) {
    why = "bad header checksum";
    return Block::kBadChecksum;
  }
  const std::optional<std::uint64_t> size = parse_number(block + kSize, kSizeLen);
  if (!size) {
    why = "the size field is not a number";
    return Block::kBadField;
  }
  out.size = *size;
  out.type = block[kType] == '\0' ? '0' : static_cast<char>(block[kType]);
  const std::string_view magic = field_text(block, kMagic, 6);
  out.ustar = magic == "ustar" || magic == "ustar ";  // POSIX "ustar\0", GNU "ustar  \0"
  const std::string_view name = field_text(block, kName, kNameLen);
  // Only POSIX ustar has a prefix field; GNU keeps other data (atime, ctime) in that space.
  const bool posix = std::memcmp(block + kMagic, "ustar", 6) == 0;
  const std::string_view prefix = posix ? field_text(block, kPrefix, kPrefixLen) : std::string_view{};
  out.name.assign(prefix);
  if (!prefix.empty()) out.name += '/';
  out.name.append(name);
  return Block::kHeader;
}

bool parse_pax(std::string_view data, PaxOverrides& out, std::string& why) {
  while (!data.empty()) {
    if (data.front() == '\0') break;  // some writers pad the data with NULs
    std::size_t length = 0;
    const auto [end, ec] = std::from_chars(data.data(), data.data() + data.size(), length);
    const std::size_t digits = static_cast<std::size_t>(end - data.data());
    if (ec != std::errc{} || digits == 0 || length <= digits + 1 || length > data.size() ||
        data[digits] != ' ' || data[length - 1] != '\n') {
      why = "malformed pax record";
      return false;
    }
    const std::string_view record = data.substr(digits + 1, length - digits - 2);
    const std::size_t eq = record.find('=');
    if (eq == std::string_view::npos) {
      why = "pax record without '='";
      return false;
    }
    const std::string_view key = record.substr(0, eq);
    const std::string_view value = record.substr(eq + 1);
    if (key == "path") {
      out.path = std::string(value);
    } else if (key == "size") {
      std::uint64_t v = 0;
      const auto [p, e] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (e != std::errc{} || p != value.data() + value.size() || v >> 63 != 0) {
        why = "pax size is not a number";
        return false;
      }
      out.size = v;
    }
    data.remove_prefix(length);
  }
  return true;
}

std::string printable(std::string_view name, std::size_t max) {
  std::string out;
  for (const char c : name.substr(0, max)) {
    const auto u = static_cast<unsigned char>(c);
    out += u < 0x20 || u == 0x7f ? '?' : c;
  }
  if (name.size() > max) out += "...";
  return out;
}

const char* compression_magic(const std::uint8_t* block) {
  const auto starts = [block](std::initializer_list<std::uint8_t> magic) {
    return std::equal(magic.begin(), magic.end(), block);
  };
  if (starts({0x1f, 0x8b})) return "gzip";
  if (starts({'B', 'Z', 'h'})) return "bzip2";
  if (starts({0xfd, '7', 'z', 'X', 'Z', 0x00})) return "xz";
  if (starts({0x28, 0xb5, 0x2f, 0xfd})) return "zstd";
  return nullptr;
}

void append_file_header(std::vector<std::uint8_t>& out, std::string_view name, std::uint64_t size,
                        std::int64_t mtime) {
  if (name.size() <= kNameLen) return append_header_block(out, name, {}, size, mtime, '0');
  // ustar's prefix: split at a '/' so the rest fits the name field.
  const std::size_t slash = name.find('/', name.size() - kNameLen - 1);
  if (slash != std::string_view::npos && slash > 0 && slash <= kPrefixLen && slash + 1 < name.size()) {
    return append_header_block(out, name.substr(slash + 1), name.substr(0, slash), size, mtime, '0');
  }
  // Longer: a pax header carries the whole name ("<len> path=<name>\n", len counting itself).
  const std::string body = " path=" + std::string(name) + "\n";
  std::size_t length = body.size() + 1;
  while (std::to_string(length).size() + body.size() != length) ++length;
  const std::string record = std::to_string(length) + body;
  append_header_block(out, "PaxHeaders/" + std::string(name.substr(name.size() - 80)), {}, record.size(), mtime, 'x');
  out.insert(out.end(), record.begin(), record.end());
  append_padding(out, record.size());
  append_header_block(out, name.substr(name.size() - kNameLen), {}, size, mtime, '0');
}

void append_padding(std::vector<std::uint8_t>& out, std::uint64_t data_size) {
  out.resize(out.size() + (padded(data_size) - data_size), 0);
}

void append_end(std::vector<std::uint8_t>& out) { out.resize(out.size() + 2 * kBlock, 0); }

}  // namespace sluice::stages::tar
