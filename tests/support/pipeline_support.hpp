// Helpers for tests that run whole pipelines: data sets whose pixels encode the item's index
// (so a batch can be checked against its labels), checksums of epochs, and bad-file makers.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "sluice/sluice.hpp"

namespace sluice::test {

// `count` 24x16 solid-colour JPEGs under root/, item i coloured by colour_of(i); returns items
// with label = i, so a sample's label and its pixels must agree.
std::vector<Item> make_coded_items(const std::filesystem::path& root, int count);
// The colour make_coded_items gives item i (each channel a multiple of 16, so JPEG keeps it
// within +-2).
std::array<std::uint8_t, 3> colour_of(int index);
// The index whose colour is nearest to an RGB pixel.
int index_of_colour(const std::uint8_t* rgb);

// The bytes in use of memory use `use` ("remote", "items", ...) in `stats`; a test failure (and 0)
// when stats has no such use.
std::uint64_t memory_used(const Stats& stats, const std::string& use);

// A hash of every batch's bytes and labels, in order, for one epoch.
std::uint64_t epoch_checksum(Loader& loader, std::int64_t epoch);

// Bad inputs, written into dir; each returns the file's path.
std::filesystem::path write_truncated_jpeg(const std::filesystem::path& dir);
std::filesystem::path write_empty_jpeg(const std::filesystem::path& dir);
std::filesystem::path write_png_named_jpg(const std::filesystem::path& dir);
std::filesystem::path write_random_bytes_jpg(const std::filesystem::path& dir);
std::filesystem::path write_huge_header_jpeg(const std::filesystem::path& dir);  // claims 60000x60000

}  // namespace sluice::test
