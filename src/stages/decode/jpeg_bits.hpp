// The bit reader of a baseline JPEG's entropy-coded data and the pieces of Huffman decoding that
// both of sluice's Huffman decoders use: the resume-point scanner (jpeg_scan.cpp) and the
// entropy decoder that replaces libjpeg-turbo's (jpeg_huffman.cpp).
// - JpegBits: a 64-bit bit buffer refilled eight bytes at a time when none of them is 0xFF (one
//   load, one byte swap), byte by byte with the 0xFF00 unstuffing otherwise; a marker or the end
//   of the data feeds zero bits and counts them (sound() says whether any was consumed). Where
//   the next 0xFF is comes from memchr, once per 0xFF passed, so the eight-byte test is one
//   comparison.
// - HeldBits: JpegBits' buffer held in a decoder's registers while it decodes a row or an MCU,
//   with the eight-byte refill without a count test that both decoders use.
// - long_code(): the canonical (maxcode) search of JPEG Annex F for codes longer than a lookup.
// - extend(): a value's extra bits to its signed value (JPEG F.2.2.1).
// Internal to src/stages.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>

#include "stages/decode/jpeg_resume.hpp"

namespace sluice::stages {

class JpegBits {
 public:
  JpegBits(std::span<const std::uint8_t> data, std::size_t at) : data_(data.data()), size_(data.size()), pos_(at) {
    find_ff();
  }

  // At least 57 bits in the buffer afterwards.
  void refill() {
    if (pos_ + 8 <= ff_) {  // eight bytes, none of them 0xFF (so no marker and not stopped)
      std::uint64_t w;
      std::memcpy(&w, data_ + pos_, 8);
      w = __builtin_bswap64(w);
      const int take = (63 - nbits_) >> 3;
      nbits_ += take * 8;
      buf_ = (buf_ | (w >> (nbits_ - take * 8))) & (~0ull << (64 - nbits_));
      pos_ += static_cast<std::size_t>(take);
      return;
    }
    refill_bytes();
    if (pos_ > ff_) find_ff();
  }
  void ensure32() {
    if (nbits_ < 32) refill();
  }
  std::uint64_t buffer() const { return buf_; }
  int available() const { return nbits_; }  // bits in the buffer, zero bits fed past the data included
  // For a decoder that keeps the buffer in its own registers: hands it back (buffer(), shifted by
  // what it consumed, and available() less that).
  void set(std::uint64_t buf, int nbits) {
    buf_ = buf;
    nbits_ = nbits;
  }
  // For a decoder that also refills in its own registers: the data, the offset of the next byte
  // to load and that of the next 0xFF at or after it (the data's size when none), so eight bytes
  // load at pos() while pos() + 8 <= next_ff(); set() hands back all three (the buffer's bits
  // below `nbits` zero, at most 64 bits).
  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::size_t pos() const { return pos_; }
  std::size_t next_ff() const { return ff_; }
  void set(std::uint64_t buf, int nbits, std::size_t pos) {
    set(buf, nbits);
    pos_ = pos;
  }
  void drop(int n) {
    buf_ <<= n;
    nbits_ -= n;
  }
  int bits(int n) {  // n in 1..16
    const int v = static_cast<int>(buf_ >> (64 - n));
    drop(n);
    return v;
  }
  // True while every bit consumed was in the data.
  bool sound() const { return nbits_ >= padding_; }
  // The next unread bit: its byte's offset in the file and how many bits of that byte come
  // before it. Only where sound(): the unread data bits are the last ones loaded, so the byte is
  // found walking back over whole loaded bytes (a 0x00 after 0xFF was stuffing, part of it).
  ResumePoint position() const {
    const int unread = nbits_ - padding_;
    const int q = (unread + 7) / 8;
    std::size_t p = pos_;
    for (int i = 0; i < q; ++i) p -= p >= 2 && data_[p - 1] == 0x00 && data_[p - 2] == 0xFF ? 2 : 1;
    ResumePoint r;
    r.byte = static_cast<std::uint32_t>(p);
    r.bit = static_cast<std::uint8_t>(q * 8 - unread);
    return r;
  }

  // True once a refill reached the end of the data with no marker before it.
  bool ran_out() const { return ran_out_; }
  // Where sound(): the first byte after the one holding the next unread bit, or that byte itself
  // when the bit starts it (the unread bits of a partly read byte are the scan's padding).
  std::size_t next_whole_byte() const {
    const ResumePoint r = position();
    if (r.bit == 0) return r.byte;
    return r.byte + (data_[r.byte] == 0xFF ? 2 : 1);
  }

 private:
  void find_ff() {
    const void* ff = pos_ < size_ ? std::memchr(data_ + pos_, 0xFF, size_ - pos_) : nullptr;
    ff_ = ff != nullptr ? static_cast<std::size_t>(static_cast<const std::uint8_t*>(ff) - data_) : size_;
  }
  [[gnu::noinline]] void refill_bytes() {
    while (nbits_ <= 56) {
      std::uint8_t b = 0;
      if (pos_ < size_ && !stopped_) {
        b = data_[pos_];
        if (b != 0xFF) {
          ++pos_;
        } else if (pos_ + 1 < size_ && data_[pos_ + 1] == 0x00) {
          pos_ += 2;
        } else {
          stopped_ = true;  // a marker: the entropy data ends here
          b = 0;
          padding_ += 8;
        }
      } else {
        padding_ += 8;
        ran_out_ |= !stopped_;
      }
      buf_ |= static_cast<std::uint64_t>(b) << (56 - nbits_);
      nbits_ += 8;
    }
  }

  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_;
  std::size_t ff_ = 0;  // the first 0xFF at or after pos_ (size_ when none), while pos_ <= ff_
  std::uint64_t buf_ = 0;
  int nbits_ = 0;
  int padding_ = 0;
  bool stopped_ = false;
  bool ran_out_ = false;
};

// JpegBits' buffer in registers while a decoder decodes a row (the scanner) or an MCU (the entropy
// decoder), refilled before every code with no test of how many bits it holds: while the next
// eight bytes hold no 0xFF (one comparison with JpegBits::next_ff) one load puts them under the
// buffer's bits and the bytes wholly taken are consumed, which leaves at least 56 bits. The bits
// below `n` are then the data's next bits, not zeros (a later load ORs the same bits over them);
// done() clears them when the buffer goes back to JpegBits. Every refill but the first of a block
// follows a code (at least one bit), so `n` is at most 63 there; refill_dc() checks for the first.
// Near a 0xFF or a marker the refill is Decoder::slow(), the decoder's own (CRTP: Decoder derives
// from HeldBits<Decoder>), which may hand the buffer to JpegBits (done()), refill it there and
// take it back (load()).
template <class Decoder>
struct HeldBits {
  JpegBits& in;
  const std::uint8_t* data;
  std::uint64_t buf;
  int n;
  std::size_t pos, ff;

  explicit HeldBits(JpegBits& bits)
      : in(bits), data(bits.data()), buf(bits.buffer()), n(bits.available()), pos(bits.pos()), ff(bits.next_ff()) {}
  void refill() {
    if (pos + 8 <= ff) [[likely]] {
      std::uint64_t w;
      std::memcpy(&w, data + pos, 8);
      buf |= __builtin_bswap64(w) >> n;
      pos += static_cast<std::size_t>((63 - n) >> 3);
      n |= 56;
      return;
    }
    static_cast<Decoder*>(this)->slow();
  }
  // Before a block's DC code, where `n` may be 64 (at a row's start, after a full refill).
  void refill_dc() {
    if (n < 64) refill();
  }
  std::uint64_t buffer() const { return buf; }
  void drop(int k) {
    buf <<= k;
    n -= k;
  }
  int take(int k) {  // k in 1..16
    const int v = static_cast<int>(buf >> (64 - k));
    drop(k);
    return v;
  }
  void done() { in.set(n == 0 ? 0 : buf & (~0ull << (64 - n)), n, pos); }
  void load() {
    buf = in.buffer();
    n = in.available();
    pos = in.pos();
    ff = in.next_ff();
  }
};

// Branchless: below half the range (the top extra bit 0), the value is v - (2^s - 1).
inline int extend(int v, int s) { return v + (((v - (1 << (s - 1))) >> 31) & (1 - (1 << s))); }

// The symbol of a code of `first` to 16 bits from the next 16 bits (peek16), with its length; -1
// when no code matches. maxcode and offset as decode_limits() makes them.
inline int long_code(const std::int32_t (&maxcode)[18], const std::int32_t (&offset)[18], const std::uint8_t* values,
                     int first, std::uint32_t peek16, int& length) {
  for (int len = first; len <= 16; ++len) {
    const auto c = static_cast<std::int32_t>(peek16 >> (16 - len));
    if (c <= maxcode[len]) {
      length = len;
      return values[c + offset[len]];
    }
  }
  return -1;
}

}  // namespace sluice::stages
