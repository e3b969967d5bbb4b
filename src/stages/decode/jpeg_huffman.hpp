// sluice's baseline Huffman entropy decoder, put in libjpeg-turbo's place (cinfo->entropy) for one
// decode, so libjpeg-turbo still does everything else (markers, IDCT, upsampling, colour, crop,
// skip) and the pixels stay its own: the coefficients written are the ones its decoder writes.
// Faster than libjpeg-turbo 2.1's decoder because one lookup gives a code's length, its run and,
// for a short code and its extra bits, the coefficient's value, and the bit buffer is refilled
// eight bytes at a time (jpeg_bits.hpp). docs/decisions/own-huffman-decoder.md says why and when.
//
// It takes only what it can vouch for: one baseline Huffman scan of 8-bit samples holding every
// component, the whole file in memory and ending with EOI. On anything unusual mid-stream (a
// marker other than the expected RSTn, bits past the data, a code no table has, a coefficient
// index past 63, garbage before the marker that ends the scan, a second scan) it does not guess:
// it sets JpegErrorManager::own_huffman_gave_up and jumps out through the error manager, and the
// caller decodes the image again from the start with libjpeg's decoder, so damaged files give
// exactly what they gave before. Internal to src/stages.
#pragma once

#include <cstdint>
#include <cstdio>  // jpeglib.h needs FILE and size_t declared first
#include <span>

#include <jpeglib.h>

#include "stages/decode/jpeg_resume.hpp"

namespace sluice::stages {

struct JpegErrorManager;  // stages/decode/jpeg_errors.hpp

// Whether decodes use sluice's entropy decoder where it applies: on unless the environment holds
// SLUICE_JPEG_HUFFMAN=libjpeg when the process starts. Tests and benchmarks switch it to compare.
bool own_huffman_enabled();
void set_own_huffman(bool on);

// Decodes this process began with sluice's decoder, and how many of them it gave up: the tests
// hold them to having run.
struct OwnHuffmanCounts {
  std::uint64_t installed = 0;
  std::uint64_t gave_up = 0;
};
OwnHuffmanCounts own_huffman_counts();

// Right after jpeg_start_decompress, before any row is read: puts sluice's decoder in cinfo's
// entropy slot when own_huffman_enabled() and the scan qualifies (see above); `jpeg` is the file
// the memory source reads. Returns whether it did; libjpeg's decoder stays otherwise.
// A spliced file (jpeg_resume.hpp) is decoded by this decoder or not at all: with `spliced` set it
// gives up instead of returning false, and the caller decodes the original file, as it does when
// this decoder gives up on the spliced one. Only so does a spliced file give the original's
// warnings on damaged data: libjpeg-turbo warns of a bad code on its slow path only, and which path
// an MCU takes depends on how many bytes its read-ahead holds, so on all the bits before. A DC
// code appended for the first block is taken there only; where it appears later, this decoder
// gives up, as the original held a code no table has there.
struct SplicedScan {
  bool spliced = false;
  AppendedDcCode appended;
};
bool install_own_huffman(jpeg_decompress_struct& cinfo, JpegErrorManager& err, std::span<const std::uint8_t> jpeg,
                         SplicedScan spliced = {});

}  // namespace sluice::stages
