// The colour half of a JPEG decode, from the component planes libjpeg's raw-data mode hands out
// (after the IDCT, before upsampling): libjpeg-turbo's "fancy" triangle-filter chroma upsampling
// and its fixed-point YCbCr -> RGB conversion, reproduced bit for bit (the decoder's tests hold the
// result to tjDecompress2's). Why by hand: on small images (a 32x32 cifar10 JPEG) libjpeg-turbo's
// SIMD upsampler stalls on store forwarding, right after byte stores into the same row, and that
// stall was a large share of the whole loader's time (the profile and the gain are in
// docs/performance.md, "Figures behind choices in the code"). Internal to src/stages.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sluice/detail/core/image.hpp"

namespace sluice::stages {

// One component's samples: width x height real samples, rows `stride` bytes apart.
struct SamplePlane {
  const std::uint8_t* data = nullptr;
  int width = 0;
  int height = 0;
  std::ptrdiff_t stride = 0;

  const std::uint8_t* row(int y) const { return data + static_cast<std::ptrdiff_t>(y) * stride; }
};

// How the chroma planes relate to the luma plane.
enum class ChromaLayout : std::uint8_t {
  k444,  // full size (h1v1): no upsampling
  k420,  // half width and half height (h2v2), rounded up; each at least 3 samples wide
};

// Which loops ycc_to_rgb() runs: the fastest this CPU has (SSE4.1 when present), or the portable
// ones every CPU runs (tests hold the two to the same bytes).
enum class YccLoops : std::uint8_t { kFastest, kPortable };

// Bytes of scratch ycc_to_rgb() needs for an output `width` pixels wide.
std::size_t ycc_scratch_bytes(int width);

// out (RGB, out.width x out.height, the luma plane's size) from the three planes, as libjpeg-turbo
// 2.1 converts them with do_fancy_upsampling (its default). `scratch`: ycc_scratch_bytes() bytes,
// 32-byte aligned.
void ycc_to_rgb(SamplePlane y, SamplePlane cb, SamplePlane cr, ChromaLayout layout, ImageView out,
                std::uint8_t* scratch, YccLoops loops = YccLoops::kFastest);

// Grey output: the luma plane itself, copied (libjpeg's YCbCr -> grey and grey -> grey), or
// replicated into R, G and B (grey -> RGB).
void luma_to_output(SamplePlane y, ImageView out);

}  // namespace sluice::stages
