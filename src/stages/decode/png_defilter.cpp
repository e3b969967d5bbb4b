// PNG's row filters undone (png_defilter.hpp). Sub, Average and Paeth carry a dependency from each
// pixel to the next (the left neighbour is an output), so a pixel is the unit of work whatever the
// register width: for 3 and 4 bytes per pixel (8-bit RGB and RGBA, the common photographs) one
// pixel is one SSE2 register of 16-bit lanes, as libpng's optional filter_sse2_intrinsics.c does;
// SSE2 is part of every x86-64 CPU, so no runtime dispatch is needed, and wider registers (AVX2)
// would not shorten the chain. Up has no such chain and is left to the compiler's vectoriser.
// Other pixel sizes (grey, grey+alpha, 16-bit samples) take the scalar loops, which
// are compiled once per pixel size so the neighbour's offset is a constant.
#include "stages/decode/png_defilter.hpp"

#include <cstdlib>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace sluice::stages::png {

namespace {

enum : int { kNone = 0, kSub = 1, kUp = 2, kAverage = 3, kPaeth = 4 };

inline std::uint8_t paeth(int a, int b, int c) {
  const int pa = std::abs(b - c);
  const int pb = std::abs(a - c);
  const int pc = std::abs(a + b - 2 * c);
  return static_cast<std::uint8_t>((pa <= pb && pa <= pc) ? a : (pb <= pc ? b : c));
}

template <int Bpp>
void sub_row(const std::uint8_t* in, std::uint8_t* out, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes && i < static_cast<std::size_t>(Bpp); ++i) out[i] = in[i];
  for (std::size_t i = Bpp; i < bytes; ++i) out[i] = static_cast<std::uint8_t>(in[i] + out[i - Bpp]);
}

void up_row(const std::uint8_t* in, const std::uint8_t* prior, std::uint8_t* out, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; ++i) out[i] = static_cast<std::uint8_t>(in[i] + prior[i]);
}

template <int Bpp>
void average_row(const std::uint8_t* in, const std::uint8_t* prior, std::uint8_t* out, std::size_t bytes) {
  if (prior == nullptr) {  // the first row: the row above is zeros
    for (std::size_t i = 0; i < bytes && i < static_cast<std::size_t>(Bpp); ++i) out[i] = in[i];
    for (std::size_t i = Bpp; i < bytes; ++i) out[i] = static_cast<std::uint8_t>(in[i] + (out[i - Bpp] >> 1));
    return;
  }
  for (std::size_t i = 0; i < bytes && i < static_cast<std::size_t>(Bpp); ++i) {
    out[i] = static_cast<std::uint8_t>(in[i] + (prior[i] >> 1));
  }
  for (std::size_t i = Bpp; i < bytes; ++i) {
    out[i] = static_cast<std::uint8_t>(in[i] + ((out[i - Bpp] + prior[i]) >> 1));
  }
}

template <int Bpp>
void paeth_row(const std::uint8_t* in, const std::uint8_t* prior, std::uint8_t* out, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes && i < static_cast<std::size_t>(Bpp); ++i) {
    out[i] = static_cast<std::uint8_t>(in[i] + prior[i]);  // paeth(0, b, 0) is b
  }
  for (std::size_t i = Bpp; i < bytes; ++i) {
    out[i] = static_cast<std::uint8_t>(in[i] + paeth(out[i - Bpp], prior[i], prior[i - Bpp]));
  }
}

#if defined(__SSE2__)
// One pixel of 3 or 4 bytes into the low lanes of a register, and back. A 3-byte pixel is read
// as a 4-byte word (the next pixel's first byte rides along in a lane nothing reads) except the
// row's last, which is put together in a register: a 3-byte memcpy through the stack would stall
// on store forwarding every pixel.
template <int Bpp>
inline __m128i load_pixel(const std::uint8_t* p, bool last) {
  std::uint32_t v;
  if (Bpp == 4 || !last) {
    std::memcpy(&v, p, 4);
  } else {
    v = std::uint32_t{p[0]} | (std::uint32_t{p[1]} << 8) | (std::uint32_t{p[2]} << 16);
  }
  return _mm_cvtsi32_si128(static_cast<int>(v));
}

template <int Bpp>
inline void store_pixel(std::uint8_t* p, __m128i v) {
  const auto word = static_cast<std::uint32_t>(_mm_cvtsi128_si32(v));
  if constexpr (Bpp == 4) {
    std::memcpy(p, &word, 4);
  } else {
    const auto low = static_cast<std::uint16_t>(word);
    std::memcpy(p, &low, 2);
    p[2] = static_cast<std::uint8_t>(word >> 16);
  }
}

// The pixels as 16-bit lanes (a: left output, b: above, c: above-left, x: the filtered input).
template <int Bpp>
void sub_row_sse2(const std::uint8_t* in, std::uint8_t* out, std::size_t bytes) {
  __m128i a = _mm_setzero_si128();
  for (std::size_t i = 0; i < bytes; i += Bpp) {
    a = _mm_add_epi8(a, load_pixel<Bpp>(in + i, i + Bpp == bytes));
    store_pixel<Bpp>(out + i, a);
  }
}

template <int Bpp>
void average_row_sse2(const std::uint8_t* in, const std::uint8_t* prior, std::uint8_t* out, std::size_t bytes) {
  const __m128i one = _mm_set1_epi8(1);
  __m128i a = _mm_setzero_si128();
  for (std::size_t i = 0; i < bytes; i += Bpp) {
    const bool last = i + Bpp == bytes;
    const __m128i b = load_pixel<Bpp>(prior + i, last);
    // floor((a + b) / 2): pavgb rounds up, so take back the odd sums' half.
    const __m128i average = _mm_sub_epi8(_mm_avg_epu8(a, b), _mm_and_si128(_mm_xor_si128(a, b), one));
    a = _mm_add_epi8(load_pixel<Bpp>(in + i, last), average);
    store_pixel<Bpp>(out + i, a);
  }
}

inline __m128i abs_epi16(__m128i v) { return _mm_max_epi16(v, _mm_sub_epi16(_mm_setzero_si128(), v)); }

inline __m128i select(__m128i mask, __m128i yes, __m128i no) {
  return _mm_or_si128(_mm_and_si128(mask, yes), _mm_andnot_si128(mask, no));
}

template <int Bpp>
void paeth_row_sse2(const std::uint8_t* in, const std::uint8_t* prior, std::uint8_t* out, std::size_t bytes) {
  const __m128i zero = _mm_setzero_si128();
  __m128i a = zero;
  __m128i c = zero;
  for (std::size_t i = 0; i < bytes; i += Bpp) {
    const bool last = i + Bpp == bytes;
    const __m128i b = _mm_unpacklo_epi8(load_pixel<Bpp>(prior + i, last), zero);
    const __m128i x = _mm_unpacklo_epi8(load_pixel<Bpp>(in + i, last), zero);
    // pa = |b - c|, pb = |a - c|, pc = |a + b - 2c|: the distances of a + b - c to a, b and c.
    const __m128i db = _mm_sub_epi16(b, c);
    const __m128i da = _mm_sub_epi16(a, c);
    const __m128i pa = abs_epi16(db);
    const __m128i pb = abs_epi16(da);
    const __m128i pc = abs_epi16(_mm_add_epi16(db, da));
    const __m128i smallest = _mm_min_epi16(pc, _mm_min_epi16(pa, pb));
    // a on ties with it, then b, then c: the spec's order.
    const __m128i nearest = select(_mm_cmpeq_epi16(smallest, pa), a,
                                   select(_mm_cmpeq_epi16(smallest, pb), b, c));
    a = _mm_add_epi8(x, nearest);  // byte-wise: the high bytes of the lanes stay 0
    store_pixel<Bpp>(out + i, _mm_packus_epi16(a, a));
    c = b;
  }
}
#endif

template <int Bpp>
bool defilter(int filter, const std::uint8_t* in, const std::uint8_t* prior, std::uint8_t* out, std::size_t bytes) {
  if (prior == nullptr) {  // the first row: Up is None, Paeth is Sub (paeth(a, 0, 0) is a)
    if (filter == kUp) filter = kNone;
    if (filter == kPaeth) filter = kSub;
  }
  switch (filter) {
    case kNone:
      if (out != in) std::memcpy(out, in, bytes);
      return true;
    case kUp: up_row(in, prior, out, bytes); return true;
#if defined(__SSE2__)
    case kSub:
      if constexpr (Bpp == 3 || Bpp == 4) {
        sub_row_sse2<Bpp>(in, out, bytes);
      } else {
        sub_row<Bpp>(in, out, bytes);
      }
      return true;
    case kAverage:
      if constexpr (Bpp == 3 || Bpp == 4) {
        if (prior != nullptr) {
          average_row_sse2<Bpp>(in, prior, out, bytes);
          return true;
        }
      }
      average_row<Bpp>(in, prior, out, bytes);
      return true;
    case kPaeth:
      if constexpr (Bpp == 3 || Bpp == 4) {
        paeth_row_sse2<Bpp>(in, prior, out, bytes);
      } else {
        paeth_row<Bpp>(in, prior, out, bytes);
      }
      return true;
#else
    case kSub: sub_row<Bpp>(in, out, bytes); return true;
    case kAverage: average_row<Bpp>(in, prior, out, bytes); return true;
    case kPaeth: paeth_row<Bpp>(in, prior, out, bytes); return true;
#endif
    default: return false;
  }
}

}  // namespace

bool defilter_row(int filter, const std::uint8_t* in, const std::uint8_t* prior, std::uint8_t* out,
                  std::size_t bytes, int bpp) {
  switch (bpp) {
    case 1: return defilter<1>(filter, in, prior, out, bytes);
    case 2: return defilter<2>(filter, in, prior, out, bytes);
    case 3: return defilter<3>(filter, in, prior, out, bytes);
    case 4: return defilter<4>(filter, in, prior, out, bytes);
    case 6: return defilter<6>(filter, in, prior, out, bytes);
    case 8: return defilter<8>(filter, in, prior, out, bytes);
    default: return false;
  }
}

}  // namespace sluice::stages::png
