// libjpeg's row machinery for JpegDecoder: the guarded calls, the raw-plane path of small images
// and the CMYK conversion.
#include "stages/decode/jpeg_rows.hpp"

#include <algorithm>
#include <csetjmp>
#include <cstring>

#include <jerror.h>

#include "stages/decode/jpeg_huffman.hpp"

namespace sluice::stages {

namespace {

// The most rows of one component one jpeg_read_raw_data call asks for: v_samp_factor <= 2.
constexpr int kMaxRawRows = 2 * DCTSIZE;

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

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
bool read_planes(jpeg_decompress_struct& cinfo, JpegErrorManager& err, RowJob& job) {
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
  if (job.own_huffman || job.spliced.spliced) install_own_huffman(cinfo, err, job.jpeg, job.spliced);
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

// libjpeg-turbo's standard Huffman tables (JPEG Annex K.3), which it substitutes for a missing
// table 0 or 1: taken from libjpeg itself (jpeg_set_defaults fills them in), so they are its own.
struct StandardHuffmanTables {
  JHUFF_TBL dc[2];
  JHUFF_TBL ac[2];
};

[[noreturn]] void jump_out(j_common_ptr cinfo) { std::longjmp(*static_cast<std::jmp_buf*>(cinfo->client_data), 1); }

bool fill_standard_tables(StandardHuffmanTables& t) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  std::jmp_buf jump;
  c.err = jpeg_std_error(&err);
  err.error_exit = jump_out;
  c.client_data = &jump;
  if (setjmp(jump) != 0) {
    jpeg_destroy_compress(&c);
    return false;
  }
  jpeg_create_compress(&c);
  c.in_color_space = JCS_RGB;
  c.input_components = 3;
  jpeg_set_defaults(&c);
  for (int i = 0; i < 2; ++i) {
    t.dc[i] = *c.dc_huff_tbl_ptrs[i];
    t.ac[i] = *c.ac_huff_tbl_ptrs[i];
  }
  jpeg_destroy_compress(&c);
  return true;
}

const StandardHuffmanTables* standard_tables() {
  static StandardHuffmanTables tables;
  static const bool filled = fill_standard_tables(tables);
  return filled ? &tables : nullptr;
}

// A table no decoder accepts: more codes than 256 symbols (jpeg_make_d_derived_tbl: "Bogus
// Huffman table definition"), what a fresh decompressor's missing table 2 or 3 comes to.
void make_invalid(JHUFF_TBL& table) {
  std::memset(table.bits, 0, sizeof table.bits);
  std::memset(table.bits + 1, 0xFF, 16);
}

bool forgotten(const JQUANT_TBL& table) {
  return std::all_of(std::begin(table.quantval), std::end(table.quantval), [](UINT16 q) { return q == 0; });
}

// A component whose latched quantisation table is a forgotten one: the image used a table it
// never defined. Returns its table number, or -1.
int missing_quant_table(const jpeg_decompress_struct& cinfo) {
  for (int c = 0; c < cinfo.num_components; ++c) {
    const jpeg_component_info& comp = cinfo.comp_info[c];
    if (comp.quant_table != nullptr && forgotten(*comp.quant_table)) return comp.quant_tbl_no;
  }
  return -1;
}

}  // namespace

void forget_tables(jpeg_decompress_struct& cinfo) {
  for (JQUANT_TBL* q : cinfo.quant_tbl_ptrs) {
    if (q != nullptr) std::memset(q->quantval, 0, sizeof q->quantval);
  }
  const StandardHuffmanTables* standard = standard_tables();
  for (int n = 0; n < NUM_HUFF_TBLS; ++n) {
    for (JHUFF_TBL* h : {cinfo.dc_huff_tbl_ptrs[n], cinfo.ac_huff_tbl_ptrs[n]}) {
      if (h == nullptr) continue;
      if (n < 2 && standard != nullptr) {
        *h = h == cinfo.dc_huff_tbl_ptrs[n] ? standard->dc[n] : standard->ac[n];
      } else {
        make_invalid(*h);
      }
    }
  }
}

// Three planes of at most the iMCU-padded size, each row 32-byte aligned, and ycc_to_rgb's scratch.
std::size_t planes_bytes(int width, int height) {
  const std::size_t stride = round_up(static_cast<std::size_t>(width), 32);
  return 3 * stride * round_up(static_cast<std::size_t>(height), 2 * DCTSIZE) + ycc_scratch_bytes(width);
}

// libjpeg's whole-image coefficient buffer (jdcoefct.c, jinit_d_coef_controller): made for a file
// in several scans whatever the scale, one JBLOCK (128 bytes) per block of each component, columns
// and rows rounded up to the component's sampling factors. Valid after jpeg_read_header.
std::uint64_t coefficient_bytes(jpeg_decompress_struct& cinfo) {
  if (jpeg_has_multiple_scans(&cinfo) == FALSE) return 0;
  std::uint64_t bytes = 0;
  for (int c = 0; c < cinfo.num_components; ++c) {
    const jpeg_component_info& comp = cinfo.comp_info[c];
    const std::uint64_t cols = round_up(comp.width_in_blocks, static_cast<std::size_t>(comp.h_samp_factor));
    const std::uint64_t rows = round_up(comp.height_in_blocks, static_cast<std::size_t>(comp.v_samp_factor));
    bytes += cols * rows * sizeof(JBLOCK);
  }
  return bytes;
}

bool create_guarded(jpeg_decompress_struct& cinfo, JpegErrorManager& err) {
  if (setjmp(err.jump) != 0) return false;
  jpeg_create_decompress(&cinfo);
  return true;
}

bool read_header_guarded(jpeg_decompress_struct& cinfo, JpegErrorManager& err, std::span<const std::uint8_t> jpeg) {
  if (setjmp(err.jump) != 0) {
    jpeg_abort_decompress(&cinfo);
    return false;
  }
  // The source manager is allocated once in the permanent pool and reused by later calls.
  jpeg_mem_src(&cinfo, jpeg.data(), static_cast<unsigned long>(jpeg.size()));
  forget_tables(cinfo);
  jpeg_read_header(&cinfo, TRUE);
  return true;
}

RowStatus start_rows_guarded(jpeg_decompress_struct& cinfo, JpegErrorManager& err, RowJob& job) {
  if (setjmp(err.jump) != 0) {
    jpeg_abort_decompress(&cinfo);
    return RowStatus::kLibjpegFailed;
  }
  if (!job.header_read) {
    jpeg_mem_src(&cinfo, job.jpeg.data(), static_cast<unsigned long>(job.jpeg.size()));
    forget_tables(cinfo);
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
  job.rows_read = 0;
  if (job.whole && job.denom == 1 && job.planes != nullptr && !job.fast_upsample && planes_apply(cinfo, job) &&
      read_planes(cinfo, err, job)) {
    job.produced = job.region;
    job.rows_read = job.region.height;
    return RowStatus::kOk;
  }
  jpeg_start_decompress(&cinfo);
  if (job.own_huffman || job.spliced.spliced) install_own_huffman(cinfo, err, job.jpeg, job.spliced);

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
  return RowStatus::kOk;
}

RowStatus read_rows_guarded(jpeg_decompress_struct& cinfo, JpegErrorManager& err, RowJob& job, ImageView out) {
  if (setjmp(err.jump) != 0) {
    jpeg_abort_decompress(&cinfo);
    return RowStatus::kLibjpegFailed;
  }
  const std::ptrdiff_t cmyk_stride = static_cast<std::ptrdiff_t>(job.region.width) * 4;
  JSAMPROW rows[kRowsPerRead];
  int done = 0;
  while (done < out.height) {
    const int want = std::min(kRowsPerRead, out.height - done);
    for (int i = 0; i < want; ++i) {
      rows[i] = job.cmyk != nullptr ? job.cmyk + i * cmyk_stride : out.row(done + i);
    }
    const int got = static_cast<int>(jpeg_read_scanlines(&cinfo, rows, static_cast<JDIMENSION>(want)));
    if (got == 0) {  // cannot happen with a memory source (it never suspends); never spin
      job.produced.height = job.rows_read + done;
      jpeg_abort_decompress(&cinfo);
      return RowStatus::kGeometryMismatch;
    }
    if (job.cmyk != nullptr) {
      for (int i = 0; i < got; ++i) convert_cmyk_row(rows[i], out.row(done + i), job.region.width, job.grey);
    }
    done += got;
  }
  job.rows_read += done;
  return RowStatus::kOk;
}

RowStatus end_rows_guarded(jpeg_decompress_struct& cinfo, JpegErrorManager& err, RowJob& job) {
  if (setjmp(err.jump) != 0) {
    jpeg_abort_decompress(&cinfo);
    return RowStatus::kLibjpegFailed;
  }
  job.truncation = truncation_of(cinfo, err);
  if (job.truncation != Truncation::kNone) {
    jpeg_abort_decompress(&cinfo);
    return RowStatus::kTruncated;
  }
  job.missing_table = missing_quant_table(cinfo);
  if (job.missing_table >= 0) {
    jpeg_abort_decompress(&cinfo);
    return RowStatus::kTableMissing;
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

}  // namespace sluice::stages
