// The splicer of jpeg_resume.hpp: a marker parser for the one layout it handles, a plain baseline
// Huffman decoder for the few MCUs a splice re-encodes (it keeps their symbols), and the Huffman
// encoder that writes them. The scanner that finds the resume points, on every file's first
// read, is the fast decoder of jpeg_scan.cpp.
#include "stages/decode/jpeg_resume.hpp"

#include <algorithm>
#include <cstring>

#include "stages/decode/jpeg_bits.hpp"

namespace sluice::stages {
namespace {

int be16(const std::uint8_t* p) { return (p[0] << 8) | p[1]; }

}  // namespace

bool make_codes(const ScanLayout::Huffman& t, std::uint16_t* code, std::uint8_t* size) {
  int k = 0;
  std::uint32_t next = 0;
  for (int len = 1; len <= 16; ++len) {
    for (int i = 0; i < t.bits[len]; ++i, ++k) {
      code[k] = static_cast<std::uint16_t>(next++);
      size[k] = static_cast<std::uint8_t>(len);
    }
    if (next > (1u << len)) return false;
    next <<= 1;
  }
  return true;
}

void decode_limits(const ScanLayout::Huffman& t, const std::uint16_t* code, std::int32_t (&maxcode)[18],
                   std::int32_t (&offset)[18]) {
  int k = 0;
  for (int len = 1; len <= 16; ++len) {
    maxcode[len] = -1;
    if (t.bits[len] == 0) continue;
    offset[len] = k - code[k];
    k += t.bits[len];
    maxcode[len] = code[k - 1];
  }
  maxcode[17] = 0x7fffffff;  // stops the search at the longest length
}

namespace {

struct DecodeTable {
  static constexpr int kLook = 9;
  std::uint16_t look[1 << kLook] = {};  // (length << 8) | symbol, 0 when the code is longer
  std::int32_t maxcode[18] = {};
  std::int32_t offset[18] = {};
  const std::uint8_t* values = nullptr;

  bool build(const ScanLayout::Huffman& t) {
    if (!t.defined) return false;
    std::uint16_t code[256];
    std::uint8_t size[256];
    if (!make_codes(t, code, size)) return false;
    values = t.values;
    decode_limits(t, code, maxcode, offset);
    for (int i = 0; i < t.count; ++i) {
      if (size[i] > kLook) continue;
      const int shift = kLook - size[i];
      for (int j = 0; j < (1 << shift); ++j) {
        look[(code[i] << shift) | j] = static_cast<std::uint16_t>((size[i] << 8) | t.values[i]);
      }
    }
    return true;
  }
};

struct EncodeTable {
  std::uint16_t code[256] = {};
  std::uint8_t size[256] = {};  // 0: the symbol has no code

  bool build(const ScanLayout::Huffman& t) {
    if (!t.defined) return false;
    std::uint16_t c[256];
    std::uint8_t s[256];
    if (!make_codes(t, c, s)) return false;
    for (int i = 0; i < t.count; ++i) {
      code[t.values[i]] = c[i];
      size[t.values[i]] = s[i];
    }
    return true;
  }
};

// Inlined: it runs once per Huffman symbol, the scanner's inner loop.
[[gnu::always_inline]] inline int decode_symbol(JpegBits& in, const DecodeTable& t) {
  in.ensure32();
  const auto peek = static_cast<std::uint32_t>(in.buffer() >> 48);
  if (const std::uint16_t e = t.look[peek >> (16 - DecodeTable::kLook)]; e != 0) {
    in.drop(e >> 8);
    return e & 0xFF;
  }
  int length = 0;
  const int symbol = long_code(t.maxcode, t.offset, t.values, DecodeTable::kLook + 1, peek, length);
  if (symbol >= 0) in.drop(length);
  return symbol;
}

// One block's symbols, as a splice re-encodes them.
struct BlockSymbols {
  int dc_diff = 0;
  int ac_count = 0;
  std::uint8_t ac_symbol[64] = {};
  std::uint16_t ac_bits[64] = {};
  int eob_at = -1;  // k at which EOB was read, -1 when the block ran to coefficient 63
};

struct Tables {
  DecodeTable dc[3], ac[3];
};

// One block; symbols may be null. False on a code no table has or a bad DC category.
template <bool kRecord>
bool decode_block(JpegBits& in, const DecodeTable& dc, const DecodeTable& ac, int& diff, BlockSymbols* symbols) {
  const int s = decode_symbol(in, dc);
  if (s < 0 || s > 11) return false;
  diff = s == 0 ? 0 : extend(in.bits(s), s);
  if constexpr (kRecord) {
    symbols->dc_diff = diff;
    symbols->ac_count = 0;
    symbols->eob_at = -1;
  }
  for (int k = 1; k < 64; ++k) {
    const int rs = decode_symbol(in, ac);
    if (rs < 0) return false;
    const int r = rs >> 4;
    const int size = rs & 15;
    int extra = 0;
    if (size != 0) {
      k += r;
      extra = in.bits(size);
    } else if (r != 15) {
      if constexpr (kRecord) {
        symbols->eob_at = k;
        symbols->ac_symbol[symbols->ac_count] = static_cast<std::uint8_t>(rs);
        symbols->ac_bits[symbols->ac_count++] = 0;
      }
      break;
    } else {
      k += 15;
    }
    if constexpr (kRecord) {
      symbols->ac_symbol[symbols->ac_count] = static_cast<std::uint8_t>(rs);
      symbols->ac_bits[symbols->ac_count++] = static_cast<std::uint16_t>(extra);
    }
  }
  return true;
}

bool tables_valid(const ScanLayout& layout) {
  std::uint16_t code[256];
  std::uint8_t size[256];
  for (int c = 0; c < layout.components; ++c) {
    const ScanLayout::Huffman& dc = layout.dc[layout.dc_table[c]];
    const ScanLayout::Huffman& ac = layout.ac[layout.ac_table[c]];
    if (!dc.defined || !ac.defined || !make_codes(dc, code, size) || !make_codes(ac, code, size)) return false;
  }
  return true;
}

bool build_tables(const ScanLayout& layout, Tables& t) {
  for (int c = 0; c < layout.components; ++c) {
    if (!t.dc[c].build(layout.dc[layout.dc_table[c]]) || !t.ac[c].build(layout.ac[layout.ac_table[c]])) return false;
  }
  return true;
}

bool parse_frame(const std::uint8_t* seg, int length, ScanLayout& layout, std::uint32_t at, int ids[3]) {
  if (length < 6 || seg[0] != 8) return false;
  layout.height = be16(seg + 1);
  layout.width = be16(seg + 3);
  layout.components = seg[5];
  layout.height_offset = at + 5;
  if (layout.height == 0 || layout.width == 0 || (layout.components != 1 && layout.components != 3)) return false;
  if (length < 6 + 3 * layout.components) return false;
  int hmax = 1, vmax = 1, blocks = 0;
  int h[3], v[3];
  for (int c = 0; c < layout.components; ++c) {
    ids[c] = seg[6 + 3 * c];
    h[c] = seg[7 + 3 * c] >> 4;
    v[c] = seg[7 + 3 * c] & 15;
    if (h[c] < 1 || h[c] > 4 || v[c] < 1 || v[c] > 4) return false;
    hmax = std::max(hmax, h[c]);
    vmax = std::max(vmax, v[c]);
  }
  if (layout.components == 1 && (h[0] != 1 || v[0] != 1)) return false;
  for (int c = 0; c < layout.components; ++c) {
    for (int i = 0; i < h[c] * v[c]; ++i) {
      if (blocks == 10) return false;
      layout.block_component[blocks++] = static_cast<std::uint8_t>(c);
    }
  }
  layout.blocks = blocks;
  layout.mcu_width = 8 * hmax;
  layout.mcu_height = 8 * vmax;
  layout.mcus_per_row = (layout.width + layout.mcu_width - 1) / layout.mcu_width;
  layout.mcu_rows = (layout.height + layout.mcu_height - 1) / layout.mcu_height;
  return true;
}

bool parse_tables(const std::uint8_t* seg, int length, ScanLayout& layout) {
  int j = 0;
  while (j < length) {
    if (j + 17 > length) return false;
    const int tc = seg[j] >> 4, th = seg[j] & 15;
    if (tc > 1 || th > 3) return false;
    ScanLayout::Huffman& t = tc == 0 ? layout.dc[th] : layout.ac[th];
    int count = 0;
    t.bits[0] = 0;
    for (int l = 1; l <= 16; ++l) count += t.bits[l] = seg[j + l];
    if (count > 256 || j + 17 + count > length) return false;
    std::memcpy(t.values, seg + j + 17, static_cast<std::size_t>(count));
    t.count = count;
    t.defined = true;
    j += 17 + count;
  }
  return true;
}

bool parse_scan(const std::uint8_t* seg, int length, ScanLayout& layout, const int ids[3]) {
  if (layout.components == 0 || length < 1 || seg[0] != layout.components || length < 4 + 2 * seg[0]) return false;
  // The scan must list the frame's components in the frame's order: the MCU's block order
  // (block_component) was laid out from the frame.
  for (int c = 0; c < layout.components; ++c) {
    if (seg[1 + 2 * c] != ids[c]) return false;
    layout.dc_table[c] = seg[2 + 2 * c] >> 4;
    layout.ac_table[c] = seg[2 + 2 * c] & 15;
    if (layout.dc_table[c] > 3 || layout.ac_table[c] > 3) return false;
  }
  const std::uint8_t* s = seg + 1 + 2 * layout.components;
  return s[0] == 0 && s[1] == 63 && s[2] == 0;
}

}  // namespace

bool parse_scan_layout(std::span<const std::uint8_t> jpeg, ScanLayout& layout) {
  layout = ScanLayout{};
  if (jpeg.size() < 4 || jpeg[0] != 0xFF || jpeg[1] != 0xD8 || jpeg.size() > 0xFFFFFFF0u) return false;
  int ids[3] = {};
  std::size_t i = 2;
  while (i + 4 <= jpeg.size()) {
    if (jpeg[i] != 0xFF) return false;
    const int marker = jpeg[i + 1];
    if (marker == 0xFF) {  // fill byte
      ++i;
      continue;
    }
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {
      i += 2;
      continue;
    }
    if (marker == 0xD8 || marker == 0xD9) return false;
    const int length = be16(&jpeg[i + 2]);
    if (length < 2 || i + 2 + static_cast<std::size_t>(length) > jpeg.size()) return false;
    const std::uint8_t* seg = &jpeg[i + 4];
    const int n = length - 2;
    const auto at = static_cast<std::uint32_t>(i);
    bool ok = true;
    if (marker == 0xC0 || marker == 0xC1) {
      ok = layout.components == 0 && parse_frame(seg, n, layout, at, ids);
    } else if (marker >= 0xC2 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC) {
      return false;  // progressive, lossless, arithmetic, hierarchical
    } else if (marker == 0xC4) {
      ok = parse_tables(seg, n, layout);
    } else if (marker == 0xCC || marker == 0xDC) {
      return false;  // arithmetic conditioning, DNL
    } else if (marker == 0xDD) {
      ok = n >= 2 && be16(seg) == 0;  // a restart interval: not handled
    } else if (marker == 0xDA) {
      if (!parse_scan(seg, n, layout, ids)) return false;
      layout.sos_offset = at;
      layout.scan_offset = static_cast<std::uint32_t>(i + 2 + static_cast<std::size_t>(length));
      return tables_valid(layout);
    }
    if (!ok) return false;
    i += 2 + static_cast<std::size_t>(length);
  }
  return false;
}

namespace {

class BitWriter {
 public:
  explicit BitWriter(std::vector<std::uint8_t>& out) : out_(out) {}
  void put(std::uint32_t bits, int n) {
    for (int i = n - 1; i >= 0; --i) {
      acc_ = static_cast<std::uint8_t>((acc_ << 1) | ((bits >> i) & 1));
      if (++count_ == 8) {
        out_.push_back(acc_);
        if (acc_ == 0xFF) out_.push_back(0x00);
        acc_ = 0;
        count_ = 0;
      }
    }
  }
  bool aligned() const { return count_ == 0; }

 private:
  std::vector<std::uint8_t>& out_;
  std::uint8_t acc_ = 0;
  int count_ = 0;
};

int category(int v) {
  int a = v < 0 ? -v : v, s = 0;
  while (a != 0) {
    ++s;
    a >>= 1;
  }
  return s;
}

// ZRL codes to insert per block so the MCU's length in bits becomes `need` modulo 8: a small
// search over residues (each block can take (63 - eob_at) / 16 of them, before its EOB).
constexpr int kMaxSpliceMcus = 16;
constexpr int kMaxSpliceBlocks = kMaxSpliceMcus * 10;

bool plan_padding(const BlockSymbols* blocks, int count, const int* zrl_size, int need, int* zrls) {
  int reach[kMaxSpliceBlocks + 1][8];  // reach[b][r]: ZRLs in block b - 1 that first reached residue r, -1 none
  for (auto& row : reach) std::fill(row, row + 8, -2);
  reach[0][0] = -1;
  for (int b = 0; b < count; ++b) {
    const int cap = blocks[b].eob_at < 0 || zrl_size[b] == 0 ? 0 : (63 - blocks[b].eob_at) / 16;
    for (int r = 0; r < 8; ++r) {
      if (reach[b][r] == -2) continue;
      for (int n = 0; n <= cap; ++n) {
        const int to = (r + n * zrl_size[b]) % 8;
        if (reach[b + 1][to] == -2) reach[b + 1][to] = n;
      }
    }
  }
  if (reach[count][need] == -2) return false;
  for (int b = count - 1, r = need; b >= 0; --b) {
    zrls[b] = reach[b + 1][r];
    r = ((r - zrls[b] * zrl_size[b]) % 8 + 8) % 8;
  }
  return true;
}

// Codes the first block's DC value may take: the table's own code for its category, if any, and
// a new code appended after the table's longest ones at each longer length (libjpeg requires
// only that no length's codes run out, which the table's own check already guarantees there).
struct DcCode {
  std::uint16_t code = 0;
  int length = 0;
  bool appended = false;
};

int dc_code_options(const ScanLayout::Huffman& table, const EncodeTable& enc, int category, DcCode* options) {
  int n = 0;
  if (enc.size[category] != 0) options[n++] = {enc.code[category], enc.size[category], false};
  int longest = 0;
  std::uint32_t next = 0;
  for (int len = 1; len <= 16; ++len) {
    next = (next << 1) + table.bits[len];
    if (table.bits[len] != 0) longest = len;
  }
  if (longest == 0 || table.count >= 256) return n;
  next >>= 16 - longest;  // the first code after the longest ones, at that length
  if (next >= (1u << longest)) return n;
  for (int len = longest + 1; len <= 16; ++len) {
    options[n++] = {static_cast<std::uint16_t>(next << (len - longest)), len, true};
  }
  return n;
}

// A DHT segment redefining DC table `slot` as `table` plus `category` at `length`.
void append_dc_table(std::vector<std::uint8_t>& out, const ScanLayout::Huffman& table, int slot, int category,
                     int length) {
  const int size = 2 + 1 + 16 + table.count + 1;
  const std::uint8_t head[] = {0xFF, 0xC4, static_cast<std::uint8_t>(size >> 8), static_cast<std::uint8_t>(size & 0xFF),
                               static_cast<std::uint8_t>(slot)};
  out.insert(out.end(), head, head + sizeof head);
  for (int len = 1; len <= 16; ++len) out.push_back(static_cast<std::uint8_t>(table.bits[len] + (len == length ? 1 : 0)));
  out.insert(out.end(), table.values, table.values + table.count);
  out.push_back(static_cast<std::uint8_t>(category));
}

}  // namespace

bool splice_at(std::span<const std::uint8_t> jpeg, const ScanLayout& layout, int row, const ResumePoint& point,
               Splice& out) {
  if (row <= 0 || row >= layout.mcu_rows || point.byte < layout.scan_offset || point.byte >= jpeg.size() ||
      point.bit > 7) {
    return false;
  }
  Tables t;
  if (!build_tables(layout, t)) return false;
  EncodeTable dc[3], ac[3];
  for (int c = 0; c < layout.components; ++c) {
    if (!dc[c].build(layout.dc[layout.dc_table[c]]) || !ac[c].build(layout.ac[layout.ac_table[c]])) return false;
  }
  // The row's first MCUs, decoded from the point: one, unless the padding needs more blocks.
  JpegBits in(jpeg, point.byte);
  in.refill();
  if (point.bit > 0) in.drop(point.bit);
  BlockSymbols blocks[kMaxSpliceBlocks];
  int zrl_size[kMaxSpliceBlocks];
  int zrls[kMaxSpliceBlocks] = {};
  DcCode first_dc[18];
  int first_dc_options = 0;
  int chosen = -1;
  int count = 0;
  int bits = 0;  // all but the first DC code
  ResumePoint end;
  const int mcus = std::min(kMaxSpliceMcus, layout.mcus_per_row);
  for (int m = 0; m < mcus && chosen < 0; ++m) {
    for (int b = 0; b < layout.blocks; ++b, ++count) {
      const int c = layout.block_component[b];
      int diff = 0;
      if (!decode_block<true>(in, t.dc[c], t.ac[c], diff, &blocks[count])) return false;
      // Each component's first block carries its DC value itself (the predictors restart at zero).
      if (m == 0 && (b == 0 || layout.block_component[b - 1] != c)) blocks[count].dc_diff += point.dc[c];
      const int s = category(blocks[count].dc_diff);
      if (s > 11) return false;
      if (count == 0) {
        first_dc_options = dc_code_options(layout.dc[layout.dc_table[c]], dc[c], s, first_dc);
      } else {
        if (dc[c].size[s] == 0) return false;
        bits += dc[c].size[s];
      }
      bits += s;
      for (int i = 0; i < blocks[count].ac_count; ++i) {
        const int rs = blocks[count].ac_symbol[i];
        if (ac[c].size[rs] == 0) return false;
        bits += ac[c].size[rs] + (rs & 15);
      }
      zrl_size[count] = ac[c].size[0xF0];
    }
    in.refill();
    if (!in.sound()) return false;
    end = in.position();
    for (int o = 0; o < first_dc_options && chosen < 0; ++o) {
      if (plan_padding(blocks, count, zrl_size, ((end.bit - bits - first_dc[o].length) % 8 + 8) % 8, zrls)) chosen = o;
    }
  }
  if (chosen < 0) return false;
  if (end.byte >= jpeg.size() || (jpeg[end.byte] == 0xFF && (end.byte + 1 >= jpeg.size() || jpeg[end.byte + 1] != 0))) {
    return false;
  }

  const DcCode& dc0 = first_dc[chosen];
  const int c0 = layout.block_component[0];
  out.head.assign(jpeg.begin(), jpeg.begin() + layout.sos_offset);
  out.appended = {};
  if (dc0.appended) {
    append_dc_table(out.head, layout.dc[layout.dc_table[c0]], layout.dc_table[c0], category(blocks[0].dc_diff),
                    dc0.length);
    out.appended = {layout.dc_table[c0], dc0.length};
  }
  out.head.insert(out.head.end(), jpeg.begin() + layout.sos_offset, jpeg.begin() + layout.scan_offset);
  const int height = layout.height - row * layout.mcu_height;
  out.head[layout.height_offset] = static_cast<std::uint8_t>(height >> 8);
  out.head[layout.height_offset + 1] = static_cast<std::uint8_t>(height & 0xFF);
  BitWriter w(out.head);
  for (int b = 0; b < count; ++b) {
    const int c = layout.block_component[b % layout.blocks];
    const int v = blocks[b].dc_diff;
    const int s = category(v);
    if (b == 0) {
      w.put(dc0.code, dc0.length);
    } else {
      w.put(dc[c].code[s], dc[c].size[s]);
    }
    if (s > 0) w.put(static_cast<std::uint32_t>(v < 0 ? v + (1 << s) - 1 : v), s);
    for (int i = 0; i < blocks[b].ac_count; ++i) {
      const int rs = blocks[b].ac_symbol[i];
      if (rs == 0x00) {
        for (int z = 0; z < zrls[b]; ++z) w.put(ac[c].code[0xF0], ac[c].size[0xF0]);
      }
      w.put(ac[c].code[rs], ac[c].size[rs]);
      if ((rs & 15) != 0) w.put(blocks[b].ac_bits[i], rs & 15);
    }
  }
  // The rest of the byte where the MCU ended, then whole original bytes.
  const int rest = 8 - end.bit;
  w.put(jpeg[end.byte] & ((1u << rest) - 1), rest);
  if (!w.aligned()) return false;  // cannot happen: the padding made it so
  out.tail_offset = end.byte + 1 + (jpeg[end.byte] == 0xFF ? 1 : 0);
  out.first_row = row * layout.mcu_height;
  return true;
}

}  // namespace sluice::stages
