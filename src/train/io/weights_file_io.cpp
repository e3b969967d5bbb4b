// The weights files' container: the atomic writer and the validating reader.
#include "train/io/weights_file_io.hpp"

#include <xxhash.h>

#include "sluice/detail/core/atomic_file.hpp"
#include "sluice/detail/core/binary_io.hpp"

namespace sluice::train::weights_io {

namespace {

// True when `head` starts with the format's magic: a weights file of the same kind may be
// replaced; anything else at the path is refused (core/atomic_file.hpp).
core::OutputFile output_for(const std::string& path, const ContainerFormat& format) {
  const std::string magic(format.magic, 8);
  return core::OutputFile{.path = path, .noun = format.noun, .mode = 0644,
                          .is_ours = [magic](std::string_view head) { return head.substr(0, 8) == magic; }};
}

}  // namespace

void check_container_output(const std::string& path, const ContainerFormat& format) {
  core::check_output(output_for(path, format));
}

void write_container(const std::string& path, const ContainerFormat& format, std::uint32_t count,
                     const std::vector<std::uint8_t>& table, const std::vector<std::uint8_t>& blob) {
  std::vector<std::uint8_t> header(format.magic, format.magic + 8);
  core::append_le<std::uint32_t>(header, format.version);
  core::append_le<std::uint32_t>(header, count);
  core::append_le<std::uint64_t>(header, table.size());
  core::append_le<std::uint64_t>(header, blob.size());
  core::append_le<std::uint64_t>(header, container_checksum(table.data(), table.size(), blob.data(), blob.size()));

  core::AtomicFileWriter out(output_for(path, format));
  out.write(header.data(), header.size());
  out.write(table.data(), table.size());
  out.write(blob.data(), blob.size());
  out.commit();
}

std::uint64_t container_checksum(const std::uint8_t* table, std::size_t table_bytes, const std::uint8_t* blob,
                                 std::size_t blob_bytes) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, table, table_bytes);
  XXH3_64bits_update(state, blob, blob_bytes);
  const std::uint64_t digest = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return digest;
}

Container read_container(const std::string& path, const ContainerFormat& format) {
  // A regular file under a bound: a FIFO is refused without blocking, a device never read.
  return parse_container(core::read_regular_file(path, core::kMaxWeightsBytes, format.noun), path, format);
}

Container parse_container(std::vector<std::uint8_t> bytes, const std::string& path, const ContainerFormat& format) {
  const std::string noun = format.noun;
  Container c;
  c.file = std::move(bytes);
  const std::vector<std::uint8_t>& file = c.file;
  if (file.size() < kContainerHeaderBytes) {
    throw Error(ErrorCode::kCorruptData, "truncated " + noun + ": " + std::to_string(file.size()) +
                                             " bytes, shorter than the " + std::to_string(kContainerHeaderBytes) +
                                             "-byte header", path);
  }
  if (std::memcmp(file.data(), format.magic, 8) != 0) {
    throw Error(ErrorCode::kUnsupportedFormat, "not a sluice " + noun + " (bad magic)", path);
  }
  Reader header(file.data() + 8, kContainerHeaderBytes - 8, path, noun + " header");
  const auto version = header.get<std::uint32_t>();
  if (version == 1 && format.version == 2) {
    // Version 1 carried a CRC-32, which sluice no longer computes (one checksum, XXH3).
    throw Error(ErrorCode::kUnsupportedFormat, noun + " version 1 (checksummed with CRC-32), written before sluice "
                                                   "moved its files to XXH3; this build reads version 2: load it with "
                                                   "the sluice that wrote it and save it again",
                path);
  }
  if (version != format.version) {
    throw Error(ErrorCode::kUnsupportedFormat, noun + " version " + std::to_string(version) +
                                                   "; this build reads version " + std::to_string(format.version),
                path);
  }
  c.count = header.get<std::uint32_t>();
  c.table_bytes = header.get<std::uint64_t>();
  c.blob_bytes = header.get<std::uint64_t>();
  const auto stored_checksum = header.get<std::uint64_t>();
  const std::uint64_t body = file.size() - kContainerHeaderBytes;
  if (c.table_bytes > body || c.blob_bytes > body - c.table_bytes) {
    throw Error(ErrorCode::kCorruptData, "truncated " + noun + ": the header announces " +
                                             std::to_string(kContainerHeaderBytes + c.table_bytes + c.blob_bytes) +
                                             " bytes, the file has " + std::to_string(file.size()), path);
  }
  if (c.table_bytes + c.blob_bytes != body) {
    throw Error(ErrorCode::kCorruptData, noun + " has " + std::to_string(body - c.table_bytes - c.blob_bytes) +
                                             " bytes after its blob", path);
  }
  c.table = file.data() + kContainerHeaderBytes;
  c.blob = c.table + c.table_bytes;
  const std::uint64_t checksum = container_checksum(c.table, c.table_bytes, c.blob, c.blob_bytes);
  if (checksum != stored_checksum) {
    throw Error(ErrorCode::kCorruptData, noun + " checksum mismatch (stored " + std::to_string(stored_checksum) +
                                             ", computed " + std::to_string(checksum) + "): the file is corrupt", path);
  }
  return c;
}

}  // namespace sluice::train::weights_io
