// JpegCoefficientPool: libjpeg-turbo's whole-image coefficient arrays (a file in several scans, a
// progressive one above all) served from a buffer a decoder keeps between images, instead of
// libjpeg's per-image malloc, which glibc gives back to the kernel and then faults in again, page
// by page, image after image (docs/performance.md, "Page faults are dear on this guest").
//
// libjpeg-turbo reaches its virtual block arrays only through cinfo->mem's request_virt_barray,
// realize_virt_arrays and access_virt_barray, and ends them with free_pool(JPOOL_IMAGE); install()
// puts this pool's functions in those four places (the others stay libjpeg's). An image's arrays
// come from the buffer only after open(), which reserve() allows, and only while they all fit;
// anything else goes to libjpeg's own functions as before. access_virt_barray does what
// libjpeg-turbo 2.1's jmemmgr.c does for an array held whole in memory (its only case with the
// default memory source): the rows are zeroed on first access where the array asks for it, so the
// coefficients, and the pixels, are the same. The buffer is a mapping of its own, 2 MiB-aligned
// and advised to transparent huge pages (sluice/detail/memory/huge_mapping.hpp), so its first use
// faults whole 2 MiB pages in where it can (where the kernel refuses, 4 KiB pages as before). Internal to src/stages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>  // jpeglib.h needs FILE and size_t declared first

#include <jpeglib.h>

namespace sluice::stages {

class JpegCoefficientPool {
 public:
  JpegCoefficientPool() = default;
  ~JpegCoefficientPool() { release(); }
  JpegCoefficientPool(const JpegCoefficientPool&) = delete;
  JpegCoefficientPool& operator=(const JpegCoefficientPool&) = delete;

  // Takes over cinfo's virtual block arrays (after jpeg_create_decompress; cinfo.client_data
  // points to this pool from then on, and the pool must outlive cinfo's use).
  void install(jpeg_decompress_struct& cinfo);

  // Before an image whose coefficient arrays need `bytes` (JpegHeader::coefficient_bytes): true
  // when the buffer holds them, grown if need be to `bound` bytes (what the decoder's memory
  // reservation covers; untouched pages cost nothing). An image above the bound, or with no
  // arrays, gets false, and a buffer above what the bound allows is freed, so libjpeg's own
  // allocation stays within the reservation. May throw std::bad_alloc: call outside libjpeg.
  bool reserve(std::uint64_t bytes, std::uint64_t bound);
  // Maps the buffer for up to `bound` bytes now and faults its first `most` bytes in
  // (prefault_pages), in set-up rather than at the first image in several scans; nothing where
  // bound is 0. May throw std::bad_alloc.
  void prefault(std::uint64_t bound, std::uint64_t most);
  // The next image's arrays come from the buffer (after a reserve() that said true for it),
  // until its pool ends (jpeg_finish_decompress, jpeg_abort_*: free_pool(JPOOL_IMAGE)).
  void open() { open_ = true; }

  std::uint64_t capacity() const { return capacity_; }
  // Images whose arrays the buffer served, since the pool was made.
  std::uint64_t served() const { return served_; }

  // One virtual block array in the buffer: what jmemmgr.c keeps for one held whole in memory.
  struct Array {
    JBLOCKARRAY rows;  // null until realized
    JBLOCKROW first;
    JDIMENSION rows_in_array, blocks_per_row, max_access, first_undef_row;
    bool pre_zero;
  };

 private:
  static JpegCoefficientPool& of(j_common_ptr cinfo);
  static jvirt_barray_ptr request(j_common_ptr cinfo, int pool_id, boolean pre_zero, JDIMENSION blocks_per_row,
                                  JDIMENSION rows, JDIMENSION max_access);
  static void realize(j_common_ptr cinfo);
  static JBLOCKARRAY access(j_common_ptr cinfo, jvirt_barray_ptr array, JDIMENSION start_row, JDIMENSION rows,
                            boolean writable);
  static void free_pool(j_common_ptr cinfo, int pool_id);
  Array* mine(jvirt_barray_ptr array);

  static constexpr int kMaxArrays = MAX_COMPONENTS;
  jpeg_memory_mgr libjpeg_{};  // libjpeg's functions, for everything this pool does not serve
  void release();

  JBLOCK* buffer_ = nullptr;    // a mapping of capacity_ bytes (jpeg_coefficient_pool.cpp)
  std::uint64_t capacity_ = 0;  // bytes
  std::uint64_t used_ = 0;      // by this image's arrays
  Array arrays_[kMaxArrays] = {};
  int count_ = 0;
  bool open_ = false;
  bool counted_ = false;  // this image is in served_
  std::uint64_t served_ = 0;
};

}  // namespace sluice::stages
