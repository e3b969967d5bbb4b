// Resume points of a baseline JPEG's entropy-coded scan, one per MCU row, and the splice that
// turns them into a shorter JPEG starting at a recorded row, so libjpeg-turbo decodes from there
// instead of Huffman-decoding every row above a crop (docs/performance.md, "skipping the rows
// above a crop"). Own Huffman code: libjpeg-turbo's decoder state is private.
//
// scan_resume_points() decodes the scan's MCU rows from the top and records, at each row's
// start, the entropy byte and bit where it begins and each component's DC predictor.
// splice_at() writes a header whose frame height is the rows below that point, then the row's
// first MCU re-encoded with its DC values against zero predictors, sized so that the original
// bits that follow it fall on a byte boundary; the caller's decode then reads the original bytes
// from tail_offset on, unchanged, and nothing is shifted. The size is set by the length of the
// code of the first DC value: the header gets one more code in that DC table, appended after the
// table's longest codes (so no existing code changes) at the length that makes the MCU end on
// the right bit; where no length does, zero-run codes (ZRL) before blocks' end-of-block codes
// pad it, over as many MCUs as it takes. The coefficients, so the pixels,
// are the original's. Only single-scan baseline files (SOF0/SOF1, Huffman, 8-bit) without
// restart markers qualify; everything else, and any data these routines do not understand,
// returns false and keeps libjpeg's skip. Internal to src/stages.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace sluice::stages {

struct ResumePoint {
  std::uint32_t byte = 0;  // file offset of the byte holding the row's first bit
  std::uint8_t bit = 0;    // bits of that byte that belong to the row above (0-7)
  std::int16_t dc[3] = {0, 0, 0};  // DC predictor of each component at the row's start
};

// What the markers say, as far as the scanner and splicer need it.
struct ScanLayout {
  struct Huffman {
    bool defined = false;
    std::uint8_t bits[17] = {};   // bits[l]: codes of length l
    std::uint8_t values[256] = {};
    int count = 0;
  };
  int width = 0;
  int height = 0;
  int components = 0;
  int mcu_width = 8;   // pixels
  int mcu_height = 8;
  int mcus_per_row = 0;
  int mcu_rows = 0;
  int blocks = 0;                   // per MCU
  std::uint8_t block_component[10] = {};
  int dc_table[3] = {};
  int ac_table[3] = {};
  std::uint32_t height_offset = 0;  // the frame header's height field
  std::uint32_t sos_offset = 0;     // the start-of-scan marker
  std::uint32_t scan_offset = 0;    // first entropy-coded byte
  Huffman dc[4];
  Huffman ac[4];
};

// Parses the markers up to the scan. False for anything but one interleaved baseline scan of
// 1 or 3 components without restart intervals (and for damaged markers).
bool parse_scan_layout(std::span<const std::uint8_t> jpeg, ScanLayout& layout);

// Extends `points`, the starts of MCU rows [0, points.size()) found before (or none), to rows
// [0, rows] (rows < mcu_rows), Huffman-decoding the rows in between. Returns points.size():
// fewer than rows + 1 where the data is damaged or ends there.
int scan_resume_points(std::span<const std::uint8_t> jpeg, const ScanLayout& layout, int rows,
                       std::vector<ResumePoint>& points);

// Canonical Huffman codes of a table, in the order of its values (JPEG Annex C); false for a
// table with more codes at some length than that length allows.
bool make_codes(const ScanLayout::Huffman& t, std::uint16_t* code, std::uint8_t* size);

// A decoder's limits for codes longer than its lookup table (JPEG Annex F.2.2.3) from the
// table's canonical codes: maxcode[len] the largest code of that length (-1: none; maxcode[17]
// a sentinel), offset[len] what turns a code of that length into its value's index.
void decode_limits(const ScanLayout::Huffman& t, const std::uint16_t* code, std::int32_t (&maxcode)[18],
                   std::int32_t (&offset)[18]);

// The code splice_at added to a DC table for the spliced file's first block (43% of splices on
// imagenet-photos need one). The original file has no such code: there the same bits are a code
// no table has, which libjpeg-turbo decodes as a difference of 0 after 17 bits (a warning only on
// its slow path). So in damaged data below the splice the two files would decode apart; sluice's
// entropy decoder takes the code in the first block alone (install_own_huffman, jpeg_huffman.hpp).
struct AppendedDcCode {
  int table = -1;  // the DC table's slot; -1: no code appended
  int length = 0;  // its length in bits: the table's last (longest) code
  bool any() const { return table >= 0; }
};

struct Splice {
  std::vector<std::uint8_t> head;  // markers with the reduced height, then the re-encoded first MCU
  std::uint32_t tail_offset = 0;   // the spliced file is head + jpeg[tail_offset, end)
  int first_row = 0;               // pixel row of the original where the spliced image starts
  AppendedDcCode appended;         // the DC code added for the first block, if one was
};

// The splice at MCU row `row` (0 < row < mcu_rows) from its resume point. False where the row's
// first MCU cannot be re-encoded (a DC category or the ZRL code missing from an optimised table,
// no room for the padding, damaged data): try another row or keep the skip.
bool splice_at(std::span<const std::uint8_t> jpeg, const ScanLayout& layout, int row, const ResumePoint& point,
               Splice& out);

}  // namespace sluice::stages
