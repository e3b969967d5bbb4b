// The image-format corpus of tests/reference/image_corpus.py (PNG, WebP, GIF, BMP, PNM and TIFF
// variants written by Pillow and the formats' own encoders), written once per test binary into a
// folder that lives as long as the binary; shared by the decoders' unit tests and the pipelines'
// integration tests. A binary whose Python lacks Pillow or numpy skips, saying so.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace sluice::test {

struct CorpusVariant {
  std::string name;
  int width = 0;
  int height = 0;
  int tolerance = 0;
  std::string expect;  // pixels, refused, sluice-refuses
};

class ImageCorpus {
 public:
  static const ImageCorpus& get() {
    static const ImageCorpus corpus;
    return corpus;
  }
  const std::string& error() const { return error_; }
  const std::vector<CorpusVariant>& variants() const { return variants_; }
  std::filesystem::path path(const std::string& name) const { return dir_.path() / name; }
  // The files that decode to Pillow's pixels (good), or the damaged and refused ones.
  std::vector<std::filesystem::path> files(bool good) const {
    std::vector<std::filesystem::path> out;
    for (const CorpusVariant& v : variants_) {
      if ((v.expect == "pixels") == good) out.push_back(path(v.name));
    }
    return out;
  }

 private:
  ImageCorpus() {
    const std::string command = std::string("'") + SLUICE_SYSTEM_PYTHON + "' -W ignore '" + SLUICE_SOURCE_DIR +
                                "/tests/reference/image_corpus.py' '" + dir_.path().string() + "' 2>&1";
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) {
      error_ = "cannot start " + std::string(SLUICE_SYSTEM_PYTHON);
      return;
    }
    std::string said;
    char buf[4096];
    while (std::fgets(buf, sizeof buf, pipe) != nullptr) said += buf;
    const int status = pclose(pipe);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      error_ = "the corpus script failed (it needs python3-pil and python3-numpy for " +
               std::string(SLUICE_SYSTEM_PYTHON) + "): " + said;
      return;
    }
    std::ifstream manifest(dir_.path() / "corpus.txt");
    CorpusVariant v;
    while (manifest >> v.name >> v.width >> v.height >> v.tolerance >> v.expect) variants_.push_back(v);
  }

  TempDir dir_;
  std::string error_;
  std::vector<CorpusVariant> variants_;
};

}  // namespace sluice::test

#define REQUIRE_CORPUS()                                       \
  const ::sluice::test::ImageCorpus& corpus = ::sluice::test::ImageCorpus::get(); \
  if (!corpus.error().empty()) GTEST_SKIP() << corpus.error()
