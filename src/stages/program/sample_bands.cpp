// SampleProgram's way through an image whose decoded region does not fit the memory its worker
// holds or can get (an 8000x6000 photo among 500x375 ones at the minimum budget): the
// region is decoded in row bands through the decoded-image buffer as it is, and each band is
// resampled into the sample as soon as the output rows it feeds are complete. The pixels are the
// whole-region path's (region decodes equal whole decodes inside the request, and
// Resampler::run_rows equals run), so the choice, which depends on free memory and so on timing,
// never changes a batch. The other formats take the same way where their decoder gives rows in
// order (PNG without interlacing), a full-width row at a time.
#include <algorithm>
#include <chrono>
#include <climits>
#include <functional>
#include <cstring>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"
#include "stages/program/sample_program.hpp"

namespace sluice::stages {

namespace {

// The source rows a band must keep for output rows o and later: the smallest first row any of
// them reads (rows above it are never needed again). INT_MAX for padding only.
std::vector<int> keep_from(const Resampler& r, int rows) {
  std::vector<int> keep(static_cast<std::size_t>(rows) + 1, INT_MAX);
  for (int o = rows - 1; o >= 0; --o) {
    const auto [first, end] = r.source_rows(o);
    keep[static_cast<std::size_t>(o)] = first == end ? keep[static_cast<std::size_t>(o) + 1]
                                                     : std::min(first, keep[static_cast<std::size_t>(o) + 1]);
  }
  return keep;
}

}  // namespace

void SampleProgram::decode_in_bands(const SampleGeometry& plan, std::span<const std::uint8_t> bytes,
                                    const JpegHeader& header, const JpegRequest& decode, Workspace& ws,
                                    void* out) const {
  resample_bands(plan, ws, out, [&](const Rect& footprint) {
    const JpegRequest request{.scale_denom = decode.scale_denom, .region = footprint,
                              .fast_upsample = decode.fast_upsample};
    return RowSource{ws.decoder.decoded_region(header, request),
                     [&ws, bytes, &header, request] { ws.decoder.begin_rows(bytes, header, request); },
                     [&ws](ImageView rows) { ws.decoder.read_rows(rows); }, [&ws] { ws.decoder.end_rows(); }};
  });
}

bool SampleProgram::other_format_in_bands(const SampleGeometry& plan, std::span<const std::uint8_t> bytes,
                                          const ImageProbe& probe, Workspace& ws, void* out) const {
  if (!ws.formats.begin_rows(bytes, probe)) return false;
  // The decoder hands out whole rows: the window holds full-width rows from the top.
  resample_bands(plan, ws, out, [&](const Rect& /*footprint*/) {
    return RowSource{Rect{0, 0, probe.width, probe.height}, [] {},  // begun above
                     [&ws](ImageView rows) { ws.formats.read_rows(rows); }, [&ws] { ws.formats.end_rows(); }};
  });
  return true;
}

void SampleProgram::resample_bands(const SampleGeometry& plan, Workspace& ws, void* out,
                                   const std::function<RowSource(const Rect& footprint)>& open) const {
  require_batch_size(plan);
  Resampler& resampler = ws.resampler;
  resampler.setup(ResampleParams{plan.x, plan.y, channels_, plan.filter, plan.antialias, plan.fill});
  ws.scratch.reserve(resampler.scratch_bytes());
  const std::span<std::uint8_t> scratch = ws.scratch.span(resampler.scratch_bytes());
  const bool direct = writes_direct(plan);
  const std::ptrdiff_t out_row = static_cast<std::ptrdiff_t>(plan.out.width) * channels_;
  if (!direct) ws.resized.reserve(static_cast<std::size_t>(out_row) * plan.out.height);
  const ImageView target{direct ? static_cast<std::uint8_t*>(out) : ws.resized.data(), plan.out.width,
                         plan.out.height, channels_, out_row};
  const Rect footprint = resampler.footprint();
  if (footprint.width > 0) {
    const RowSource source = open(footprint);
    const Rect& region = source.region;
    const std::size_t row_bytes = static_cast<std::size_t>(region.width) * channels_;
    // The fewest rows a band can hold: every output row's taps, and the rows kept for later ones.
    const std::vector<int> keep = keep_from(resampler, plan.out.height);
    int least = 1;
    for (int o = 0; o < plan.out.height; ++o) {
      const auto [first, end] = resampler.source_rows(o);
      if (first != end) least = std::max(least, end - keep[static_cast<std::size_t>(o)]);
    }
    // Growth past the worker's share waits while other workers' transient memory may come back,
    // and fails with kTooLarge, naming the bytes, when it cannot.
    ws.decoded.reserve(row_bytes * static_cast<std::size_t>(least));
    const int capacity = static_cast<int>(ws.decoded.capacity() / row_bytes);
    std::uint8_t* const window = ws.decoded.data();
    source.begin();
    int window_y = region.y;  // source row of the window's first
    int held = 0;             // rows the window holds
    int next = window_y;      // next row the decoder hands out
    const int region_end = region.y + region.height;
    const auto read_into_window = [&](int rows) {
      source.read(ImageView{window + static_cast<std::size_t>(held) * row_bytes, region.width, rows, channels_,
                            static_cast<std::ptrdiff_t>(row_bytes)});
      held += rows;
      next += rows;
    };
    for (int o = 0; o < plan.out.height;) {
      const auto [first, end] = resampler.source_rows(o);
      if (first != end && end > window_y + held) {
        // Slide: drop the rows no later output row reads, then fill the window from libjpeg.
        const int from = keep[static_cast<std::size_t>(o)];
        while (next < from) {  // rows nothing reads (a downscale without antialias skips some)
          held = 0;
          window_y = next;
          read_into_window(std::min(capacity, from - next));
        }
        const int drop = std::min(held, from - window_y);
        std::memmove(window, window + static_cast<std::size_t>(drop) * row_bytes,
                     static_cast<std::size_t>(held - drop) * row_bytes);
        held -= drop;
        window_y += drop;
        read_into_window(std::min(capacity - held, region_end - next));
      }
      // Every output row from o on whose taps the window now holds.
      int last = o;
      while (last < plan.out.height) {
        const auto [f, e] = resampler.source_rows(last);
        if (f != e && e > window_y + held) break;
        ++last;
      }
      resampler.run_rows(ConstImageView{window, region.width, held, channels_, static_cast<std::ptrdiff_t>(row_bytes)},
                         region.x, window_y, target, o, last, scratch);
      o = last;
    }
    while (next < region_end) {  // the rows below the last tap, so that end_rows() checks the rest
      held = 0;
      read_into_window(std::min(capacity, region_end - next));
    }
    source.end();
  } else {
    resampler.run_rows(ConstImageView{}, 0, 0, target, 0, plan.out.height, scratch);  // all padding
  }
  if (direct) {
    run_slot_ops_on(ws, out);
  } else {
    auto t = std::chrono::steady_clock::now();  // the caller counts the decode and resampling
    write_sample(plan, target, ws, out, t);
  }
}

}  // namespace sluice::stages
