// JpegDecoder: the decode_jpeg kernel. One per worker thread (it keeps libjpeg-turbo's state
// between images). Setup, then run into memory the caller owns: read_header() and
// decoded_region() say what decode() will produce, so the caller can size the output first.
//
// Everything goes through libjpeg-turbo's libjpeg API, with the parameters tjDecompress2 sets for
// the same flags (so a whole image equals tjDecompress2's output byte for byte): TurboJPEG 2.1
// (Debian 12) cannot crop or stop early (tj3SetCroppingRegion arrived in 3.0), nor go on from a
// header it has already parsed, while jpeg_crop_scanline, jpeg_skip_scanlines and a kept
// decompressor state can.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "sluice/detail/core/image.hpp"
#include "sluice/memory/budget.hpp"
#include "sluice/pipeline/options.hpp"
#include "stages/decode/jpeg_resume.hpp"

namespace sluice::stages {

enum class OnWarning : std::uint8_t;  // stages/decode/jpeg_errors.hpp
struct RowJob;                         // stages/decode/jpeg_rows.hpp
enum class RowStatus : std::uint8_t;

struct JpegHeader {
  int width = 0;
  int height = 0;
  int components = 0;      // 1 (grey), 3 (YCbCr or RGB), 4 (CMYK or YCCK)
  bool progressive = false;
  // iMCU size in full-scale pixels: 8 x the largest sampling factor. imcu_width is 8 for a
  // single-component image whatever factor it declares, as jpeg_crop_scanline aligns it.
  int imcu_width = 8;
  int imcu_height = 8;
  // libjpeg's whole-image coefficient buffer, which it allocates for a file in several scans (a
  // progressive one above all) at any DCT scale, region or band: 128 bytes an 8x8 block.
  std::uint64_t coefficient_bytes = 0;
  // Set by read_header(): a decode() of the same bytes with this header, before any other call
  // to the decoder, starts from the header already parsed. 0 (a header made by hand) re-parses.
  std::uint64_t token = 0;
};

// What libjpeg warned about while reading the last header or decoding the last image, when that
// call succeeded: a file decoded in spite of warnings is "recovered" (Stats::recovered). `first`
// points into the decoder and is valid until its next call.
struct JpegWarnings {
  int count = 0;
  std::string_view first;
};

// What the memory plan gives a decoder (runtime/loader_memory_plan.cpp), reserved when it is attached.
struct DecoderShare {
  std::uint64_t planes = 0;        // the component planes of small images (working_bytes())
  std::uint64_t coefficients = 0;  // libjpeg's coefficient buffers (JpegHeader::coefficient_bytes)

  // The larger of each, for a share that serves both images.
  DecoderShare& include(const DecoderShare& other);
};

struct JpegRequest {
  int scale_denom = 1;  // 1, 2, 4 or 8: decode at 1/denom with libjpeg's DCT scaling
  Rect region;          // in the scaled image's pixels; width == 0 means the whole image
  // Nearest (merged) chroma upsampling for this decode even when DecodeOptions::fast_upsample is
  // off: the caller shrinks the pixels anyway (DecodeOptions::fast_upsample_when_shrunk).
  bool fast_upsample = false;
};

class JpegDecoder {
 public:
  explicit JpegDecoder(const DecodeOptions& options);
  ~JpegDecoder();
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  // Parses the header only (and keeps it for the decode() that usually follows). Throws sluice::Error without a path (the caller adds it):
  // kUnsupportedFormat for data that is not a JPEG, kCorruptData for a damaged header, kTooLarge
  // above options.max_image_pixels (checked before anything is allocated).
  JpegHeader read_header(std::span<const std::uint8_t> jpeg);

  // The whole image at 1/denom, as libjpeg rounds it: ceil(width / denom) x ceil(height / denom).
  static Size2 scaled_size(const JpegHeader& header, int denom);

  // The rectangle decode() fills, in scaled-image pixels: the request clamped to the image and,
  // for a region, widened on the left to the iMCU column where libjpeg can start. With fancy
  // upsampling of subsampled chroma it is also widened by a column or two each side, so that
  // every pixel of the request equals the same pixel of a whole-image decode.
  Rect decoded_region(const JpegHeader& header, const JpegRequest& request) const;

  int channels() const;  // 3 for Color::kRGB, 1 for Color::kGrey

  // Accounts the decoder's working memory against `budget` from now on, holding `share` at once:
  // its own component planes (a small image whose planes do not fit takes libjpeg's path, which
  // gives the same pixels), and the coefficient buffer of a file in several scans, reserved
  // before it is used (past the share: free budget, else a transient reservation,
  // MemoryBudget::reserve_transient; failing both, kTooLarge naming the bytes). The buffer is the
  // decoder's own and kept between images as long as an image fits the reservation kept; one
  // that needs a transient part takes libjpeg's allocation instead, the kept buffer freed first.
  // libjpeg-turbo's other per-image memory (tables, a few rows) stays outside.
  void attach(MemoryBudget& budget, MemoryUse use, const DecoderShare& share);
  // After attach(), in set-up: the memory the first images would fault in, faulted in now, so the
  // first epoch does not pay for it (on the VMs measured a fresh 2 MiB page cost about 3 ms):
  // the first `most` bytes of the coefficient buffer mapped at the share attach() holds, and with
  // `splices` (a program that decodes crops from resume points) the splice buffer's first 2 MiB
  // where the budget has them free, as the first splice would take them. The planes, small,
  // fault in on use.
  void prefault(bool splices, std::uint64_t most);

  // Working memory this decoder keeps for a whole-image decode of a width x height image beyond
  // libjpeg-turbo's own: the component planes of a small image (see jpeg_decoder.cpp), else 0.
  static std::size_t working_bytes(int width, int height);
  // What decoding an image with this header needs of the memory attach() reserves: the planes
  // (rounded as AlignedBuffer rounds them) and libjpeg's coefficient buffers. The memory plan
  // adds this up over the probed headers (runtime/loader_memory_plan.cpp).
  static DecoderShare workspace_requirements(const JpegHeader& header);
  // The plan's coefficient share for images needing `bytes`: from 1 MiB on, whole 2 MiB, so the
  // buffer mapped for them (huge_mapping.hpp) is all 2 MiB pages and never faults in a tail of
  // 4 KiB ones; below, `bytes`. (A reservation grown at run time takes whole 2 MiB at any size
  // where the budget has them free: reserve_coefficients.)
  static std::uint64_t kept_coefficient_bytes(std::uint64_t bytes);

  // Decodes into out (decoded_region() size, channels() channels, any stride). Throws
  // sluice::Error without a path: kCorruptData for damaged data and for a file that ends before
  // the rows asked for (libjpeg would make them up); with options.strict, for any libjpeg warning
  // too. Without it, warnings are counted in warnings() and the decode goes on, as Pillow's does.
  void decode(std::span<const std::uint8_t> jpeg, const JpegHeader& header,
              const JpegRequest& request, ImageView out);

  // decode(), starting where it can from a resume point instead of Huffman-decoding the rows
  // above the region (jpeg_resume.hpp): `points` holds the file's points found so far (empty the
  // first time) and comes back extended to the rows this decode skipped. The pixels, errors and
  // warnings are decode()'s; files it cannot splice (progressive ones, restart intervals, a
  // region at the top) decode as decode() does.
  void decode(std::span<const std::uint8_t> jpeg, const JpegHeader& header, const JpegRequest& request,
              ImageView out, std::vector<ResumePoint>& points);

  // Row bands, for a region too large to hold at once: begin_rows() sets up the decode of
  // `request` and returns decoded_region(); read_rows() fills `rows` (the region's width, any
  // stride) with its next rows, top to bottom, as many as `rows` is high; end_rows() after the
  // last one. The pixels, errors and warnings are decode()'s. Any other call abandons a band
  // decode in progress.
  Rect begin_rows(std::span<const std::uint8_t> jpeg, const JpegHeader& header, const JpegRequest& request);
  void read_rows(ImageView rows);
  void end_rows();

  // What libjpeg warned about in the last read_header(), decode() or band decode (one that goes
  // on from read_header() includes the header's warnings).
  JpegWarnings warnings() const;

  // Images whose coefficient arrays (a file in several scans) came from the buffer this decoder
  // keeps between images rather than from a fresh allocation of libjpeg's.
  std::uint64_t pooled_coefficient_images() const;

 private:
  // The columns asked of jpeg_crop_scanline (before its alignment) and the rows to decode.
  Rect columns_for_libjpeg(const JpegHeader& header, const JpegRequest& request) const;
  OnWarning on_warning() const;
  RowJob prepare(std::span<const std::uint8_t> jpeg, const JpegHeader& header, const JpegRequest& request,
                 const Rect& region);
  // Starts, reads and ends the decode of `job` into out (the guarded calls of jpeg_rows.hpp).
  // `pooled`: libjpeg's coefficient arrays come from the decoder's buffer (JpegCoefficientPool).
  RowStatus run_rows(RowJob& job, ImageView out, bool pooled);
  void check_rows(RowStatus status, const RowJob& job, const JpegHeader& header, const JpegRequest& request) const;
  void abandon_rows();
  bool decode_spliced(std::span<const std::uint8_t> jpeg, const JpegHeader& header, const JpegRequest& request,
                      ImageView out, std::vector<ResumePoint>& points);
  // decode() of a file, or of one spliced from it (`splice` not null; the spliced file is `jpeg`),
  // by sluice's entropy decoder only, ended as the original's region decode ends: early, not
  // reading on to the EOI marker. False, out not all written, where that decoder gave up on the
  // spliced file: the caller decodes the original file instead.
  bool decode_image(std::span<const std::uint8_t> jpeg, const JpegHeader& header, const JpegRequest& request,
                    ImageView out, const Splice* splice);
  // Reserves the coefficient buffer `header` needs beyond what the decoder holds: kept when the
  // budget has room, else transient (returned); throws kTooLarge when it cannot have it.
  std::optional<Reservation> reserve_coefficients(const JpegHeader& header);
  // The most the kept coefficient buffer may hold: the reservation kept for the coefficients.
  std::uint64_t coefficient_bound() const;

  struct State;
  std::unique_ptr<State> state_;
  DecodeOptions options_;
};

}  // namespace sluice::stages
