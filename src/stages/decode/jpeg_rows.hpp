// libjpeg's side of JpegDecoder: one decode as plain data (RowJob) and the setjmp-guarded calls
// that start it (header, parameters, crop and skip, or the raw component planes of a small whole
// image), read its rows (scanlines; CMYK converted as Pillow converts it) and end it (the
// truncation check, then jpeg_finish_decompress or an early stop). A guard that fails returns with
// the decompressor reset, so the next image starts clean; the caller throws from the error
// manager. Internal to src/stages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>  // jpeglib.h needs FILE and size_t declared first
#include <span>

#include <jpeglib.h>

#include "sluice/detail/core/image.hpp"
#include "stages/decode/jpeg_errors.hpp"
#include "stages/decode/jpeg_huffman.hpp"
#include "stages/decode/ycc_planes.hpp"

namespace sluice::stages {

// Rows offered to one jpeg_read_scanlines call: it returns at most one row group (a few rows) per
// call anyway, and this is also the height of the CMYK scratch.
inline constexpr int kRowsPerRead = 16;

// One decode, as plain data: the guarded functions may longjmp, so it must not own anything with
// a destructor.
struct RowJob {
  std::span<const std::uint8_t> jpeg;
  bool header_read = false;  // read_header() left this image's header in the decompressor
  bool whole = false;        // every row and column: end with jpeg_finish_decompress, as TurboJPEG does
  int expect_width = 0;   // the header the caller passed, checked against the data
  int expect_height = 0;
  int denom = 1;
  J_COLOR_SPACE color_space = JCS_RGB;
  bool fast_dct = false;
  bool fast_upsample = false;
  bool crop = false;      // narrower than the scaled image: call jpeg_crop_scanline
  int crop_x = 0;         // the requested columns, before libjpeg's alignment
  int crop_width = 0;
  Rect region;            // decoded_region(): what libjpeg must produce
  std::uint8_t* cmyk = nullptr;  // kRowsPerRead CMYK rows to convert from, or null
  bool grey = false;
  Rect produced;          // out: the columns libjpeg chose and the rows it skipped, for the error
  int rows_read = 0;      // rows of the region handed out so far
  // Room for component planes (planes_bytes() of the image), or null: the scanline path only.
  std::uint8_t* planes = nullptr;
  std::size_t planes_capacity = 0;
  // out: the planes, when they were used instead of scanlines
  int plane_count = 0;
  SamplePlane plane[3];
  ChromaLayout chroma = ChromaLayout::k444;
  Truncation truncation = Truncation::kNone;  // out: what the data lacked, when it ended early
  int missing_table = -1;  // out: the quantisation table the image used without defining it
  // Put sluice's entropy decoder in libjpeg's place where it applies (jpeg_huffman.hpp); when it
  // gives up, err.own_huffman_gave_up is set and the caller runs the job again without it.
  bool own_huffman = false;
  // A spliced file: only sluice's decoder decodes it (it gives up where it cannot), and a job
  // that gives up is not run again on this file (SplicedScan, jpeg_huffman.hpp).
  SplicedScan spliced;
};

enum class RowStatus : std::uint8_t {
  kOk,
  kLibjpegFailed,
  kTruncated,
  kTableMissing,
  kHeaderMismatch,
  kGeometryMismatch,
};

// Room for the component planes and ycc_to_rgb's scratch of a width x height image.
std::size_t planes_bytes(int width, int height);

// libjpeg's whole-image coefficient buffer for the header cinfo holds (JpegHeader::coefficient_bytes).
std::uint64_t coefficient_bytes(jpeg_decompress_struct& cinfo);

// libjpeg keeps quantisation and Huffman tables from one image to the next, in its permanent pool,
// for "abbreviated" files that rely on tables sent before. A worker's images come in an order
// that depends on thread timing, so no image may see another's: before each header, every kept
// Huffman table becomes what a fresh decompressor would use in its place (libjpeg-turbo's
// standard table for slots 0 and 1, an invalid one that fails on use for 2 and 3), and every kept
// quantisation table an invalid all-zero one (the standard allows no zero), which
// end_rows_guarded refuses as "not defined", as a fresh decompressor would at once.
void forget_tables(jpeg_decompress_struct& cinfo);

bool create_guarded(jpeg_decompress_struct& cinfo, JpegErrorManager& err);
bool read_header_guarded(jpeg_decompress_struct& cinfo, JpegErrorManager& err, std::span<const std::uint8_t> jpeg);
// Starts the decode: on kOk either the whole image is in the planes (job.plane_count > 0) or
// job.region's rows are ready to be read, from its top.
RowStatus start_rows_guarded(jpeg_decompress_struct& cinfo, JpegErrorManager& err, RowJob& job);
// The region's next out.height rows into out (out.width = job.region.width).
RowStatus read_rows_guarded(jpeg_decompress_struct& cinfo, JpegErrorManager& err, RowJob& job, ImageView out);
// After the last row: fails a decode whose rows libjpeg made up (the data ended too early), else
// reads on to EOI (a whole image, as TurboJPEG does) or stops early.
RowStatus end_rows_guarded(jpeg_decompress_struct& cinfo, JpegErrorManager& err, RowJob& job);

}  // namespace sluice::stages
