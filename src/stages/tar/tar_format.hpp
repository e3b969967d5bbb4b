// The tar format, as far as sluice reads and writes it: POSIX ustar headers (the name prefix
// field), GNU's base-256 numbers and long names ('L'), and pax extended headers ('x': path and
// size; 'g' skipped). Every field of a header is input that sluice did not write: numbers are
// parsed with their bounds checked, names cut at the field's end.
//
// Why by hand and not libarchive (Debian's libarchive-dev): the tar source reads each image with
// one pread at an offset known from its index, and libarchive reads an archive as a stream of
// members from its start (it reports where a header was, archive_read_header_position, but cannot
// open a member there); it would only do the indexing, for which a ustar header parser is a couple
// of hundred lines. Compressed tars are out of scope (uncompressed shards).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::stages::tar {

inline constexpr std::uint64_t kBlock = 512;

// The bytes a member's data occupies: its size rounded up to whole blocks. size < 2^63.
constexpr std::uint64_t padded(std::uint64_t size) { return (size + kBlock - 1) / kBlock * kBlock; }

struct Header {
  std::string name;        // ustar: prefix + '/' + name when the prefix is set; else the name field
  std::uint64_t size = 0;  // the size field: bytes of data after the header (for types that have any)
  char type = '0';         // typeflag; '\0' (pre-POSIX regular files) is reported as '0'
  bool ustar = false;      // "ustar" magic, POSIX or GNU (a resync after a bad header wants it)
};

enum class Block : std::uint8_t {
  kHeader,       // a header whose checksum matches
  kZero,         // all zeros: the end-of-archive marker
  kBadChecksum,  // the stored checksum does not match the block
  kBadField,     // checksum fine, but a number field that is not one (`why` says which)
};

// Parses one 512-byte block.
Block parse_header(const std::uint8_t* block, Header& out, std::string& why);

// Regular file members ('0', '\0', '7'): the only ones that can hold an image.
constexpr bool is_regular(char type) { return type == '0' || type == '7'; }
// Whether a member's size field counts data blocks after its header: regular files, metadata
// records (x, g, L, K) and types sluice does not know, as Python's tarfile reads them; links,
// devices, folders and FIFOs have none, whatever the field says.
constexpr bool has_data(char type) { return !(type >= '1' && type <= '6'); }

// What a pax extended header ('x') sets for the member after it.
struct PaxOverrides {
  std::optional<std::string> path;
  std::optional<std::uint64_t> size;
};
// Parses the records "<length> <key>=<value>\n" of a pax header's data. False (with why) for a
// malformed record; keys other than path and size are skipped.
bool parse_pax(std::string_view data, PaxOverrides& out, std::string& why);

// A member name for messages: control bytes as '?', at most `max` bytes (then "...").
std::string printable(std::string_view name, std::size_t max = 120);

// The compressor whose magic number starts `block` ("gzip", "bzip2", "xz", "zstd"), or nullptr.
// A compressed shard fails its first header's checksum; this lets the error say what the file is
// and what to do instead of quoting compressed bytes as a member's name.
const char* compression_magic(const std::uint8_t* block);

// ---- writing (sluice prepare shards, and tests that build shards) ------------------------------
// Appends the header of a regular file: ustar, with the prefix field for names up to 255 bytes
// that split at a '/', a pax 'x' header before it for longer names; sizes of 8 GiB and more in
// base-256. mtime in seconds since the epoch.
void append_file_header(std::vector<std::uint8_t>& out, std::string_view name, std::uint64_t size,
                        std::int64_t mtime);
// Zero bytes up to the next block boundary after `data_size` bytes of data.
void append_padding(std::vector<std::uint8_t>& out, std::uint64_t data_size);
// The end-of-archive marker: two zero blocks.
void append_end(std::vector<std::uint8_t>& out);

}  // namespace sluice::stages::tar
