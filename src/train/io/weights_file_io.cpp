// The weights files' container: the atomic writer and the validating reader.
#include "train/io/weights_file_io.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "sluice/train/weights_file.hpp"

namespace sluice::train::weights_io {

void write_container(const std::string& path, const ContainerFormat& format, std::uint32_t count,
                     const std::vector<std::uint8_t>& table, const std::vector<std::uint8_t>& blob) {
  const std::string noun = format.noun;
  const std::uint32_t crc = crc32(blob.data(), blob.size(), crc32(table.data(), table.size()));
  std::vector<std::uint8_t> header(format.magic, format.magic + 8);
  put<std::uint32_t>(header, format.version);
  put<std::uint32_t>(header, count);
  put<std::uint64_t>(header, table.size());
  put<std::uint64_t>(header, blob.size());
  put<std::uint32_t>(header, crc);
  put<std::uint32_t>(header, 0);

  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size()));
    out.write(reinterpret_cast<const char*>(table.data()), static_cast<std::streamsize>(table.size()));
    out.write(reinterpret_cast<const char*>(blob.data()), static_cast<std::streamsize>(blob.size()));
    out.close();
    if (!out) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      throw Error(ErrorCode::kIo, "cannot write the " + noun, path);
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw Error(ErrorCode::kIo, "cannot rename " + tmp + " into place: " + ec.message(), path);
}

Container read_container(const std::string& path, const ContainerFormat& format) {
  const std::string noun = format.noun;
  // A regular file only: a FIFO would block the open, a device might never end.
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    throw Error(ErrorCode::kInvalidArgument, "the " + noun + " is not a regular file", path);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kNotFound, "cannot open the " + noun, path);
  Container c;
  c.file.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return parse_container(std::move(c.file), path, format);
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
  if (version != format.version) {
    throw Error(ErrorCode::kUnsupportedFormat, noun + " version " + std::to_string(version) +
                                                   "; this build reads version " + std::to_string(format.version),
                path);
  }
  c.count = header.get<std::uint32_t>();
  c.table_bytes = header.get<std::uint64_t>();
  c.blob_bytes = header.get<std::uint64_t>();
  const auto stored_crc = header.get<std::uint32_t>();
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
  const std::uint32_t crc = crc32(c.blob, c.blob_bytes, crc32(c.table, c.table_bytes));
  if (crc != stored_crc) {
    throw Error(ErrorCode::kCorruptData, noun + " checksum mismatch (stored " + std::to_string(stored_crc) +
                                             ", computed " + std::to_string(crc) + "): the file is corrupt", path);
  }
  return c;
}

}  // namespace sluice::train::weights_io
