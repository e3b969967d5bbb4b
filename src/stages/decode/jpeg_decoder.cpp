// JpegDecoder: the decode_jpeg kernel on libjpeg-turbo 2.1, through its libjpeg API (the calls
// themselves are in jpeg_rows.cpp): whole images, DCT scaling, regions with crop and skip, an
// early stop, and row bands for regions too large to hold at once. read_header() leaves the
// parsed header in the decompressor, and a decode() of the same bytes right after it starts from
// there, so each image's markers are parsed once: on small images the second parse was a good
// part of the decode (docs/performance.md, "Figures behind choices in the code"). Everything runs
// on state made once per decoder, so a warmed-up decoder makes no C++ heap allocation per image.
// What remains is malloc'd inside libjpeg-turbo: its per-image pool (tables, a few rows), freed
// when each image ends. A file in several scans also needs the whole image's DCT coefficients;
// they come from the decoder's own buffer (jpeg_coefficient_pool.hpp), kept between images within
// the reservation attach() makes for them, or from libjpeg's pool for an image too large for it.
#include "stages/decode/jpeg_decoder.hpp"

#include <algorithm>
#include <csetjmp>
#include <cstring>
#include <cstdio>  // jpeglib.h needs FILE and size_t declared first
#include <string>

#include <jerror.h>
#include <jpeglib.h>

#include "sluice/core/error.hpp"
#include "sluice/core/units.hpp"
#include "sluice/detail/memory/aligned_buffer.hpp"
#include "sluice/detail/memory/huge_mapping.hpp"
#include "stages/decode/jpeg_coefficient_pool.hpp"
#include "stages/decode/jpeg_errors.hpp"
#include "stages/decode/jpeg_huffman.hpp"
#include "stages/decode/jpeg_rows.hpp"
#include "stages/decode/ycc_planes.hpp"

namespace sluice::stages {
namespace {

// Columns decoded right of a region under fancy upsampling (see columns_for_libjpeg).
constexpr int kFancyMargin = 2;

// Whole images up to this many pixels are decoded to component planes (libjpeg's raw-data mode)
// and given their colour by ycc_planes.cpp instead of libjpeg-turbo's upsampler and converter
// (see ycc_planes.hpp for why). The bound keeps the planes buffer small (a few tens of KB); larger
// images keep libjpeg-turbo's own path, since the gain was measured on small images only.
constexpr std::int64_t kPlanesMaxPixels = 128 * 128;

// The coefficient buffer's bound for a decoder with no budget attached (a benchmark's, a test's):
// images needing more take libjpeg's own allocation. Attached, the bound is the reservation.
constexpr std::uint64_t kUnbudgetedCoefficientBytes = std::uint64_t{64} << 20;

Error invalid(const std::string& cause) { return Error(ErrorCode::kInvalidArgument, cause); }

std::string rect_string(const Rect& r) {
  return std::to_string(r.width) + "x" + std::to_string(r.height) + "+" + std::to_string(r.x) + "+" +
         std::to_string(r.y);
}

}  // namespace

// The splice buffer's first size: one 2 MiB huge page at once where the budget has it free
// (AlignedBuffer), rather than growing a power of two at a time through 4 KiB pages, each step
// faulted in again.
constexpr std::size_t kSpliceFloor = kHugePageBytes;

struct JpegDecoder::State {
  jpeg_decompress_struct cinfo{};
  JpegErrorManager err{};
  bool cinfo_created = false;
  AlignedBuffer cmyk_rows;  // CMYK scanlines awaiting conversion; grows to the widest image
  AlignedBuffer planes;     // component planes of small images; grows to the largest of them
  AlignedBuffer spliced;    // a file spliced at a resume point; grows to the largest spliced
  ScanLayout layout;
  Splice splice;
  MemoryBudget* budget = nullptr;  // attach(): what libjpeg's coefficient buffers count against
  MemoryUse use = MemoryUse::kDecodeBuffers;
  Reservation coefficients;        // held for them; grows to the largest that fitted
  // libjpeg's coefficient arrays, in a buffer kept between images: at most `coefficients` bytes
  // (kUnbudgetedCoefficientBytes without a budget); an image above that takes libjpeg's own.
  JpegCoefficientPool pool;
  // A row-band decode in progress (begin_rows() until end_rows() or any other call).
  bool rows_open = false;
  RowJob rows;
  JpegHeader rows_header;
  JpegRequest rows_request;
  std::optional<Reservation> rows_coefficients;
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

JpegDecoder::JpegDecoder(const DecodeOptions& options)
    : state_(std::make_unique<State>()), options_(options) {
  State& s = *state_;
  s.err.install(s.cinfo);
  if (!create_guarded(s.cinfo, s.err)) {
    throw Error(ErrorCode::kInternal, std::string("jpeg_create_decompress failed: ") + s.err.message);
  }
  s.cinfo_created = true;
  s.pool.install(s.cinfo);
}

JpegDecoder::~JpegDecoder() = default;

int JpegDecoder::channels() const { return options_.color == Color::kGrey ? 1 : 3; }

OnWarning JpegDecoder::on_warning() const { return options_.strict ? OnWarning::kStop : OnWarning::kContinue; }

JpegWarnings JpegDecoder::warnings() const {
  const JpegErrorManager& err = state_->err;
  return JpegWarnings{err.warnings, err.warnings > 0 ? std::string_view(err.warning) : std::string_view()};
}

void JpegDecoder::attach(MemoryBudget& budget, MemoryUse use, const DecoderShare& share) {
  State& s = *state_;
  s.planes.attach_share(budget, use, share.planes);
  s.spliced.attach_share(budget, use, 0);  // grows within what the budget has free, else no splice
  s.budget = &budget;
  s.use = use;
  s.coefficients = budget.empty(use);
  if (share.coefficients > 0 && !budget.try_grow(s.coefficients, share.coefficients, Reclaim::kYes)) {
    throw Error(ErrorCode::kOutOfBudget,
                "a decoder's coefficient share of " + format_bytes(share.coefficients) + " does not fit the memory budget");
  }
}

void JpegDecoder::prefault(bool splices, std::uint64_t most) {
  State& s = *state_;
  if (splices && s.spliced.try_reserve(kSpliceFloor)) s.spliced.prefault(most);
  s.pool.prefault(s.budget != nullptr ? s.coefficients.bytes() : 0, most);
}

std::uint64_t JpegDecoder::kept_coefficient_bytes(std::uint64_t bytes) {
  return bytes >= kHugePageBytes / 2 ? whole_huge_pages(bytes) : bytes;
}

std::optional<Reservation> JpegDecoder::reserve_coefficients(const JpegHeader& header) {
  State& s = *state_;
  if (s.budget == nullptr || header.coefficient_bytes <= s.coefficients.bytes()) return std::nullopt;
  // Kept in whole 2 MiB where the budget has them free, whatever the image needs (below 1 MiB
  // too, unlike the plan's share): a worker whose share the plan could not size (remote shards
  // not yet fetched when build() probed their headers) otherwise grew it image by image, each
  // larger image mapping a new buffer of 4 KiB pages (500-630 faults in a cold remote epoch 0 of
  // imagenet-photos, docs/remote.md). Else as much as this image needs.
  const std::uint64_t whole = whole_huge_pages(header.coefficient_bytes) - s.coefficients.bytes();
  if (s.budget->try_grow(s.coefficients, whole, Reclaim::kYes)) return std::nullopt;  // kept: it fitted
  const std::uint64_t more = header.coefficient_bytes - s.coefficients.bytes();
  if (s.budget->try_grow(s.coefficients, more, Reclaim::kYes)) return std::nullopt;
  std::optional<Reservation> transient = s.budget->reserve_transient(more, s.use);
  if (!transient) {
    throw Error(ErrorCode::kTooLarge,
                "a " + std::to_string(header.width) + "x" + std::to_string(header.height) +
                    " JPEG in several scans needs " + format_bytes(header.coefficient_bytes) +
                    " for libjpeg's coefficients at any scale, " + format_bytes(more) +
                    " more than this worker holds, and the memory budget of " + format_bytes(s.budget->limit()) +
                    " has " + format_bytes(s.budget->available()) + " free: raise the budget by at least " +
                    format_bytes(more));
  }
  return transient;
}

std::uint64_t JpegDecoder::coefficient_bound() const {
  const State& s = *state_;
  return s.budget != nullptr ? s.coefficients.bytes() : kUnbudgetedCoefficientBytes;
}

std::uint64_t JpegDecoder::pooled_coefficient_images() const { return state_->pool.served(); }

std::size_t JpegDecoder::working_bytes(int width, int height) {
  return std::int64_t{width} * height <= kPlanesMaxPixels ? planes_bytes(width, height) : 0;
}

DecoderShare& DecoderShare::include(const DecoderShare& other) {
  planes = std::max(planes, other.planes);
  coefficients = std::max(coefficients, other.coefficients);
  return *this;
}

DecoderShare JpegDecoder::workspace_requirements(const JpegHeader& header) {
  DecoderShare share;
  if (const std::size_t planes = working_bytes(header.width, header.height); planes > 0) {
    share.planes = AlignedBuffer::rounded_capacity(planes);
  }
  share.coefficients = header.coefficient_bytes;
  return share;
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
  abandon_rows();
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
  header.coefficient_bytes = coefficient_bytes(s.cinfo);
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
  if (!(options_.fast_upsample || request.fast_upsample) && chroma_subsampled) {
    x0 = std::max(0, x0 - 1);
    x1 = std::min(full.width, x1 + kFancyMargin);
  }
  return {x0, y0, x1 - x0, y1 - y0};
}

// The job for `request` of these bytes, and cinfo handed over to it: going on from the header
// read_header() just parsed from these very bytes, or reset for a fresh parse.
RowJob JpegDecoder::prepare(std::span<const std::uint8_t> jpeg, const JpegHeader& header, const JpegRequest& request,
                            const Rect& region) {
  if (jpeg.empty()) throw Error(ErrorCode::kCorruptData, "empty file");
  State& s = *state_;
  abandon_rows();
  const Size2 full = scaled_size(header, request.scale_denom);
  const bool cmyk = header.components == 4;
  RowJob job;
  job.header_read = header.token != 0 && header.token == s.pending_token && s.pending_data == jpeg.data() &&
                    s.pending_size == jpeg.size();
  job.whole = region == Rect{0, 0, full.width, full.height};
  job.jpeg = jpeg;
  job.expect_width = header.width;
  job.expect_height = header.height;
  job.denom = request.scale_denom;
  job.grey = options_.color == Color::kGrey;
  job.color_space = cmyk ? JCS_CMYK : (job.grey ? JCS_GRAYSCALE : JCS_RGB);
  job.fast_dct = options_.fast_dct;
  job.fast_upsample = options_.fast_upsample || request.fast_upsample;
  job.crop = region.width < full.width;
  if (job.crop) {  // what we ask jpeg_crop_scanline for, before it aligns the left edge
    const Rect wanted = columns_for_libjpeg(header, request);
    job.crop_x = wanted.x;
    job.crop_width = wanted.width;
  }
  job.region = region;
  if (cmyk) {
    s.cmyk_rows.reserve(static_cast<std::size_t>(region.width) * 4 * kRowsPerRead);
    job.cmyk = s.cmyk_rows.data();
  }
  // From here on (nothing below throws) the job owns cinfo and leaves it reset. Going on from
  // read_header() keeps its warnings: they belong to this image.
  if (!job.header_read) {
    s.drop_pending();
    s.err.arm(on_warning());
  }
  s.pending_data = nullptr;
  return job;
}

void JpegDecoder::check_rows(RowStatus status, const RowJob& job, const JpegHeader& header,
                             const JpegRequest& request) const {
  const State& s = *state_;
  switch (status) {
    case RowStatus::kOk: return;
    case RowStatus::kLibjpegFailed: throw libjpeg_failure(s.err, JpegPhase::kScan);
    case RowStatus::kTruncated: throw truncation_failure(job.truncation);
    case RowStatus::kTableMissing: {
      char cause[96];  // libjpeg's words for JERR_NO_QUANT_TABLE, as a fresh decompressor says them
      std::snprintf(cause, sizeof cause, "corrupt JPEG data: Quantization table 0x%02x was not defined", job.missing_table);
      throw Error(ErrorCode::kCorruptData, cause);
    }
    case RowStatus::kHeaderMismatch:
      throw invalid("the header passed to decode() says " + std::to_string(header.width) + "x" +
                    std::to_string(header.height) + " but the data is another image");
    case RowStatus::kGeometryMismatch:
      throw Error(ErrorCode::kInternal,
                  "libjpeg decodes " + rect_string(job.produced) + " but decoded_region() predicted " +
                      rect_string(job.region) + " (request " + rect_string(request.region) + " at 1/" +
                      std::to_string(request.scale_denom) + ")");
  }
}

void JpegDecoder::decode(std::span<const std::uint8_t> jpeg, const JpegHeader& header,
                         const JpegRequest& request, ImageView out) {
  decode_image(jpeg, header, request, out, nullptr);
}

bool JpegDecoder::decode_image(std::span<const std::uint8_t> jpeg, const JpegHeader& header,
                               const JpegRequest& request, ImageView out, const Splice* splice) {
  const Rect region = decoded_region(header, request);
  const int ch = channels();
  if (out.data == nullptr || out.width != region.width || out.height != region.height ||
      out.channels != ch || out.stride < static_cast<std::ptrdiff_t>(region.width) * ch) {
    throw invalid("decode output is " + std::to_string(out.width) + "x" + std::to_string(out.height) +
                  "x" + std::to_string(out.channels) + " (stride " + std::to_string(out.stride) +
                  ") but the decoded region is " + std::to_string(region.width) + "x" +
                  std::to_string(region.height) + "x" + std::to_string(ch));
  }
  State& s = *state_;
  // Accounted before libjpeg allocates it; a transient part is given back when the decode ends.
  const std::optional<Reservation> coefficients = reserve_coefficients(header);
  const bool pooled = s.pool.reserve(header.coefficient_bytes, coefficient_bound());
  const bool planes = splice == nullptr && header.components != 4 && region.width == header.width && region.height == header.height &&
                      working_bytes(header.width, header.height) > 0 &&
                      s.planes.try_reserve(planes_bytes(header.width, header.height));
  RowJob job = prepare(jpeg, header, request, region);
  if (planes) {  // without room for them, libjpeg's own path gives the same pixels
    job.planes = s.planes.data();
    job.planes_capacity = planes_bytes(header.width, header.height) - ycc_scratch_bytes(header.width);
  }
  // sluice's entropy decoder where it applies (jpeg_huffman.hpp); where it gives up, the image is
  // decoded again from its header with libjpeg's, so the pixels, errors and warnings are libjpeg's.
  job.own_huffman = true;
  if (splice != nullptr) {
    // The original's region starts below its top: its decode stops after the region's last row and
    // never reads the markers after the scan (whose damage a whole decode reports), so neither
    // does the spliced file's, whose region is whole from its first row to the bottom.
    job.whole = false;
    job.spliced = {true, splice->appended};
  }
  RowStatus status = run_rows(job, out, pooled);
  if (status == RowStatus::kLibjpegFailed && s.err.own_huffman_gave_up && job.spliced.spliced) return false;
  if (status == RowStatus::kLibjpegFailed && s.err.own_huffman_gave_up) {
    job.own_huffman = false;
    job.header_read = false;
    job.plane_count = 0;
    job.rows_read = 0;
    job.produced = Rect{};
    s.err.arm(on_warning());
    status = run_rows(job, out, pooled);
  }
  check_rows(status, job, header, request);
  if (job.plane_count == 3 && options_.color != Color::kGrey) {
    ycc_to_rgb(job.plane[0], job.plane[1], job.plane[2], job.chroma, out, job.planes + job.planes_capacity);
  } else if (job.plane_count > 0) {
    luma_to_output(job.plane[0], out);
  }
  return true;
}

RowStatus JpegDecoder::run_rows(RowJob& job, ImageView out, bool pooled) {
  State& s = *state_;
  if (pooled) s.pool.open();
  RowStatus status = start_rows_guarded(s.cinfo, s.err, job);
  if (status == RowStatus::kOk && job.plane_count == 0) status = read_rows_guarded(s.cinfo, s.err, job, out);
  if (status == RowStatus::kOk) status = end_rows_guarded(s.cinfo, s.err, job);
  return status;
}

void JpegDecoder::decode(std::span<const std::uint8_t> jpeg, const JpegHeader& header, const JpegRequest& request,
                         ImageView out, std::vector<ResumePoint>& points) {
  if (!decode_spliced(jpeg, header, request, out, points)) decode(jpeg, header, request, out);
}

// The file spliced at the last resume point at or above the region's first MCU row (one row
// higher where fancy upsampling reads the chroma row above), decoded from there: the same
// coefficients, so the same pixels, without the rows above Huffman-decoded again. False where it
// does not apply (nothing decoded), or where sluice's entropy decoder gave up on the spliced file
// (damaged data below the splice; out partly written): the caller then decodes the original, as
// it does for a file without points, with decode()'s pixels, warnings and errors.
bool JpegDecoder::decode_spliced(std::span<const std::uint8_t> jpeg, const JpegHeader& header,
                                 const JpegRequest& request, ImageView out, std::vector<ResumePoint>& points) {
  if (header.progressive || header.components == 4 || request.region.width == 0) return false;
  // A spliced file is decoded by sluice's entropy decoder or not at all (SplicedScan).
  if (!own_huffman_enabled()) return false;
  // Only files ending with EOI (998 of imagenet-photos' 1,000). Where the data simply stops,
  // libjpeg's memory source warns as soon as its read-ahead (the bytes that fill its bit buffer
  // beyond the bits a code needs) reaches the end, and how far it reads ahead depends on every bit
  // before (found by jpeg_resume_fuzzer): the spliced
  // file, with other bits before, would warn where the original does not, or the other way. At a
  // marker libjpeg warns only for bits a code needs, which are the same in both.
  if (jpeg.size() < 2 || jpeg[jpeg.size() - 2] != 0xFF || jpeg[jpeg.size() - 1] != 0xD9) return false;
  const Rect region = decoded_region(header, request);
  if (region.y == 0) return false;
  State& s = *state_;
  if (!parse_scan_layout(jpeg, s.layout)) return false;
  const bool fancy = !(options_.fast_upsample || request.fast_upsample);
  const int denom = request.scale_denom;
  const int row = region.y * denom / s.layout.mcu_height - (fancy && s.layout.mcu_height > 8 ? 1 : 0);
  if (row < 1) return false;
  scan_resume_points(jpeg, s.layout, row, points);
  // splice_at refuses a row now and then (jpeg_resume.hpp): the rows above are tried too.
  constexpr int kTries = 4;
  for (int r = std::min(row, static_cast<int>(points.size()) - 1), tries = 0; r >= 1 && tries < kTries; --r, ++tries) {
    if (!splice_at(jpeg, s.layout, r, points[static_cast<std::size_t>(r)], s.splice)) continue;
    const std::size_t head = s.splice.head.size();
    const std::size_t size = head + (jpeg.size() - s.splice.tail_offset);
    if (!s.spliced.try_reserve(std::max(size, kSpliceFloor)) && !s.spliced.try_reserve(size)) return false;
    std::memcpy(s.spliced.data(), s.splice.head.data(), head);
    std::memcpy(s.spliced.data() + head, jpeg.data() + s.splice.tail_offset, size - head);
    const std::span<const std::uint8_t> cut(s.spliced.data(), size);
    const JpegHeader cut_header = read_header(cut);
    JpegRequest cut_request = request;
    cut_request.region.y -= s.splice.first_row / denom;
    return decode_image(cut, cut_header, cut_request, out, &s.splice);
  }
  return false;
}

Rect JpegDecoder::begin_rows(std::span<const std::uint8_t> jpeg, const JpegHeader& header,
                             const JpegRequest& request) {
  const Rect region = decoded_region(header, request);
  State& s = *state_;
  std::optional<Reservation> coefficients = reserve_coefficients(header);
  const bool pooled = s.pool.reserve(header.coefficient_bytes, coefficient_bound());
  s.rows = prepare(jpeg, header, request, region);
  if (pooled) s.pool.open();
  check_rows(start_rows_guarded(s.cinfo, s.err, s.rows), s.rows, header, request);
  s.rows_request = request;
  s.rows_header = header;
  s.rows_coefficients = std::move(coefficients);
  s.rows_open = true;
  return region;
}

void JpegDecoder::read_rows(ImageView rows) {
  State& s = *state_;
  if (!s.rows_open) throw invalid("read_rows() without begin_rows()");
  const Rect& region = s.rows.region;
  if (rows.data == nullptr || rows.width != region.width || rows.channels != channels() || rows.height < 0 ||
      rows.height > region.height - s.rows.rows_read) {
    throw invalid("read_rows: " + std::to_string(rows.width) + "x" + std::to_string(rows.height) + "x" +
                  std::to_string(rows.channels) + " rows asked, " + std::to_string(region.height - s.rows.rows_read) +
                  " rows of " + std::to_string(region.width) + "x" + std::to_string(channels()) + " left");
  }
  const RowStatus status = read_rows_guarded(s.cinfo, s.err, s.rows, rows);
  if (status != RowStatus::kOk) {
    s.rows_open = false;  // the guard left cinfo reset
    s.rows_coefficients.reset();
    check_rows(status, s.rows, s.rows_header, s.rows_request);
  }
}

void JpegDecoder::end_rows() {
  State& s = *state_;
  if (!s.rows_open) throw invalid("end_rows() without begin_rows()");
  if (s.rows.rows_read != s.rows.region.height) {
    abandon_rows();
    throw invalid("end_rows() before the last row");
  }
  s.rows_open = false;
  const RowStatus status = end_rows_guarded(s.cinfo, s.err, s.rows);
  s.rows_coefficients.reset();
  check_rows(status, s.rows, s.rows_header, s.rows_request);
}

void JpegDecoder::abandon_rows() {
  State& s = *state_;
  if (!s.rows_open) return;
  jpeg_abort_decompress(&s.cinfo);
  s.rows_open = false;
  s.rows_coefficients.reset();
}

}  // namespace sluice::stages
