// IDX reading: zlib's gz* interface for the bytes, then a strict header check. Parsing happens in
// place (the header is dropped from the front of the buffer) so a 47 MB image file is held once.
#include "cli/idx_reader.hpp"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "sluice/core/error.hpp"

namespace sluice::cli {
namespace {

std::uint32_t read_be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

std::string magic_name(std::uint32_t magic) {
  switch (magic) {
    case kIdxImagesMagic: return "2051 (IDX images)";
    case kIdxLabelsMagic: return "2049 (IDX labels)";
    default: return std::to_string(magic);
  }
}

// Opens with open(2) first so a missing or unreadable file gets errno's cause, which gzopen
// reports less precisely.
gzFile open_gzip(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw Error(ErrorCode::kNotFound, "no such file", path.string());
  }
  if (std::filesystem::is_directory(path, ec)) {
    throw Error(ErrorCode::kInvalidArgument, "is a directory, expected an IDX file", path.string());
  }
  // gzopen on a FIFO would wait for a writer, on a device might never end.
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw Error(ErrorCode::kInvalidArgument, "not a regular file, expected an IDX file", path.string());
  }
  errno = 0;
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    const int err = errno;
    throw Error(err == EACCES ? ErrorCode::kPermissionDenied : ErrorCode::kIo,
                std::string("cannot open: ") + (err != 0 ? std::strerror(err) : "zlib failed"),
                path.string());
  }
  return file;
}

void check_magic(const std::vector<std::uint8_t>& bytes, std::uint32_t expected,
                 const std::filesystem::path& path) {
  if (bytes.size() < 4) {
    throw Error(ErrorCode::kCorruptData,
                "too short for an IDX header (" + std::to_string(bytes.size()) + " bytes)",
                path.string());
  }
  const std::uint32_t magic = read_be32(bytes.data());
  if (magic != expected) {
    throw Error(ErrorCode::kCorruptData,
                "wrong magic number " + magic_name(magic) + ", expected " + magic_name(expected) +
                    ": not the IDX file this name should hold",
                path.string());
  }
}

// Drops the header and checks that what remains is exactly what the header announces.
void check_payload(std::vector<std::uint8_t>& bytes, std::size_t header_size,
                   std::uint64_t expected_payload, const std::string& what,
                   const std::filesystem::path& path) {
  if (bytes.size() < header_size) {
    throw Error(ErrorCode::kCorruptData,
                "truncated header (" + std::to_string(bytes.size()) + " of " +
                    std::to_string(header_size) + " bytes)",
                path.string());
  }
  const std::uint64_t payload = bytes.size() - header_size;
  if (payload < expected_payload) {
    throw Error(ErrorCode::kCorruptData,
                "truncated: the header announces " + what + " (" +
                    std::to_string(expected_payload) + " bytes) but the file holds " +
                    std::to_string(payload),
                path.string());
  }
  if (payload > expected_payload) {
    throw Error(ErrorCode::kCorruptData,
                "the header announces " + what + " (" + std::to_string(expected_payload) +
                    " bytes) but the file holds " + std::to_string(payload) +
                    ": trailing data, or a header from another file",
                path.string());
  }
  bytes.erase(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(header_size));
}

}  // namespace

std::vector<std::uint8_t> read_gzip_file(const std::filesystem::path& path, std::size_t max_bytes) {
  gzFile file = open_gzip(path);
  // A bigger internal buffer than zlib's default 8 KiB: fewer read(2) calls for the same bytes
  // (docs/performance.md, "Figures behind choices in the code", has the counts and times).
  gzbuffer(file, 1 << 18);
  std::vector<std::uint8_t> bytes;
  std::size_t used = 0;
  constexpr std::size_t kChunk = std::size_t{1} << 22;
  for (;;) {
    if (bytes.size() - used < kChunk) bytes.resize(used + kChunk);
    const int got = gzread(file, bytes.data() + used, static_cast<unsigned>(kChunk));
    if (got < 0) {
      int code = 0;
      const std::string message = gzerror(file, &code);
      gzclose(file);
      throw Error(code == Z_ERRNO ? ErrorCode::kIo : ErrorCode::kCorruptData,
                  "damaged gzip data: " + message, path.string());
    }
    used += static_cast<std::size_t>(got);
    if (used > max_bytes) {
      gzclose(file);
      throw Error(ErrorCode::kTooLarge,
                  "decompresses to more than " + std::to_string(max_bytes) + " bytes",
                  path.string());
    }
    if (got == 0) break;
  }
  // gzread returns the data before a cut-off stream and reports the cut only through gzerror.
  int code = Z_OK;
  const std::string message = gzerror(file, &code);
  const int close_status = gzclose(file);
  if (code != Z_OK || close_status == Z_BUF_ERROR) {
    throw Error(ErrorCode::kCorruptData,
                "damaged gzip data: " + (code != Z_OK ? message : std::string("truncated stream")),
                path.string());
  }
  bytes.resize(used);
  bytes.shrink_to_fit();
  return bytes;
}

IdxImages parse_idx_images(std::vector<std::uint8_t> bytes, const std::filesystem::path& path) {
  check_magic(bytes, kIdxImagesMagic, path);
  constexpr std::size_t kHeader = 16;
  if (bytes.size() < kHeader) {
    throw Error(ErrorCode::kCorruptData,
                "truncated header (" + std::to_string(bytes.size()) + " of 16 bytes)",
                path.string());
  }
  IdxImages images;
  images.count = read_be32(bytes.data() + 4);
  images.rows = read_be32(bytes.data() + 8);
  images.cols = read_be32(bytes.data() + 12);
  if (images.rows == 0 || images.cols == 0 || images.rows > 65535 || images.cols > 65535) {
    throw Error(ErrorCode::kCorruptData,
                "implausible image size " + std::to_string(images.rows) + "x" +
                    std::to_string(images.cols),
                path.string());
  }
  // Checked: 2^32 images of 65535x65535 would not wrap 64 bits, but the bound is cheap to state.
  std::uint64_t payload = 0;
  if (__builtin_mul_overflow(std::uint64_t{images.count}, std::uint64_t{images.rows} * images.cols, &payload)) {
    throw Error(ErrorCode::kCorruptData, "the header announces more bytes than 64 bits count", path.string());
  }
  check_payload(bytes, kHeader, payload,
                std::to_string(images.count) + " images of " + std::to_string(images.rows) + "x" +
                    std::to_string(images.cols),
                path);
  images.pixels = std::move(bytes);
  return images;
}

IdxLabels parse_idx_labels(std::vector<std::uint8_t> bytes, const std::filesystem::path& path) {
  check_magic(bytes, kIdxLabelsMagic, path);
  constexpr std::size_t kHeader = 8;
  if (bytes.size() < kHeader) {
    throw Error(ErrorCode::kCorruptData,
                "truncated header (" + std::to_string(bytes.size()) + " of 8 bytes)",
                path.string());
  }
  const std::uint32_t count = read_be32(bytes.data() + 4);
  check_payload(bytes, kHeader, count, std::to_string(count) + " labels", path);
  return IdxLabels{std::move(bytes)};
}

}  // namespace sluice::cli
