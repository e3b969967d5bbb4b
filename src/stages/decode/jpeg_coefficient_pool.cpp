// JpegCoefficientPool (jpeg_coefficient_pool.hpp): the virtual block arrays of libjpeg-turbo 2.1's
// memory manager (jmemmgr.c), for arrays held whole in memory, in a buffer that outlives images.
#include "stages/decode/jpeg_coefficient_pool.hpp"

#include <algorithm>
#include <cstring>
#include <functional>

#include <jerror.h>

#include "sluice/detail/memory/huge_mapping.hpp"

namespace sluice::stages {
namespace {

constexpr std::uint64_t kPage = 4096;

}  // namespace

void JpegCoefficientPool::release() {
  if (buffer_ != nullptr) unmap_huge_aligned(reinterpret_cast<std::uint8_t*>(buffer_), capacity_);
  buffer_ = nullptr;
  capacity_ = 0;
}

void JpegCoefficientPool::install(jpeg_decompress_struct& cinfo) {
  libjpeg_ = *cinfo.mem;
  cinfo.mem->request_virt_barray = request;
  cinfo.mem->realize_virt_arrays = realize;
  cinfo.mem->access_virt_barray = access;
  cinfo.mem->free_pool = free_pool;
  cinfo.client_data = this;
}

bool JpegCoefficientPool::reserve(std::uint64_t bytes, std::uint64_t bound) {
  open_ = false;
  if (bytes == 0) return false;
  if (bytes > bound) {
    release();  // libjpeg's own allocation takes this image's whole share: the buffer gives its memory back
    return false;
  }
  if (capacity_ < bytes) {
    release();
    const std::uint64_t mapped = std::max(bytes + kPage - 1, bound) / kPage * kPage;
    buffer_ = reinterpret_cast<JBLOCK*>(map_huge_aligned(mapped));  // not touched here: pages fault in as images use them
    capacity_ = mapped;
  }
  return true;
}

void JpegCoefficientPool::prefault(std::uint64_t bound, std::uint64_t most) {
  if (!reserve(bound, bound)) return;
  prefault_pages(reinterpret_cast<std::uint8_t*>(buffer_), std::min(capacity_, most));
}

JpegCoefficientPool& JpegCoefficientPool::of(j_common_ptr cinfo) {
  return *static_cast<JpegCoefficientPool*>(cinfo->client_data);
}

JpegCoefficientPool::Array* JpegCoefficientPool::mine(jvirt_barray_ptr array) {
  auto* a = reinterpret_cast<Array*>(array);
  const std::less<const Array*> before;
  return !before(a, arrays_) && before(a, arrays_ + count_) ? a : nullptr;
}

jvirt_barray_ptr JpegCoefficientPool::request(j_common_ptr cinfo, int pool_id, boolean pre_zero,
                                              JDIMENSION blocks_per_row, JDIMENSION rows, JDIMENSION max_access) {
  JpegCoefficientPool& p = of(cinfo);
  const std::uint64_t bytes = std::uint64_t{blocks_per_row} * rows * sizeof(JBLOCK);
  if (!p.open_ || pool_id != JPOOL_IMAGE || p.count_ == kMaxArrays || bytes == 0 || bytes > p.capacity_ - p.used_) {
    return (*p.libjpeg_.request_virt_barray)(cinfo, pool_id, pre_zero, blocks_per_row, rows, max_access);
  }
  Array& a = p.arrays_[p.count_++];
  a = Array{nullptr, p.buffer_ + p.used_ / sizeof(JBLOCK), rows, blocks_per_row, max_access, 0, pre_zero != FALSE};
  p.used_ += bytes;
  return reinterpret_cast<jvirt_barray_ptr>(&a);
}

void JpegCoefficientPool::realize(j_common_ptr cinfo) {
  JpegCoefficientPool& p = of(cinfo);
  bool any = false;
  for (int i = 0; i < p.count_; ++i) {
    Array& a = p.arrays_[i];
    if (a.rows != nullptr) continue;
    // The row pointers in libjpeg's image pool, as jmemmgr.c keeps its own.
    a.rows = static_cast<JBLOCKARRAY>((*p.libjpeg_.alloc_small)(cinfo, JPOOL_IMAGE, a.rows_in_array * sizeof(JBLOCKROW)));
    for (JDIMENSION r = 0; r < a.rows_in_array; ++r) a.rows[r] = a.first + std::size_t{r} * a.blocks_per_row;
    a.first_undef_row = 0;
    any = true;
  }
  if (any && !p.counted_) {
    p.counted_ = true;
    ++p.served_;
  }
  (*p.libjpeg_.realize_virt_arrays)(cinfo);
}

// jmemmgr.c's access_virt_barray for an array held whole in memory: the rows from the first not
// yet written to the last asked for are zeroed first where the array is pre-zeroed (a reader may
// look ahead of the writer; a writer may not skip rows).
JBLOCKARRAY JpegCoefficientPool::access(j_common_ptr cinfo, jvirt_barray_ptr array, JDIMENSION start_row,
                                        JDIMENSION rows, boolean writable) {
  JpegCoefficientPool& p = of(cinfo);
  Array* a = p.mine(array);
  if (a == nullptr) return (*p.libjpeg_.access_virt_barray)(cinfo, array, start_row, rows, writable);
  JDIMENSION end_row = start_row + rows;
  if (end_row > a->rows_in_array || rows > a->max_access || a->rows == nullptr) ERREXIT(cinfo, JERR_BAD_VIRTUAL_ACCESS);
  if (a->first_undef_row < end_row) {
    JDIMENSION undef_row = a->first_undef_row;
    if (undef_row < start_row) {
      if (writable != FALSE) ERREXIT(cinfo, JERR_BAD_VIRTUAL_ACCESS);
      undef_row = start_row;
    }
    if (writable != FALSE) a->first_undef_row = end_row;
    if (a->pre_zero) {
      std::memset(a->rows[undef_row], 0, std::size_t{end_row - undef_row} * a->blocks_per_row * sizeof(JBLOCK));
    } else if (writable == FALSE) {
      ERREXIT(cinfo, JERR_BAD_VIRTUAL_ACCESS);
    }
  }
  return a->rows + start_row;
}

void JpegCoefficientPool::free_pool(j_common_ptr cinfo, int pool_id) {
  JpegCoefficientPool& p = of(cinfo);
  if (pool_id == JPOOL_IMAGE) {
    p.count_ = 0;
    p.used_ = 0;
    p.open_ = false;
    p.counted_ = false;
  }
  (*p.libjpeg_.free_pool)(cinfo, pool_id);
}

}  // namespace sluice::stages
