// sluice's baseline Huffman entropy decoder in libjpeg-turbo's entropy slot (jpeg_huffman.hpp).
// What libjpeg-turbo 2.1's jdhuff.c does, and what this one does in its place:
// - start_pass runs once per scan, from the input controller (for the first scan inside
//   jpeg_start_decompress, before this decoder is installed): a single-scan file has no other
//   start, so this decoder's start_pass only runs on a second SOS, which it does not vouch for.
// - decode_mcu is called once per MCU, with the MCU's blocks zeroed by the coefficient
//   controller, or with MCU_data null from jpeg_skip_scanlines (decode and discard). Coefficients
//   go in natural order; only components the output needs are written.
// - A restart interval: before the MCU that starts one, the rest of the byte is padding and the
//   next two bytes must be FF D0+n with n the marker reader's next_restart_num; the marker reader
//   reads it (read_restart_marker), the DC predictors restart at zero.
// - The end of the scan: after the last MCU's bits and the padding to the byte, the next bytes
//   must be FF and a marker; the source is left there, where libjpeg reads the markers on.
// - A spliced file with an appended DC code (jpeg_resume.hpp): the first MCU's first block takes
//   its DC code from the table with that code (decode_first_mcu), every other block from the
//   table without it, where those bits are a code no table has, as in the original file.
// Anything else gives up (the decode runs again with libjpeg's decoder, or, for a spliced file,
// the original file is decoded instead).
#include "stages/decode/jpeg_huffman.hpp"

#include <algorithm>
#include <atomic>
#include <csetjmp>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>

#include <jpegint.h>

#include "stages/decode/jpeg_bits.hpp"
#include "stages/decode/jpeg_errors.hpp"
#include "stages/decode/jpeg_resume.hpp"

namespace sluice::stages {
namespace {

std::atomic<bool>& own_huffman_switch() {
  static std::atomic<bool> on = [] {
    const char* v = std::getenv("SLUICE_JPEG_HUFFMAN");
    return v == nullptr || std::string_view(v) != "libjpeg";
  }();
  return on;
}

std::atomic<std::uint64_t> installed_count{0};
std::atomic<std::uint64_t> gave_up_count{0};

// Bits a lookup takes: codes of up to kLook bits (with their extra bits, up to kLook in all, the
// value too) resolve in one lookup; longer ones take the canonical search.
constexpr int kLook = 10;

// A lookup entry: bits to drop (bits 0-4: the code, plus its extra bits when the value is in the
// entry; bit 5 zero, so the entry itself is the shift count of a 64-bit shift, which takes its
// low six bits), the zero run before the coefficient (bits 6-9), end of block (bit 10), a run of
// 16 zeros (ZRL, bit 11), extra bits still to read (bits 12-15), the value (bits 16-31, signed).
// Zero: the code is longer than kLook bits. A DC entry is the same with the run 0.
constexpr std::uint32_t kEob = 1u << 10;
constexpr std::uint32_t kZrl = 1u << 11;

struct DecodeTable {
  std::uint32_t look[1 << kLook];
  std::int32_t maxcode[18];
  std::int32_t offset[18];
  std::uint8_t values[256];

  // `drop`: the length of an appended DC code (AppendedDcCode), left out: it must be the table's
  // one longest code, so its last value; 0 keeps every code.
  bool build(const JHUFF_TBL& src, bool ac, int drop = 0) {
    ScanLayout::Huffman t;
    for (int l = 1; l <= 16; ++l) {
      t.bits[l] = src.bits[l];
      t.count += src.bits[l];
    }
    if (t.count > 256) return false;
    if (drop != 0) {
      if (drop < 1 || drop > 16 || t.bits[drop] != 1) return false;
      for (int l = drop + 1; l <= 16; ++l) {
        if (t.bits[l] != 0) return false;
      }
      t.bits[drop] = 0;
      --t.count;
    }
    for (int i = 0; i < t.count && !ac; ++i) {
      if (src.huffval[i] > 15) return false;  // libjpeg refuses such a DC table before this
    }
    std::memcpy(t.values, src.huffval, 256);
    std::uint16_t code[256];
    std::uint8_t size[256];
    if (!make_codes(t, code, size)) return false;
    decode_limits(t, code, maxcode, offset);
    std::memcpy(values, t.values, 256);
    std::memset(look, 0, sizeof look);
    for (int i = 0; i < t.count; ++i) {
      const int len = size[i];
      if (len > kLook) continue;
      const int rs = t.values[i];
      const int run = ac ? rs >> 4 : 0;
      const int s = ac ? rs & 15 : rs;
      for (int fill = 0; fill < (1 << (kLook - len)); ++fill) {
        const int index = (code[i] << (kLook - len)) | fill;
        std::uint32_t e = static_cast<std::uint32_t>(len);
        if (ac && s == 0) {
          e |= run == 15 ? kZrl : kEob;
        } else if (s == 0) {
          // a DC difference of 0: nothing more
        } else if (len + s <= kLook) {
          const int extra = (index >> (kLook - len - s)) & ((1 << s) - 1);
          const int value = extend(extra, s);
          e = static_cast<std::uint32_t>(len + s) | static_cast<std::uint32_t>(value) << 16;
        } else {
          e |= static_cast<std::uint32_t>(s) << 12;
        }
        look[index] = e | static_cast<std::uint32_t>(run) << 6;
      }
    }
    return true;
  }
};

// The zigzag position of each coefficient to its natural (row-major) position (JPEG Figure A.6).
constexpr std::uint8_t kNatural[64] = {
    0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33, 40, 48,
    41, 34, 27, 20, 13, 6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23,
    30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63};

// The decoder's state, in libjpeg's image pool (freed by jpeg_abort / jpeg_finish_decompress
// without destructors: everything here is trivially destructible).
struct OwnEntropy {
  jpeg_entropy_decoder pub;  // first member: libjpeg hands back cinfo->entropy, cast to this
  JpegErrorManager* err;
  const std::uint8_t* data;  // the rest of the file from the scan's first byte
  std::size_t size;
  JpegBits bits;
  int pred[MAX_COMPS_IN_SCAN];
  unsigned restarts_to_go;
  long long mcus_left;
  int blocks;
  int component[D_MAX_BLOCKS_IN_MCU];  // each block's component in the scan
  bool needed[D_MAX_BLOCKS_IN_MCU];    // whether the output uses its coefficients
  const DecodeTable* dc[D_MAX_BLOCKS_IN_MCU];
  const DecodeTable* ac[D_MAX_BLOCKS_IN_MCU];
  DecodeTable tables[2 * NUM_HUFF_TBLS];
  // A spliced file's first block: its DC table with the appended code (AppendedDcCode), and the
  // table block 0 goes back to after the first MCU (decode_first_mcu).
  DecodeTable first_dc;
  const DecodeTable* later_dc;
  JBLOCK scratch;  // where the blocks of components the output does not use go
};

OwnEntropy& state_of(j_decompress_ptr cinfo) { return *reinterpret_cast<OwnEntropy*>(cinfo->entropy); }

[[noreturn]] void give_up(JpegErrorManager& err) {
  err.own_huffman_gave_up = true;
  gave_up_count.fetch_add(1, std::memory_order_relaxed);
  std::longjmp(err.jump, 1);
}

[[noreturn]] void give_up(j_decompress_ptr cinfo) { give_up(*state_of(cinfo).err); }

// A second scan (a damaged single-scan file): not vouched for.
void start_pass(j_decompress_ptr cinfo) { give_up(cinfo); }

// The most bits one code and its extra bits take: 16 + 15. A sound file's take at most 27 (16 + 11
// for DC), but libjpeg-turbo accepts AC tables whose symbols ask for up to 15 extra bits and decodes
// them, so this decoder must too, without its next lookup reading bits not yet loaded.
constexpr int kCodeBits = 31;
// The fewest bits a refill leaves: a code, its extra bits and the next code's lookup.
constexpr int kRefilled = kCodeBits + kLook;
static_assert(kRefilled <= 56, "a refill of whole bytes leaves at least 56 bits");

struct BitState {
  std::uint64_t buf;
  int n;
  std::size_t pos, ff;
};

// The refill near a 0xFF, out of line. Bits hands it a copy of its state, so no address of Bits'
// own fields is taken and they stay in registers. The bytes before the 0xFF are taken with one
// load when they give kRefilled bits; otherwise JpegBits::refill reads on byte by byte (at least
// 57 bits afterwards), unstuffing 0xFF00 and stopping at a marker.
[[gnu::noinline]] void refill_slow(JpegBits& in, BitState& s) {
  if (s.pos < s.ff && s.pos + 8 <= in.size()) {
    const int take = std::min((63 - s.n) >> 3, static_cast<int>(s.ff - s.pos));
    const int n = s.n + take * 8;
    if (n >= kRefilled) {
      std::uint64_t w;
      std::memcpy(&w, in.data() + s.pos, 8);
      s.buf = (s.buf | (__builtin_bswap64(w) >> s.n)) & ~(~0ull >> n);
      s.n = n;
      s.pos += static_cast<std::size_t>(take);
      return;
    }
  }
  in.set(s.n == 0 ? 0 : s.buf & (~0ull << (64 - s.n)), s.n, s.pos);
  in.refill();
  s = {in.buffer(), in.available(), in.pos(), in.next_ff()};
}

// JpegBits' buffer in registers while an MCU is decoded (HeldBits, jpeg_bits.hpp): a refill
// without a 0xFF in the next eight bytes leaves at least 56 bits, one near a 0xFF at least
// kRefilled (refill_slow): a code and its extra bits, and the next code's lookup.
// A code is looked up before the refill, from the kLook bits at the top, which are there (at least
// kRefilled - kCodeBits after the last code), so the lookup's load does not wait for the refill's;
// the code and its extra bits are taken after it. The constructor's refill (at the scan's start or
// after a restart) leaves kRefilled too.
struct Bits : HeldBits<Bits> {
  explicit Bits(JpegBits& bits) : HeldBits(bits) {
    if (n < kLook) slow();  // the scan's start or a restart; kRefilled to 64 bits afterwards
  }
  void slow() {
    BitState s{buf, n, pos, ff};
    refill_slow(in, s);
    buf = s.buf;
    n = s.n;
    pos = s.pos;
    ff = s.ff;
  }
  std::uint32_t peek() const { return static_cast<std::uint32_t>(buf >> (64 - kLook)); }
  // A lookup entry's bits: the shift takes the entry's low six bits, the count its low five.
  void drop_entry(std::uint32_t e) {
    buf <<= (e & 63);
    n -= static_cast<int>(e & 31);
  }
  // Symbol and length of a code longer than kLook bits; -1 for none.
  int slow_symbol(const DecodeTable& t, int& length) const {
    return long_code(t.maxcode, t.offset, t.values, kLook + 1, static_cast<std::uint32_t>(buf >> 48), length);
  }
};

// One block into `block` (zeroed). False on a code no table has, a predictor past 16 bits or a
// coefficient past the 64th.
[[gnu::always_inline]] inline bool decode_block(Bits& in, const DecodeTable& dc, const DecodeTable& ac, int& pred,
                                                JCOEF* block) {
  const std::uint32_t dc_entry = dc.look[in.peek()];
  in.refill_dc();
  int diff = 0;
  if (const std::uint32_t e = dc_entry; e != 0) {
    in.drop_entry(e);
    const int s = static_cast<int>((e >> 12) & 15);
    diff = s == 0 ? static_cast<std::int32_t>(e) >> 16 : extend(in.take(s), s);
  } else {
    int length = 0;
    const int s = in.slow_symbol(dc, length);
    if (s < 0 || s > 15) return false;
    in.drop(length);
    if (s != 0) diff = extend(in.take(s), s);
  }
  pred += diff;
  // libjpeg keeps the predictor in an int and stores it in a 16-bit coefficient; leave what would
  // not fit to it.
  if (pred < -32768 || pred > 32767) return false;
  block[0] = static_cast<JCOEF>(pred);
  for (int k = 1; k < 64;) {
    const std::uint32_t e = ac.look[in.peek()];
    in.refill();
    if (e != 0) [[likely]] {
      in.drop_entry(e);
      if ((e & (kEob | kZrl)) != 0) {
        if (e & kEob) break;
        k += 16;
        continue;
      }
      k += static_cast<int>((e >> 6) & 15);
      if (k > 63) return false;
      const int s = static_cast<int>((e >> 12) & 15);
      block[kNatural[k]] = static_cast<JCOEF>(s == 0 ? static_cast<std::int32_t>(e) >> 16 : extend(in.take(s), s));
      ++k;
      continue;
    }
    int length = 0;
    const int rs = in.slow_symbol(ac, length);
    if (rs < 0) return false;
    in.drop(length);
    const int run = rs >> 4, s = rs & 15;
    if (s == 0) {
      if (run != 15) break;
      k += 16;
      continue;
    }
    k += run;
    if (k > 63) return false;
    block[kNatural[k]] = static_cast<JCOEF>(extend(in.take(s), s));
    ++k;
  }
  return true;
}

// The source at `at` (an offset in the scan's data), for libjpeg's marker reader.
void place_source(j_decompress_ptr cinfo, const OwnEntropy& e, std::size_t at) {
  cinfo->src->next_input_byte = e.data + at;
  cinfo->src->bytes_in_buffer = e.size - at;
}

// Before the MCU that starts a restart interval: the expected RSTn right after this interval's
// padding, read by libjpeg's marker reader; the bits and the predictors start again.
void restart(j_decompress_ptr cinfo, OwnEntropy& e) {
  const std::size_t at = e.bits.next_whole_byte();
  if (at + 1 >= e.size || e.data[at] != 0xFF || e.data[at + 1] != JPEG_RST0 + cinfo->marker->next_restart_num) {
    give_up(cinfo);
  }
  place_source(cinfo, e, at);
  if (cinfo->unread_marker != 0 || !(*cinfo->marker->read_restart_marker)(cinfo)) give_up(cinfo);
  const std::size_t next = static_cast<std::size_t>(cinfo->src->next_input_byte - e.data);
  new (&e.bits) JpegBits(std::span<const std::uint8_t>(e.data, e.size), next);
  for (int& p : e.pred) p = 0;
  e.restarts_to_go = cinfo->restart_interval;
}

// After the scan's last MCU: a marker must follow the padding; the source is left on it.
void finish_scan(j_decompress_ptr cinfo, OwnEntropy& e) {
  const std::size_t at = e.bits.next_whole_byte();
  if (at + 1 >= e.size || e.data[at] != 0xFF || e.data[at + 1] == 0x00 || e.data[at + 1] == 0xFF) give_up(cinfo);
  place_source(cinfo, e, at);
}

boolean decode_mcu(j_decompress_ptr cinfo, JBLOCKROW* MCU_data) {
  OwnEntropy& e = state_of(cinfo);
  if (cinfo->restart_interval != 0) {
    if (e.restarts_to_go == 0) restart(cinfo, e);
    --e.restarts_to_go;
  }
  Bits in(e.bits);
  for (int b = 0; b < e.blocks; ++b) {
    JCOEF* block = MCU_data != nullptr && e.needed[b] ? MCU_data[b][0] : e.scratch;
    if (!decode_block(in, *e.dc[b], *e.ac[b], e.pred[e.component[b]], block)) give_up(cinfo);
  }
  in.done();
  // Bits past a marker or the data used: libjpeg would warn and make data up.
  if (!e.bits.sound() || e.bits.ran_out()) give_up(cinfo);
  if (--e.mcus_left == 0) finish_scan(cinfo, e);
  return TRUE;
}

// A spliced file's first MCU: block 0 takes its DC code from the table with the appended code;
// every later block, from the table without it (a later use of that code gives up).
boolean decode_first_mcu(j_decompress_ptr cinfo, JBLOCKROW* MCU_data) {
  OwnEntropy& e = state_of(cinfo);
  decode_mcu(cinfo, MCU_data);
  e.dc[0] = e.later_dc;
  e.pub.decode_mcu = decode_mcu;
  return TRUE;
}

// The scan is one this decoder vouches for (jpeg_huffman.hpp), the data all in memory.
bool qualifies(const jpeg_decompress_struct& cinfo, std::span<const std::uint8_t> jpeg) {
  if (cinfo.progressive_mode || cinfo.arith_code || cinfo.data_precision != 8 || cinfo.entropy == nullptr) return false;
  if (cinfo.inputctl == nullptr || cinfo.inputctl->has_multiple_scans || cinfo.comps_in_scan != cinfo.num_components) {
    return false;
  }
  if (cinfo.Ss != 0 || cinfo.Se != DCTSIZE2 - 1 || cinfo.Ah != 0 || cinfo.Al != 0) return false;
  if (cinfo.unread_marker != 0 || cinfo.output_scanline != 0 || cinfo.input_iMCU_row != 0) return false;
  if (cinfo.blocks_in_MCU < 1 || cinfo.blocks_in_MCU > D_MAX_BLOCKS_IN_MCU) return false;
  const jpeg_source_mgr* src = cinfo.src;
  if (src == nullptr || jpeg.size() < 2 || src->next_input_byte < jpeg.data() ||
      src->next_input_byte + src->bytes_in_buffer != jpeg.data() + jpeg.size()) {
    return false;
  }
  // Ending with EOI: the entropy data then ends at a marker, never at the end of the buffer, where
  // libjpeg's memory source would warn as soon as its read-ahead got there.
  return jpeg[jpeg.size() - 2] == 0xFF && jpeg[jpeg.size() - 1] == JPEG_EOI;
}

}  // namespace

bool own_huffman_enabled() { return own_huffman_switch().load(std::memory_order_relaxed); }

void set_own_huffman(bool on) { own_huffman_switch().store(on, std::memory_order_relaxed); }

OwnHuffmanCounts own_huffman_counts() {
  return {installed_count.load(std::memory_order_relaxed), gave_up_count.load(std::memory_order_relaxed)};
}

bool install_own_huffman(jpeg_decompress_struct& cinfo, JpegErrorManager& err, std::span<const std::uint8_t> jpeg,
                         SplicedScan spliced) {
  // Without this decoder a spliced file is not decoded at all (the caller decodes the original).
  const auto refuse = [&] {
    if (spliced.spliced) give_up(err);
    return false;
  };
  const AppendedDcCode appended = spliced.appended;
  if (!own_huffman_enabled() || !qualifies(cinfo, jpeg)) return refuse();
  auto* e = static_cast<OwnEntropy*>(
      (*cinfo.mem->alloc_large)(reinterpret_cast<j_common_ptr>(&cinfo), JPOOL_IMAGE, sizeof(OwnEntropy)));
  bool built_dc[NUM_HUFF_TBLS] = {}, built_ac[NUM_HUFF_TBLS] = {};
  e->blocks = cinfo.blocks_in_MCU;
  for (int b = 0; b < e->blocks; ++b) {
    const int ci = cinfo.MCU_membership[b];
    const jpeg_component_info* comp = cinfo.cur_comp_info[ci];
    const int d = comp->dc_tbl_no, a = comp->ac_tbl_no;
    if (d < 0 || d >= NUM_HUFF_TBLS || a < 0 || a >= NUM_HUFF_TBLS) return refuse();
    const JHUFF_TBL* dt = cinfo.dc_huff_tbl_ptrs[d];
    const JHUFF_TBL* at = cinfo.ac_huff_tbl_ptrs[a];
    if (dt == nullptr || at == nullptr) return refuse();
    const int drop = d == appended.table ? appended.length : 0;
    if (!built_dc[d] && !e->tables[d].build(*dt, false, drop)) return refuse();
    if (!built_ac[a] && !e->tables[NUM_HUFF_TBLS + a].build(*at, true)) return refuse();
    if (b == 0 && appended.any()) {
      if (d != appended.table || !e->first_dc.build(*dt, false)) return refuse();
    }
    built_dc[d] = built_ac[a] = true;
    e->component[b] = ci;
    e->needed[b] = comp->component_needed != FALSE;
    e->dc[b] = &e->tables[d];
    e->ac[b] = &e->tables[NUM_HUFF_TBLS + a];
  }
  e->err = &err;
  e->data = cinfo.src->next_input_byte;
  e->size = cinfo.src->bytes_in_buffer;
  new (&e->bits) JpegBits(std::span<const std::uint8_t>(e->data, e->size), 0);
  for (int& p : e->pred) p = 0;
  e->restarts_to_go = cinfo.restart_interval;
  e->mcus_left = static_cast<long long>(cinfo.MCUs_per_row) * cinfo.MCU_rows_in_scan;
  e->pub.start_pass = start_pass;
  e->pub.decode_mcu = decode_mcu;
  if (appended.any()) {
    e->later_dc = e->dc[0];
    e->dc[0] = &e->first_dc;
    e->pub.decode_mcu = decode_first_mcu;
  }
  e->pub.insufficient_data = FALSE;
  cinfo.entropy = &e->pub;
  installed_count.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace sluice::stages
