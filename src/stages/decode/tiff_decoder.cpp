// TIFF through libtiff's RGBA reader (TIFFRGBAImage): strips and tiles; every compression this
// libtiff was built with (none, LZW, deflate, PackBits, JPEG, ...); 1 to 16 bits; grey, RGB,
// palette, CMYK, YCbCr; the first page. The reader goes a band at a time (a strip's or a tile
// row's height), so the workspace is one band of 32-bit pixels, not the image, and an image too
// large for its worker's memory is decoded in row bands (begin_rows) the same way. Where its
// conversion differs from Pillow's, put routines of our own take over: CMYK as Pillow converts it
// (255 - k - c * (255 - k) / 255, rounded like Pillow's MULDIV255) and RGB with an unassociated
// alpha channel as it is stored (libtiff would premultiply it, Pillow drops the alpha). Rows come
// in file order whatever the Orientation tag says, as Pillow leaves them. 16-bit samples are
// scaled to 8 with rounding (libtiff's table); Pillow clips 16-bit grey at 255 (docs/reliability.md).
// libtiff's errors and warnings go to handlers of this open file (libtiff 4.5's per-handle
// options), never to stderr: errors become the message, warnings the recovered count.
#include <tiffio.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "sluice/core/error.hpp"
#include "stages/decode/image_format.hpp"

namespace sluice::stages {

namespace {

constexpr ImageFormat kTiff = ImageFormat::kTiff;
// No single allocation libtiff makes for one image above this: a lying strip size or tag count
// fails instead of allocating it.
constexpr tmsize_t kMaxSingleAlloc = tmsize_t{512} << 20;

struct Input {
  std::span<const std::uint8_t> bytes;
  toff_t at = 0;
  std::string error;    // the first error libtiff reported
  std::string warning;  // the first warning
  int warnings = 0;
};

tmsize_t read_proc(thandle_t h, void* out, tmsize_t size) {
  auto* in = static_cast<Input*>(h);
  if (size < 0 || in->at >= in->bytes.size()) return 0;
  const auto n = static_cast<tmsize_t>(std::min<std::uint64_t>(static_cast<std::uint64_t>(size), in->bytes.size() - in->at));
  std::memcpy(out, in->bytes.data() + in->at, static_cast<std::size_t>(n));
  in->at += static_cast<toff_t>(n);
  return n;
}
tmsize_t write_proc(thandle_t, void*, tmsize_t) { return 0; }
toff_t seek_proc(thandle_t h, toff_t offset, int whence) {
  auto* in = static_cast<Input*>(h);
  toff_t base = 0;
  if (whence == SEEK_CUR) base = in->at;
  if (whence == SEEK_END) base = in->bytes.size();
  in->at = base + offset;
  return in->at;
}
int close_proc(thandle_t) { return 0; }
toff_t size_proc(thandle_t h) { return static_cast<Input*>(h)->bytes.size(); }
int map_proc(thandle_t h, void** base, toff_t* size) {
  auto* in = static_cast<Input*>(h);
  *base = const_cast<std::uint8_t*>(in->bytes.data());  // libtiff only reads a mapping opened "r"
  *size = in->bytes.size();
  return 1;
}
void unmap_proc(thandle_t, void*, toff_t) {}

int on_error(TIFF*, void* user, const char* module, const char* format, va_list args) {
  auto* in = static_cast<Input*>(user);
  if (in->error.empty()) {
    char text[512];
    std::vsnprintf(text, sizeof text, format, args);
    in->error = (module != nullptr ? std::string(module) + ": " : std::string()) + text;
  }
  return 1;  // handled: nothing printed
}

int on_warning(TIFF*, void* user, const char* module, const char* format, va_list args) {
  auto* in = static_cast<Input*>(user);
  if (in->warnings++ == 0) {
    char text[512];
    std::vsnprintf(text, sizeof text, format, args);
    in->warning = (module != nullptr ? std::string(module) + ": " : std::string()) + text;
  }
  return 1;
}

// An open TIFF file on the bytes, its messages kept in `input`.
struct File {
  Input input;
  TIFF* tif = nullptr;

  explicit File(std::span<const std::uint8_t> bytes) : input{bytes} {
    TIFFOpenOptions* options = TIFFOpenOptionsAlloc();
    TIFFOpenOptionsSetMaxSingleMemAlloc(options, kMaxSingleAlloc);
    TIFFOpenOptionsSetErrorHandlerExtR(options, on_error, &input);
    TIFFOpenOptionsSetWarningHandlerExtR(options, on_warning, &input);
    tif = TIFFClientOpenExt("tiff", "r", &input, read_proc, write_proc, seek_proc, close_proc, size_proc, map_proc,
                            unmap_proc, options);
    TIFFOpenOptionsFree(options);
    if (tif == nullptr) fail("cannot open");
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File() {
    if (tif != nullptr) TIFFClose(tif);
  }

  [[noreturn]] void fail(const std::string& what) const {
    corrupt(kTiff, input.error.empty() ? what : input.error);
  }

  template <class T>
  T field(ttag_t tag, T otherwise) const {
    T value{};
    return TIFFGetFieldDefaulted(tif, tag, &value) == 1 ? value : otherwise;
  }
};

// Pillow's MULDIV255: a * b / 255, rounded.
int muldiv255(int a, int b) {
  const int t = a * b + 128;
  return ((t >> 8) + t) >> 8;
}

// CMYK, 8 bits, contiguous: Pillow's cmyk2rgb.
void put_cmyk(TIFFRGBAImage* img, std::uint32_t* cp, std::uint32_t, std::uint32_t, std::uint32_t w, std::uint32_t h,
              std::int32_t fromskew, std::int32_t toskew, unsigned char* pp) {
  const int spp = img->samplesperpixel;
  for (; h > 0; --h) {
    for (std::uint32_t x = 0; x < w; ++x, pp += spp) {
      const int nk = 255 - pp[3];
      const int r = std::clamp(nk - muldiv255(pp[0], nk), 0, 255);
      const int g = std::clamp(nk - muldiv255(pp[1], nk), 0, 255);
      const int b = std::clamp(nk - muldiv255(pp[2], nk), 0, 255);
      *cp++ = static_cast<std::uint32_t>(r) | (static_cast<std::uint32_t>(g) << 8) | (static_cast<std::uint32_t>(b) << 16) | 0xFF000000u;
    }
    cp += toskew;
    pp += static_cast<std::ptrdiff_t>(fromskew) * spp;
  }
}

// RGB with extra samples, 8 bits, contiguous: the colour as stored, the rest dropped.
void put_rgb_extra(TIFFRGBAImage* img, std::uint32_t* cp, std::uint32_t, std::uint32_t, std::uint32_t w, std::uint32_t h,
                   std::int32_t fromskew, std::int32_t toskew, unsigned char* pp) {
  const int spp = img->samplesperpixel;
  for (; h > 0; --h) {
    for (std::uint32_t x = 0; x < w; ++x, pp += spp) {
      *cp++ = pp[0] | (static_cast<std::uint32_t>(pp[1]) << 8) | (static_cast<std::uint32_t>(pp[2]) << 16) | 0xFF000000u;
    }
    cp += toskew;
    pp += static_cast<std::ptrdiff_t>(fromskew) * spp;
  }
}

class TiffDecoder final : public FormatDecoder {
 public:
  ImageProbe probe(std::span<const std::uint8_t> bytes) override {
    clear_warnings();
    rows_.reset();
    const File f(bytes);
    ImageProbe p = probe_open(f);
    if (f.input.warnings > 0) warn(f.input.warning);
    return p;
  }

  std::uint64_t workspace_requirements(const ImageProbe& probe, int /*out_channels*/) const override {
    return static_cast<std::uint64_t>(probe.width) * static_cast<std::uint64_t>(probe.rows_per_band) * 4;
  }

  // The whole image is its rows, all at once.
  void decode(std::span<const std::uint8_t> bytes, const ImageProbe& probe, ImageView out,
              AlignedBuffer& scratch) override {
    begin_rows(bytes, probe);
    read_rows(out, scratch);
    end_rows();
  }

  // Row bands: the RGBA reader reads a band (rows_per_band) at a time into the workspace, and
  // rows are handed out from it as asked.
  bool begin_rows(std::span<const std::uint8_t> bytes, const ImageProbe& probe) override {
    clear_warnings();
    rows_.reset();
    auto r = std::make_unique<Rows>(bytes);
    r->probe = probe_open(r->file);
    const ImageProbe& p = r->probe;
    if (p.width != probe.width || p.height != probe.height || p.rows_per_band != probe.rows_per_band) {
      throw Error(ErrorCode::kInvalidArgument, "TIFF: the probe passed to decode() is of another image");
    }
    char message[1024] = {};
    if (TIFFRGBAImageBegin(&r->img, r->file.tif, 1, message) == 0) unsupported(kTiff, message);
    r->begun = true;
    TIFFRGBAImage& img = r->img;
    img.req_orientation = img.orientation;  // rows in file order, as Pillow leaves them
    const bool contig8 = img.isContig != 0 && img.bitspersample == 8;
    if (contig8 && img.photometric == PHOTOMETRIC_SEPARATED && img.samplesperpixel >= 4) {
      img.put.contig = put_cmyk;
    } else if (contig8 && img.photometric == PHOTOMETRIC_RGB && img.samplesperpixel > 3) {
      img.put.contig = put_rgb_extra;
    }
    rows_ = std::move(r);
    return true;
  }

  void read_rows(ImageView rows, AlignedBuffer& scratch) override {
    if (!rows_ || rows.width != rows_->probe.width || rows.height > rows_->probe.height - rows_->next) {
      throw Error(ErrorCode::kInvalidArgument, "TIFF: read_rows() outside a band decode");
    }
    Rows& r = *rows_;
    const ImageProbe& p = r.probe;
    scratch.reserve(static_cast<std::size_t>(workspace_requirements(p, rows.channels)));
    auto* raster = reinterpret_cast<std::uint32_t*>(scratch.data());
    std::uint8_t rgb[3 * 256];
    for (int y = 0; y < rows.height; ++y, ++r.next) {
      if (r.next >= r.band_start + r.band_rows) {  // the next band into the workspace
        r.band_start = r.next;
        r.band_rows = std::min(p.rows_per_band, p.height - r.next);
        r.img.row_offset = r.band_start;
        r.img.col_offset = 0;
        if (TIFFRGBAImageGet(&r.img, raster, static_cast<std::uint32_t>(p.width), static_cast<std::uint32_t>(r.band_rows)) == 0) {
          const std::string error = r.file.input.error;
          rows_.reset();
          corrupt(kTiff, error.empty() ? "cannot read the image data" : error);
        }
      }
      const std::uint32_t* in = raster + static_cast<std::size_t>(r.next - r.band_start) * static_cast<std::size_t>(p.width);
      std::uint8_t* o = rows.row(y);
      for (int x = 0; x < p.width; x += 256) {  // through a small RGB buffer, 256 pixels at a time
        const int n = std::min(256, p.width - x);
        for (int i = 0; i < n; ++i) {
          rgb[3 * i] = static_cast<std::uint8_t>(TIFFGetR(in[x + i]));
          rgb[3 * i + 1] = static_cast<std::uint8_t>(TIFFGetG(in[x + i]));
          rgb[3 * i + 2] = static_cast<std::uint8_t>(TIFFGetB(in[x + i]));
        }
        store_rgb_row(rgb, n, o + static_cast<std::ptrdiff_t>(x) * rows.channels, rows.channels);
      }
    }
  }

  void end_rows() override {
    const std::unique_ptr<Rows> r = std::move(rows_);
    if (!r || r->next != r->probe.height) throw Error(ErrorCode::kInvalidArgument, "TIFF: end_rows() before the last row");
    // A damaged strip libtiff read around (stoponerr is on, so this is a warning, not an error).
    if (!r->file.input.error.empty()) corrupt(kTiff, r->file.input.error);
    if (r->file.input.warnings > 0) warn(r->file.input.warning);
  }

 private:
  // A band decode in progress: the open file, libtiff's RGBA reader, the band in the workspace.
  struct Rows {
    explicit Rows(std::span<const std::uint8_t> bytes) : file(bytes) {}
    Rows(const Rows&) = delete;
    Rows& operator=(const Rows&) = delete;
    ~Rows() {
      if (begun) TIFFRGBAImageEnd(&img);
    }
    File file;
    ImageProbe probe;
    TIFFRGBAImage img{};
    bool begun = false;
    int next = 0;        // the next row to hand out
    int band_start = 0;  // the band the workspace holds
    int band_rows = 0;
  };
  std::unique_ptr<Rows> rows_;

  static ImageProbe probe_open(const File& f) {
    ImageProbe p;
    p.format = kTiff;
    std::uint32_t width = 0;
    std::uint32_t height = 0;
    if (TIFFGetField(f.tif, TIFFTAG_IMAGEWIDTH, &width) != 1 || TIFFGetField(f.tif, TIFFTAG_IMAGELENGTH, &height) != 1) {
      f.fail("no image size");
    }
    if (width == 0 || height == 0 || width > INT32_MAX || height > INT32_MAX) corrupt(kTiff, "the image has no pixels");
    p.width = static_cast<int>(width);
    p.height = static_cast<int>(height);
    p.bit_depth = f.field<std::uint16_t>(TIFFTAG_BITSPERSAMPLE, 1);
    p.channels = f.field<std::uint16_t>(TIFFTAG_SAMPLESPERPIXEL, 1);
    const auto photometric = f.field<std::uint16_t>(TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
    p.palette = photometric == PHOTOMETRIC_PALETTE;
    std::uint16_t extra = 0;
    std::uint16_t* kinds = nullptr;
    p.alpha = TIFFGetField(f.tif, TIFFTAG_EXTRASAMPLES, &extra, &kinds) == 1 && extra > 0;
    const auto compression = f.field<std::uint16_t>(TIFFTAG_COMPRESSION, COMPRESSION_NONE);
    if (TIFFIsCODECConfigured(compression) == 0) unsupported(kTiff, "compression " + std::to_string(compression));
    char message[1024] = {};
    if (TIFFRGBAImageOK(f.tif, message) == 0) unsupported(kTiff, message);
    std::uint32_t band = 0;
    if (TIFFIsTiled(f.tif) != 0) {
      TIFFGetField(f.tif, TIFFTAG_TILELENGTH, &band);
    } else {
      band = f.field<std::uint32_t>(TIFFTAG_ROWSPERSTRIP, height);
    }
    p.rows_per_band = static_cast<int>(std::clamp<std::uint32_t>(band, 1, height));
    p.animated = TIFFLastDirectory(f.tif) == 0;  // more pages follow
    return p;
  }
};

}  // namespace

std::unique_ptr<FormatDecoder> make_tiff_decoder() { return std::make_unique<TiffDecoder>(); }

}  // namespace sluice::stages
