// What the file-format fuzzers share: aborting on a finding, a scratch folder for
// targets whose code under test reads files by path, and writing a target's seed corpus.
//
// Seeds: each target defines write_seeds(folder); scripts/fuzz runs the target once with
// SLUICE_FUZZ_WRITE_SEEDS=<folder> and LLVMFuzzerInitialize (here) writes them and exits, so the
// seeds come from the same code that writes the real formats, never from files in the repository.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sluice/core/error.hpp"

namespace sluice::fuzz {

[[noreturn]] inline void finding(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzzer finding: %s: %s\n", what, detail.c_str());
  std::abort();
}

// sluice::Error is the expected outcome of bad bytes; kInternal is a bug.
inline void check_error(const Error& e, const char* where) {
  if (e.code() == ErrorCode::kInternal) finding(where, e.what());
}

// A folder of this process's own, on tmpfs when there is one (removed at exit by the OS only:
// libFuzzer exits with _exit, so nothing here relies on destructors).
inline const std::filesystem::path& scratch() {
  static const std::filesystem::path dir = [] {
    std::filesystem::path base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    std::filesystem::path d = base / ("sluice-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

inline void write_file(const std::filesystem::path& path, const std::uint8_t* data, std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) finding("scratch", "cannot write " + path.string());
}

inline void write_seed(const std::filesystem::path& folder, const std::string& name, const std::vector<std::uint8_t>& bytes) {
  write_file(folder / name, bytes.data(), bytes.size());
}

void write_seeds(const std::filesystem::path& folder);  // defined by each target

}  // namespace sluice::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* folder = std::getenv("SLUICE_FUZZ_WRITE_SEEDS")) {
    std::filesystem::create_directories(folder);
    sluice::fuzz::write_seeds(folder);
    std::exit(0);
  }
  return 0;
}
