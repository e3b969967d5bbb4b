// JpegDecoder: the decode_jpeg kernel on libjpeg-turbo 2.1, through its libjpeg API: whole images,
// DCT scaling, regions with crop and skip, and an early stop. read_header() leaves the parsed
// header in the decompressor, and a decode() of the same bytes right after it starts from there,
// so each image's markers are parsed once: on small images the second parse was a good part of
// the decode (docs/performance.md, "Figures behind choices in the code"). Everything runs on
// state made once per decoder, so a warmed-up
// decoder makes no C++ heap allocation per image. What remains is malloc'd inside libjpeg-turbo,
// where we cannot pool it: its per-image pool (tables, row buffers and, for a progressive file,
// the whole image's DCT coefficients: 2 bytes per sample), freed when each image ends.
#include "stages/jpeg_decoder.hpp"

#include <algorithm>
#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE and size_t declared first
#include <string>

#include <jerror.h>
#include <jpeglib.h>

#include "sluice/core/error.hpp"
#include "sluice/memory/aligned_buffer.hpp"
#include "stages/jpeg_errors.hpp"
#include "stages/ycc_planes.hpp"

namespace sluice::stages {
namespace {

// Rows offered to one jpeg_read_scanlines call: it returns at most one row group (a few rows) per
// call anyway, and this is also the height of the CMYK scratch.
constexpr int kRowsPerRead = 16;

// Columns decoded right of a region under fancy upsampling (see columns_for_libjpeg).
constexpr int kFancyMargin = 2;

// Whole images up to this many pixels are decoded to component planes (libjpeg's raw-data mode)
// and given their colour by ycc_planes.cpp instead of libjpeg-turbo's upsampler and converter
// (see ycc_planes.hpp for why). The bound keeps the planes buffer small (a few tens of KB); larger
// images keep libjpeg-turbo's own path, since the gain was measured on small images only.
constexpr std::int64_t kPlanesMaxPixels = 128 * 128;

// The most rows of one component one jpeg_read_raw_data call asks for: v_samp_factor <= 2.
constexpr int kMaxRawRows = 2 * DCTSIZE;

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// Room for the component planes and ycc_to_rgb's scratch of a width x height image: three planes
// of at most the iMCU-padded size, each row 32-byte aligned.
std::size_t planes_bytes(int width, int height) {
  const std::size_t stride = round_up(static_cast<std::size_t>(width), 32);
  return 3 * stride * round_up(static_cast<std::size_t>(height), 2 * DCTSIZE) + ycc_scratch_bytes(width);
}

// libjpeg's RGB -> Y weights (jdcolor.c: FIX(0.29900), FIX(0.58700), FIX(0.11400) at 16 bits), so
// grey from CMYK rounds exactly as grey from an RGB JPEG does.
constexpr int kLumaR = 19595;
constexpr int kLumaG = 38470;
constexpr int kLumaB = 7471;

// Rounded a * b / 255 for bytes, exact (no ties exist since 255 is odd): Pillow's MULDIV255.
inline int mul_div255(int a, int b) {
  const int t = a * b + 128;
  return (t + (t >> 8)) >> 8;
}

// CMYK as stored by Adobe-style (inverted) JPEGs to RGB or grey, the way Pillow converts them:
// R = C*K/255 on the stored values; grey is libjpeg's luma of that RGB.
void convert_cmyk_row(const std::uint8_t* cmyk, std::uint8_t* out, int width, bool grey) {
  for (int x = 0; x < width; ++x, cmyk += 4) {
    const int k = cmyk[3];
    const int r = mul_div255(cmyk[0], k);
    const int g = mul_div255(cmyk[1], k);
    const int b = mul_div255(cmyk[2], k);
    if (grey) {
      out[x] = static_cast<std::uint8_t>((kLumaR * r + kLumaG * g + kLumaB * b + 32768) >> 16);
    } else {
      out[3 * x] = static_cast<std::uint8_t>(r);
      out[3 * x + 1] = static_cast<std::uint8_t>(g);
      out[3 * x + 2] = static_cast<std::uint8_t>(b);
    }
  }
}

Error invalid(const std::string& cause) { return Error(ErrorCode::kInvalidArgument, cause); }

std::string rect_string(const Rect& r) {
  return std::to_string(r.width) + "x" + std::to_string(r.height) + "+" + std::to_string(r.x) + "+" +
         std::to_string(r.y);
}

// One libjpeg-path decode, as plain data: the guarded function below may longjmp, so it must not
// own anything with a destructor.
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
  ImageView out;
  std::uint8_t* cmyk = nullptr;  // kRowsPerRead CMYK rows to convert from, or null
  bool grey = false;
  Rect produced;          // out: the columns libjpeg chose and the rows it skipped, for the error
  // Room for component planes (planes_bytes() of the image), or null: the scanline path only.
  std::uint8_t* planes = nullptr;
  std::size_t planes_capacity = 0;
  // out: the planes, when they were used instead of scanlines
  int plane_count = 0;
  SamplePlane plane[3];
  ChromaLayout chroma = ChromaLayout::k444;
  Truncation truncation = Truncation::kNone;  // out: what the data lacked, when it ended early
};

// The planes ycc_planes.cpp can colour as libjpeg would: grey, or YCbCr at 4:4:4 or 4:2:0 with
// chroma at least 3 samples wide (narrower, libjpeg upsamples by repetition). Sets job.chroma.
bool planes_apply(const jpeg_decompress_struct& cinfo, RowJob& job) {
  if (job.color_space != JCS_RGB && job.color_space != JCS_GRAYSCALE) return false;
  if (cinfo.max_v_samp_factor > 2) return false;
  if (cinfo.num_components == 1) return cinfo.jpeg_color_space == JCS_GRAYSCALE;
  // Grey from colour: libjpeg decodes the luma alone, cheaper than three planes.
  if (job.color_space != JCS_RGB || cinfo.num_components != 3 || cinfo.jpeg_color_space != JCS_YCbCr) return false;
  const jpeg_component_info* c = cinfo.comp_info;
  const bool chroma_full = c[1].h_samp_factor == 1 && c[1].v_samp_factor == 1 && c[2].h_samp_factor == 1 &&
                           c[2].v_samp_factor == 1;
  if (!chroma_full) return false;
  if (c[0].h_samp_factor == 1 && c[0].v_samp_factor == 1) {
    job.chroma = ChromaLayout::k444;
    return true;
  }
  if (c[0].h_samp_factor == 2 && c[0].v_samp_factor == 2 && c[1].downsampled_width > 2) {
    job.chroma = ChromaLayout::k420;
    return true;
  }
  return false;
}

// Reads every component's samples into job.planes with jpeg_read_raw_data (state: header read,
// parameters set). Returns false, having touched nothing, when they do not fit.
bool read_planes(jpeg_decompress_struct& cinfo, RowJob& job) {
  const int count = cinfo.num_components;
  std::size_t stride[3];
  std::size_t offset[4] = {0, 0, 0, 0};  // where each plane starts; offset[count] is the total
  for (int c = 0; c < count; ++c) {
    const jpeg_component_info& comp = cinfo.comp_info[c];
    stride[c] = round_up(static_cast<std::size_t>(comp.width_in_blocks) * DCTSIZE, 32);
    offset[c + 1] = offset[c] + stride[c] * cinfo.total_iMCU_rows * comp.v_samp_factor * DCTSIZE;
  }
  if (offset[count] > job.planes_capacity) return false;
  cinfo.raw_data_out = TRUE;
  jpeg_start_decompress(&cinfo);
  std::uint8_t* base[3];
  for (int c = 0; c < count; ++c) {
    const jpeg_component_info& comp = cinfo.comp_info[c];
    base[c] = job.planes + offset[c];
    job.plane[c] = SamplePlane{base[c], static_cast<int>(comp.downsampled_width),
                               static_cast<int>(comp.downsampled_height), static_cast<std::ptrdiff_t>(stride[c])};
  }
  JSAMPROW rows[3][kMaxRawRows];
  JSAMPARRAY arrays[3] = {rows[0], rows[1], rows[2]};
  const int lines = cinfo.max_v_samp_factor * DCTSIZE;
  for (JDIMENSION imcu = 0; cinfo.output_scanline < cinfo.output_height; ++imcu) {
    for (int c = 0; c < count; ++c) {
      const int per = cinfo.comp_info[c].v_samp_factor * DCTSIZE;
      for (int k = 0; k < per; ++k) rows[c][k] = base[c] + (static_cast<std::size_t>(imcu) * per + k) * stride[c];
    }
    if (jpeg_read_raw_data(&cinfo, arrays, static_cast<JDIMENSION>(lines)) == 0) {
      ERREXIT(&cinfo, JERR_TOO_LITTLE_DATA);  // cannot happen with a memory source; never spin
    }
  }
  job.plane_count = count;
  return true;
}

enum class RowStatus { kOk, kLibjpegFailed, kTruncated, kHeaderMismatch, kGeometryMismatch };

}  // namespace

struct JpegDecoder::State {
  jpeg_decompress_struct cinfo{};
  JpegErrorManager err{};
  bool cinfo_created = false;
  AlignedBuffer cmyk_rows;  // CMYK scanlines awaiting conversion; grows to the widest image
  AlignedBuffer planes;     // component planes of small images; grows to the largest of them
  // The header cinfo holds (state DSTATE_READY), if any: the bytes it was read from and the
  // JpegHeader::token read_header() gave them. Any other use of cinfo aborts it first.
  const std::uint8_t* pending_data = nullptr;
  std::size_t pending_size = 0;
  std::uint64_t pending_token = 0;
  std::uint64_t next_token = 0;

  void drop_pending() {
    if (pending_data == nullptr) return;
    jpeg_abort_decompress(&cinfo);
    pending_data = nullptr;
  }

  ~State() {
    if (cinfo_created) jpeg_destroy_decompress(&cinfo);
  }
};

namespace {

// The setjmp guards. Each returns to its caller with the decompressor reset (jpeg_abort_decompress)
// whatever happened, so the next image starts clean; the caller throws from err.

bool create_guarded(jpeg_decompress_struct& cinfo, JpegErrorManager& err) {
  if (setjmp(err.jump) != 0) return false;
  jpeg_create_decompress(&cinfo);
  return true;
}

bool read_header_guarded(jpeg_decompress_struct& cinfo, JpegErrorManager& err,
                         std::span<const std::uint8_t> jpeg) {
  if (setjmp(err.jump) != 0) {
    jpeg_abort_decompress(&cinfo);
    return false;
  }
  // The source manager is allocated once in the permanent pool and reused by later calls.
  jpeg_mem_src(&cinfo, jpeg.data(), static_cast<unsigned long>(jpeg.size()));
  jpeg_read_header(&cinfo, TRUE);
  return true;
}

// After the last row: fails a decode whose rows would be made up (the data ended too early), else
// ends it. Called from inside a guard.
RowStatus end_decode(jpeg_decompress_struct& cinfo, const JpegErrorManager& err, RowJob& job) {
  job.truncation = truncation_of(cinfo, err);
  if (job.truncation != Truncation::kNone) {
    jpeg_abort_decompress(&cinfo);
    return RowStatus::kTruncated;
  }
  if (job.whole) {
    // Reads on to the EOI marker, so damage after the last row is reported as TurboJPEG's
    // tjDecompress2 reports it.
    jpeg_finish_decompress(&cinfo);
  } else {
    // Stop early: rows below the region are never decoded (for a baseline file, never even read).
    jpeg_abort_decompress(&cinfo);
  }
  return RowStatus::kOk;
}

RowStatus decode_rows_guarded(jpeg_decompress_struct& cinfo, JpegErrorManager& err, RowJob& job) {
  if (setjmp(err.jump) != 0) {
    jpeg_abort_decompress(&cinfo);
    return RowStatus::kLibjpegFailed;
  }
  if (!job.header_read) {
    jpeg_mem_src(&cinfo, job.jpeg.data(), static_cast<unsigned long>(job.jpeg.size()));
    jpeg_read_header(&cinfo, TRUE);
  }
  if (static_cast<int>(cinfo.image_width) != job.expect_width ||
      static_cast<int>(cinfo.image_height) != job.expect_height) {
    jpeg_abort_decompress(&cinfo);
    return RowStatus::kHeaderMismatch;
  }
  // The same parameters tjDecompress2 sets for the same flags, so both paths agree byte for byte.
  cinfo.scale_num = 1;
  cinfo.scale_denom = static_cast<unsigned int>(job.denom);
  cinfo.out_color_space = job.color_space;
  cinfo.dct_method = job.fast_dct ? JDCT_IFAST : JDCT_ISLOW;
  cinfo.do_fancy_upsampling = job.fast_upsample ? FALSE : TRUE;
  // libjpeg-turbo 2.1.5 bug on a reused decompressor: with the merged upsampler (fast_upsample,
  // 4:2:0 -> RGB at full scale) no colour deconverter is made, so cinfo.cconvert still points at
  // the previous image's, freed by jpeg_abort_decompress; jpeg_skip_scanlines then writes through
  // it (heap corruption, found with valgrind). NULL is the state it handles.
  cinfo.cconvert = nullptr;
  cinfo.cquantize = nullptr;
  if (job.whole && job.denom == 1 && job.planes != nullptr && !job.fast_upsample && planes_apply(cinfo, job) &&
      read_planes(cinfo, job)) {
    job.produced = job.region;
    return end_decode(cinfo, err, job);
  }
  jpeg_start_decompress(&cinfo);

  if (job.crop) {
    auto x = static_cast<JDIMENSION>(job.crop_x);
    auto width = static_cast<JDIMENSION>(job.crop_width);
    jpeg_crop_scanline(&cinfo, &x, &width);
    job.produced.x = static_cast<int>(x);
  }
  job.produced.width = static_cast<int>(cinfo.output_width);
  if (job.produced.x == job.region.x && job.produced.width == job.region.width && job.region.y > 0) {
    // Whole iMCU rows above the region are entropy-decoded only (no IDCT, no colour conversion).
    job.produced.y = static_cast<int>(jpeg_skip_scanlines(&cinfo, static_cast<JDIMENSION>(job.region.y)));
  }
  job.produced.height = job.region.height;
  if (job.produced != job.region) {
    jpeg_abort_decompress(&cinfo);
    return RowStatus::kGeometryMismatch;
  }

  const std::ptrdiff_t cmyk_stride = static_cast<std::ptrdiff_t>(job.region.width) * 4;
  JSAMPROW rows[kRowsPerRead];
  int done = 0;
  while (done < job.region.height) {
    const int want = std::min(kRowsPerRead, job.region.height - done);
    for (int i = 0; i < want; ++i) {
      rows[i] = job.cmyk != nullptr ? job.cmyk + i * cmyk_stride : job.out.row(done + i);
    }
    const int got = static_cast<int>(jpeg_read_scanlines(&cinfo, rows, static_cast<JDIMENSION>(want)));
    if (got == 0) {  // cannot happen with a memory source (it never suspends); never spin
      job.produced.height = done;
      jpeg_abort_decompress(&cinfo);
      return RowStatus::kGeometryMismatch;
    }
    if (job.cmyk != nullptr) {
      for (int i = 0; i < got; ++i) {
        convert_cmyk_row(rows[i], job.out.row(done + i), job.region.width, job.grey);
      }
    }
    done += got;
  }
  return end_decode(cinfo, err, job);
}

}  // namespace

JpegDecoder::JpegDecoder(const DecodeOptions& options)
    : state_(std::make_unique<State>()), options_(options) {
  State& s = *state_;
  s.err.install(s.cinfo);
  if (!create_guarded(s.cinfo, s.err)) {
    throw Error(ErrorCode::kInternal, std::string("jpeg_create_decompress failed: ") + s.err.message);
  }
  s.cinfo_created = true;
}

JpegDecoder::~JpegDecoder() = default;

int JpegDecoder::channels() const { return options_.color == Color::kGrey ? 1 : 3; }

OnWarning JpegDecoder::on_warning() const { return options_.strict ? OnWarning::kStop : OnWarning::kContinue; }

JpegWarnings JpegDecoder::warnings() const {
  const JpegErrorManager& err = state_->err;
  return JpegWarnings{err.warnings, err.warnings > 0 ? std::string_view(err.warning) : std::string_view()};
}

void JpegDecoder::attach(MemoryBudget& budget, MemoryUse use, std::chrono::milliseconds wait) {
  state_->planes.attach(budget, use, wait);
}

std::size_t JpegDecoder::working_bytes(int width, int height) {
  return std::int64_t{width} * height <= kPlanesMaxPixels ? planes_bytes(width, height) : 0;
}

// jpeg_read_header rather than tjDecompressHeader3: it is what tjDecompressHeader3 runs inside
// (same cost), and TurboJPEG 2.1 neither reports progressive mode nor the sampling factors, and
// fails outright on subsampling it has no TJSAMP_ name for, which libjpeg decodes fine.
JpegHeader JpegDecoder::read_header(std::span<const std::uint8_t> jpeg) {
  if (jpeg.empty()) throw Error(ErrorCode::kCorruptData, "empty file");
  if (jpeg.size() < 2 && jpeg[0] == 0xFF) {
    throw Error(ErrorCode::kCorruptData, "truncated JPEG: the file is 1 byte long");
  }
  if (jpeg[0] != 0xFF || jpeg[1] != 0xD8) throw Error(ErrorCode::kUnsupportedFormat, describe_non_jpeg(jpeg));

  State& s = *state_;
  s.drop_pending();
  s.err.arm(on_warning());
  if (!read_header_guarded(s.cinfo, s.err, jpeg)) throw libjpeg_failure(s.err, JpegPhase::kHeader);

  const jpeg_decompress_struct& c = s.cinfo;
  JpegHeader header;
  header.width = static_cast<int>(c.image_width);
  header.height = static_cast<int>(c.image_height);
  header.components = c.num_components;
  header.progressive = c.progressive_mode != FALSE;
  // jpeg_crop_scanline aligns a single-component image to one block, whatever sampling factor
  // its SOF declares (greyscale files written with 2x2 factors exist in the wild); the iMCU row
  // height still follows the declared factor.
  header.imcu_width = c.num_components == 1 ? DCTSIZE : DCTSIZE * c.max_h_samp_factor;
  header.imcu_height = DCTSIZE * c.max_v_samp_factor;
  const J_COLOR_SPACE space = c.jpeg_color_space;
  // Kept for decode(): the header stays parsed in cinfo until the next use of the decoder.
  s.pending_data = jpeg.data();
  s.pending_size = jpeg.size();
  header.token = s.pending_token = ++s.next_token;

  if ((header.components != 1 && header.components != 3 && header.components != 4) ||
      space == JCS_UNKNOWN) {
    s.drop_pending();
    throw Error(ErrorCode::kUnsupportedFormat,
                "unsupported JPEG: " + std::to_string(header.components) +
                    " colour components in an unknown colour space (expected grey, YCbCr/RGB or CMYK)");
  }
  const std::uint64_t pixels = static_cast<std::uint64_t>(header.width) * header.height;
  if (pixels > options_.max_image_pixels) {
    s.drop_pending();
    char cause[160];
    std::snprintf(cause, sizeof cause, "image is %dx%d (%.1f MP), above max_image_pixels (%.1f MP)",
                  header.width, header.height, static_cast<double>(pixels) / 1e6,
                  static_cast<double>(options_.max_image_pixels) / 1e6);
    throw Error(ErrorCode::kTooLarge, cause);
  }
  return header;
}

Size2 JpegDecoder::scaled_size(const JpegHeader& header, int denom) {
  return {(header.width + denom - 1) / denom, (header.height + denom - 1) / denom};
}

Rect JpegDecoder::decoded_region(const JpegHeader& header, const JpegRequest& request) const {
  const Rect wanted = columns_for_libjpeg(header, request);
  const Size2 full = scaled_size(header, request.scale_denom);
  // jpeg_crop_scanline leaves a full-width request alone; otherwise it moves the left edge down
  // to an iMCU column, which in scaled pixels is imcu_width / denom (a whole number: 8 / denom
  // blocks of max_h_samp_factor each), and widens the region so the right edge stays put.
  if (wanted.x == 0 && wanted.width == full.width) return wanted;
  const int align = std::max(1, header.imcu_width / request.scale_denom);
  const int left = wanted.x / align * align;
  return {left, wanted.y, wanted.x + wanted.width - left, wanted.height};
}

Rect JpegDecoder::columns_for_libjpeg(const JpegHeader& header, const JpegRequest& request) const {
  const int denom = request.scale_denom;
  if (denom != 1 && denom != 2 && denom != 4 && denom != 8) {
    throw invalid("scale_denom must be 1, 2, 4 or 8, got " + std::to_string(denom));
  }
  const Size2 full = scaled_size(header, denom);
  const Rect& r = request.region;
  if (r.width == 0) return {0, 0, full.width, full.height};
  if (r.width < 0 || r.height <= 0) throw invalid("region " + rect_string(r) + " is empty");
  // 64-bit: x + width must not overflow for a region far outside the image.
  auto x0 = static_cast<int>(std::max<std::int64_t>(r.x, 0));
  const auto y0 = static_cast<int>(std::max<std::int64_t>(r.y, 0));
  auto x1 = static_cast<int>(std::min<std::int64_t>(std::int64_t{r.x} + r.width, full.width));
  const auto y1 = static_cast<int>(std::min<std::int64_t>(std::int64_t{r.y} + r.height, full.height));
  if (x0 >= x1 || y0 >= y1) {
    throw invalid("region " + rect_string(r) + " lies outside the " + std::to_string(full.width) + "x" +
                  std::to_string(full.height) + " image (at 1/" + std::to_string(denom) + ")");
  }
  // Fancy chroma upsampling treats a crop's left and right edges as image edges, so the column
  // next to each interior edge would differ from a full decode (by how much: docs/performance.md,
  // "Figures behind choices in the code"). Widening the crop by a column on the left (which moves the iMCU-aligned
  // edge one iMCU left when the request starts on one) and kFancyMargin on the right keeps those
  // columns outside the request, so the requested pixels equal the full decode's. (Grey output
  // of a YCbCr file needs no margin, but the header does not say YCbCr from RGB; it is cheap.)
  const bool chroma_subsampled = header.components > 1 && header.imcu_width > DCTSIZE;
  if (!options_.fast_upsample && chroma_subsampled) {
    x0 = std::max(0, x0 - 1);
    x1 = std::min(full.width, x1 + kFancyMargin);
  }
  return {x0, y0, x1 - x0, y1 - y0};
}

void JpegDecoder::decode(std::span<const std::uint8_t> jpeg, const JpegHeader& header,
                         const JpegRequest& request, ImageView out) {
  const Rect region = decoded_region(header, request);
  const int ch = channels();
  if (out.data == nullptr || out.width != region.width || out.height != region.height ||
      out.channels != ch || out.stride < static_cast<std::ptrdiff_t>(region.width) * ch) {
    throw invalid("decode output is " + std::to_string(out.width) + "x" + std::to_string(out.height) +
                  "x" + std::to_string(out.channels) + " (stride " + std::to_string(out.stride) +
                  ") but the decoded region is " + std::to_string(region.width) + "x" +
                  std::to_string(region.height) + "x" + std::to_string(ch));
  }
  if (jpeg.empty()) throw Error(ErrorCode::kCorruptData, "empty file");
  State& s = *state_;
  const Size2 full = scaled_size(header, request.scale_denom);
  const bool grey = options_.color == Color::kGrey;
  const bool cmyk = header.components == 4;

  RowJob job;
  // The header read_header() just parsed from these very bytes is still in cinfo: go on from it.
  job.header_read = header.token != 0 && header.token == s.pending_token && s.pending_data == jpeg.data() &&
                    s.pending_size == jpeg.size();
  if (!job.header_read) s.drop_pending();
  s.pending_data = nullptr;  // from here on the decode owns cinfo and leaves it reset
  job.whole = region == Rect{0, 0, full.width, full.height};
  job.jpeg = jpeg;
  job.expect_width = header.width;
  job.expect_height = header.height;
  job.denom = request.scale_denom;
  job.color_space = cmyk ? JCS_CMYK : (grey ? JCS_GRAYSCALE : JCS_RGB);
  job.fast_dct = options_.fast_dct;
  job.fast_upsample = options_.fast_upsample;
  job.crop = region.width < full.width;
  if (job.crop) {  // what we ask jpeg_crop_scanline for, before it aligns the left edge
    const Rect wanted = columns_for_libjpeg(header, request);
    job.crop_x = wanted.x;
    job.crop_width = wanted.width;
  }
  job.region = region;
  job.out = out;
  job.grey = grey;
  if (cmyk) {
    s.cmyk_rows.reserve(static_cast<std::size_t>(region.width) * 4 * kRowsPerRead);
    job.cmyk = s.cmyk_rows.data();
  } else if (job.whole && request.scale_denom == 1 && working_bytes(header.width, header.height) > 0) {
    const std::size_t bytes = planes_bytes(header.width, header.height);
    s.planes.reserve(bytes);
    job.planes = s.planes.data();
    job.planes_capacity = bytes - ycc_scratch_bytes(header.width);
  }

  // Going on from read_header() keeps its warnings: they belong to this image.
  if (!job.header_read) s.err.arm(on_warning());
  switch (decode_rows_guarded(s.cinfo, s.err, job)) {
    case RowStatus::kOk:
      if (job.plane_count == 3 && !grey) {
        ycc_to_rgb(job.plane[0], job.plane[1], job.plane[2], job.chroma, out, job.planes + job.planes_capacity);
      } else if (job.plane_count > 0) {
        luma_to_output(job.plane[0], out);
      }
      return;
    case RowStatus::kLibjpegFailed: throw libjpeg_failure(s.err, JpegPhase::kScan);
    case RowStatus::kTruncated: throw truncation_failure(job.truncation);
    case RowStatus::kHeaderMismatch:
      throw invalid("the header passed to decode() says " + std::to_string(header.width) + "x" +
                    std::to_string(header.height) + " but the data is another image");
    case RowStatus::kGeometryMismatch:
      throw Error(ErrorCode::kInternal,
                  "libjpeg decodes " + rect_string(job.produced) + " but decoded_region() predicted " +
                      rect_string(region) + " (request " + rect_string(request.region) + " at 1/" +
                      std::to_string(request.scale_denom) + ")");
  }
}

}  // namespace sluice::stages
