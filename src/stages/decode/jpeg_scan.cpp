// scan_resume_points (jpeg_resume.hpp): the baseline Huffman scan of the rows above a crop, on a
// file's first read. It runs where libjpeg's jpeg_skip_scanlines would have run, so it is built to
// cost no more than libjpeg's own Huffman decoder:
// - a 64-bit bit buffer refilled eight bytes at a time when none of them is 0xFF (one load, one
//   byte swap), byte by byte with the 0xFF00 unstuffing otherwise; a marker or the end of the data
//   feeds zero bits and counts them, so a row that used them is refused, as libjpeg would have
//   decoded garbage there; while a row is scanned the buffer is held in registers (ScanBits) and
//   refilled before every code without a test of how many bits it holds;
// - per table a 9-bit lookup resolving the code: for AC codes it also gives the extra bits' count
//   and how far the coefficient index moves, so a coefficient costs one lookup, one shift and one
//   add, and no value is extracted or stored (the scan needs only the DC predictors);
// - on long scans an 11-bit table built from that one resolves two AC codes per lookup, which
//   halves the serial chain of shift and lookup that bounds any Huffman decoder;
// - codes longer than 9 bits go through the canonical (maxcode) search of JPEG Annex F.
// The points are the same as a plain bit-by-bit decoder's; tests/unit/stages/jpeg_scan_test.cpp
// holds it to one.
#include <algorithm>
#include <cstring>

#include "stages/decode/jpeg_bits.hpp"
#include "stages/decode/jpeg_resume.hpp"

namespace sluice::stages {
namespace {

constexpr int kLook = 9;
constexpr int kPair = 11;

// An AC entry: bits to drop (code and extra bits, at most 9 + 15) in bits 0-4, how far the
// coefficient index moves (run + 1, or 16 for ZRL) in bits 5-9, end of block in bit 10. Zero: the
// code is longer than kLook bits. A DC entry is (code length << 8) | category.
constexpr std::uint16_t kEob = 1u << 10;

struct ScanTable {
  std::uint16_t look[1 << kLook] = {};
  std::int32_t maxcode[18] = {};
  std::int32_t offset[18] = {};
  const std::uint8_t* values = nullptr;

  bool build(const ScanLayout::Huffman& t, bool ac) {
    if (!t.defined) return false;
    std::uint16_t code[256];
    std::uint8_t size[256];
    if (!make_codes(t, code, size)) return false;
    values = t.values;
    decode_limits(t, code, maxcode, offset);
    for (int i = 0; i < t.count; ++i) {
      if (size[i] > kLook) continue;
      const int v = t.values[i];
      std::uint16_t e = static_cast<std::uint16_t>((size[i] << 8) | v);
      if (ac) {
        const int run = v >> 4, extra = v & 15;
        if (extra != 0) {
          e = static_cast<std::uint16_t>((size[i] + extra) | ((run + 1) << 5));
        } else if (run == 15) {
          e = static_cast<std::uint16_t>(size[i] | (16 << 5));
        } else {
          e = static_cast<std::uint16_t>(size[i] | kEob);
        }
      }
      const int shift = kLook - size[i];
      std::fill_n(look + (code[i] << shift), 1 << shift, e);
    }
    return true;
  }

  // Two AC codes at once, for long scans: indexed by the next kPair bits, the bits to drop for
  // the first code and its extra bits and, where they also fall within those kPair bits, the
  // second's (bits 0-4), the first's index step (bits 5-9), the second's (bits 10-14, 0 when there
  // is none or it is an end of block), whether the last one read ends the block (bit 15). Zero:
  // the first code is longer than kLook bits. Built from look, so it decodes as look does.
  void build_pairs(std::uint16_t* pairs) const {
    for (int i = 0; i < (1 << kPair); ++i) {
      const std::uint16_t e1 = look[i >> (kPair - kLook)];
      const int d1 = e1 & 31;
      if (e1 == 0 || (e1 & kEob) != 0 || d1 >= kPair) {
        pairs[i] = e1 == 0 ? 0 : static_cast<std::uint16_t>(d1 | (e1 & kEob ? 0x8000 : (e1 & (31 << 5))));
        continue;
      }
      const std::uint16_t e2 = look[((i << d1) & ((1 << kPair) - 1)) >> (kPair - kLook)];
      const int d2 = e2 & 31;
      std::uint16_t e = static_cast<std::uint16_t>(d1 | (e1 & (31 << 5)));
      if (e2 != 0 && d2 <= kPair - d1) {
        e = static_cast<std::uint16_t>((d1 + d2) | (e1 & (31 << 5)) |
                                       ((e2 & kEob) != 0 ? 0x8000 : ((e2 >> 5) & 31) << 10));
      }
      pairs[i] = e;
    }
  }

  // The symbol of a code longer than kLook bits, from the next 16 bits; -1 when no code matches.
  [[gnu::noinline]] int slow(std::uint32_t peek16, int& length) const {
    return long_code(maxcode, offset, values, kLook + 1, peek16, length);
  }
};

// JpegBits' buffer in registers while a row is scanned (HeldBits); near a 0xFF or a marker it
// goes back to JpegBits for its byte-wise refill (at least 57 bits afterwards).
struct ScanBits : HeldBits<ScanBits> {
  using HeldBits::HeldBits;
  [[gnu::noinline]] void slow() {
    done();
    in.refill();
    load();
  }
};

// One block: its DC difference into diff, its AC codes skipped. False on a code no table has or a
// DC category over 11.
template <bool kPairs>
[[gnu::always_inline]] inline bool skip_block(ScanBits& in, const ScanTable& dc, const ScanTable& ac,
                                              const std::uint16_t* pairs, int& diff) {
  // Each code is looked up before the refill, from bits already loaded (at least 25: a refill
  // leaves 56, a code and its extra bits take at most 31), so the lookup's load does not wait for
  // the refill's; the code is taken after it.
  const std::uint16_t dc_entry = dc.look[in.buffer() >> (64 - kLook)];
  in.refill_dc();
  int s, length;
  if (const std::uint16_t e = dc_entry; e != 0) {
    length = e >> 8;
    s = e & 0xFF;
  } else {
    s = dc.slow(static_cast<std::uint32_t>(in.buffer() >> 48), length);
  }
  if (s < 0 || s > 11) return false;
  in.drop(length);
  diff = s == 0 ? 0 : extend(in.take(s), s);
  for (int k = 1; k < 64;) {
    const std::uint16_t first = kPairs ? pairs[in.buffer() >> (64 - kPair)] : ac.look[in.buffer() >> (64 - kLook)];
    in.refill();
    if constexpr (kPairs) {
      // Both codes only while the block cannot end between them (k reaching 64).
      const std::uint16_t e = first;
      const int steps = ((e >> 5) & 31) + ((e >> 10) & 31);
      if (e != 0 && k + steps < 64) {
        in.drop(e & 31);
        if (e & 0x8000) break;
        k += steps;
        continue;
      }
    }
    if (const std::uint16_t e = kPairs ? ac.look[in.buffer() >> (64 - kLook)] : first; e != 0) {
      in.drop(e & 31);
      if (e & kEob) break;
      k += (e >> 5) & 31;
      continue;
    }
    const int rs = ac.slow(static_cast<std::uint32_t>(in.buffer() >> 48), length);
    if (rs < 0) return false;
    const int run = rs >> 4, extra = rs & 15;
    in.drop(length + extra);
    if (extra != 0) {
      k += run + 1;
    } else if (run == 15) {
      k += 16;
    } else {
      break;
    }
  }
  return true;
}

// The layout's tables, each built once however many components share it.
struct ScanTables {
  ScanTable dc[4], ac[4];
  const ScanTable* component_dc[3] = {};
  const ScanTable* component_ac[3] = {};

  bool build(const ScanLayout& layout) {
    bool built_dc[4] = {}, built_ac[4] = {};
    for (int c = 0; c < layout.components; ++c) {
      const int d = layout.dc_table[c], a = layout.ac_table[c];
      if (!built_dc[d] && !dc[d].build(layout.dc[d], false)) return false;
      if (!built_ac[a] && !ac[a].build(layout.ac[a], true)) return false;
      built_dc[d] = built_ac[a] = true;
      component_dc[c] = &dc[d];
      component_ac[c] = &ac[a];
    }
    return true;
  }
};

// Rows [first, rows) from the reader's place, each row's point appended; false where the data
// stops (a code no table has, a predictor out of range, bits past the data).
template <bool kPairs>
bool scan_rows(JpegBits& in, const ScanLayout& layout, const ScanTables& t, const std::uint16_t* const* pairs,
               int first, int rows, int* pred, std::vector<ResumePoint>& points) {
  for (int row = first; row < rows; ++row) {
    ScanBits bits(in);
    for (int m = 0; m < layout.mcus_per_row; ++m) {
      for (int b = 0; b < layout.blocks; ++b) {
        const int c = layout.block_component[b];
        int diff = 0;
        if (!skip_block<kPairs>(bits, *t.component_dc[c], *t.component_ac[c], pairs[c], diff)) return false;
        pred[c] += diff;
        // A point keeps 16 bits of predictor; libjpeg's is an int: refuse what would not fit.
        if (pred[c] < -32768 || pred[c] > 32767) return false;
      }
    }
    bits.done();
    if (!in.sound()) return false;
    ResumePoint p = in.position();
    for (int c = 0; c < layout.components; ++c) p.dc[c] = static_cast<std::int16_t>(pred[c]);
    points.push_back(p);
  }
  return true;
}

// Blocks to scan from which the pair tables (2^kPair entries per AC table, a few microseconds to
// build) pay for themselves: a whole-file scan saves about 20 ns a block with them.
constexpr std::int64_t kPairBlocks = 1024;

}  // namespace

int scan_resume_points(std::span<const std::uint8_t> jpeg, const ScanLayout& layout, int rows,
                       std::vector<ResumePoint>& points) {
  rows = std::clamp(rows, 0, std::max(0, layout.mcu_rows - 1));
  if (static_cast<int>(points.size()) > rows) return static_cast<int>(points.size());
  ScanTables t;
  if (layout.scan_offset == 0 || !t.build(layout)) return static_cast<int>(points.size());
  int pred[3] = {0, 0, 0};
  if (!points.empty() && (points.back().bit > 7 || points.back().byte >= jpeg.size())) {
    return static_cast<int>(points.size());
  }
  JpegBits in(jpeg, points.empty() ? layout.scan_offset : points.back().byte);
  in.refill();
  if (points.empty()) {
    points.push_back(in.position());
  } else {
    if (points.back().bit > 0) in.drop(points.back().bit);
    for (int c = 0; c < layout.components; ++c) pred[c] = points.back().dc[c];
  }
  const int first = static_cast<int>(points.size()) - 1;
  const std::int64_t blocks = std::int64_t{rows - first} * layout.mcus_per_row * layout.blocks;
  const std::uint16_t* pairs[3] = {};
  if (blocks < kPairBlocks) {
    scan_rows<false>(in, layout, t, pairs, first, rows, pred, points);
    return static_cast<int>(points.size());
  }
  std::uint16_t storage[4][1 << kPair];
  bool built[4] = {};
  for (int c = 0; c < layout.components; ++c) {
    const int a = layout.ac_table[c];
    if (!built[a]) t.ac[a].build_pairs(storage[a]);
    built[a] = true;
    pairs[c] = storage[a];
  }
  scan_rows<true>(in, layout, t, pairs, first, rows, pred, points);
  return static_cast<int>(points.size());
}

}  // namespace sluice::stages
