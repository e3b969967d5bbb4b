// What the JpegDecoder tests share (jpeg_decoder_test.cpp, jpeg_decoder_errors_test.cpp): an
// image as bytes, decode() through the decoder's own calls, TurboJPEG's tjDecompress2 as the
// reference, and samples of the shared datasets with their progressive and greyscale files.
#pragma once

#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "stages/decode/jpeg_decoder.hpp"
#include "test_support.hpp"

namespace sluice::stages::jpeg_test {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;
using test::encode_jpeg;
using test::make_pattern;
using test::read_bytes;

struct Image {
  int width = 0, height = 0, channels = 0;
  Bytes pixels;
  const std::uint8_t* at(int x, int y) const {
    return pixels.data() + (static_cast<std::size_t>(y) * width + x) * channels;
  }
};

inline DecodeOptions options(Color color, bool fast_dct = false, bool fast_upsample = false) {
  DecodeOptions o;
  o.color = color;
  o.fast_dct = fast_dct;
  o.fast_upsample = fast_upsample;
  return o;
}

inline Image decode(JpegDecoder& decoder, const Bytes& jpeg, JpegRequest request = {}) {
  const JpegHeader header = decoder.read_header(jpeg);
  const Rect r = decoder.decoded_region(header, request);
  Image image{r.width, r.height, decoder.channels(), {}};
  image.pixels.resize(static_cast<std::size_t>(r.width) * r.height * image.channels);
  decoder.decode(jpeg, header, request,
                 ImageView{image.pixels.data(), r.width, r.height, image.channels,
                           static_cast<std::ptrdiff_t>(r.width) * image.channels});
  return image;
}

// TurboJPEG's own decode at 1/denom: the reference. Returns rc != 0 images as empty.
inline Image turbo_decode(const Bytes& jpeg, int denom, int pixel_format, int flags, int* rc = nullptr) {
  tjhandle tj = tjInitDecompress();
  int w = 0, h = 0, subsamp = 0, space = 0;
  tjDecompressHeader3(tj, jpeg.data(), jpeg.size(), &w, &h, &subsamp, &space);
  const tjscalingfactor f{1, denom};
  Image image{TJSCALED(w, f), TJSCALED(h, f), tjPixelSize[pixel_format], {}};
  image.pixels.resize(static_cast<std::size_t>(image.width) * image.height * image.channels);
  const int result = tjDecompress2(tj, jpeg.data(), jpeg.size(), image.pixels.data(), image.width, 0,
                                   image.height, pixel_format, flags);
  tjDestroy(tj);
  if (rc != nullptr) *rc = result;
  if (result != 0 && rc == nullptr) ADD_FAILURE() << "tjDecompress2 failed";
  return image;
}

inline std::vector<fs::path> jpegs_under(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Every step-th file plus up to `special` progressive and `special` greyscale ones (found from
// their headers).
struct Sample {
  std::vector<fs::path> files;
  int progressive = 0, grey = 0;
};
inline Sample sample_of(const fs::path& dir, int step, int special = 1000) {
  Sample s;
  JpegDecoder probe({});
  const auto all = jpegs_under(dir);
  for (std::size_t i = 0; i < all.size(); ++i) {
    const JpegHeader h = probe.read_header(read_bytes(all[i]));
    const bool progressive = h.progressive && s.progressive < special;
    const bool grey = h.components == 1 && s.grey < special;
    if (i % step == 0 || progressive || grey) s.files.push_back(all[i]);
    s.progressive += progressive;
    s.grey += grey;
  }
  return s;
}

}  // namespace sluice::stages::jpeg_test
