// AlignedBuffer's large buffers (sluice/detail/memory/aligned_buffer.hpp): from 2 MiB on they start
// on a 2 MiB boundary with their whole 2 MiB pages advised to transparent huge pages, so a worker's
// read and splice buffers fault 2 MiB pages in on a data set's largest files, not 4 KiB ones.
#include "sluice/detail/memory/aligned_buffer.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

namespace sluice {
namespace {

constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20;

// The VmFlags line of the mapping in /proc/self/smaps that holds `p`, or "" when none does.
std::string vm_flags(const std::uint8_t* p) {
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in = false;
  while (std::getline(smaps, line)) {
    unsigned long begin = 0, end = 0;
    char dash = 0;
    // A mapping's first line ("begin-end perms ..."); the lines under it are "Name: value".
    if (std::sscanf(line.c_str(), "%lx%c%lx ", &begin, &dash, &end) == 3 && dash == '-') {
      in = at >= begin && at < end;
    }
    if (in && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

TEST(AlignedBufferHuge, LargeBuffersStartOn2MiBAndAreAdvisedToHugePages) {
  AlignedBuffer buffer(3 * kHugePage);  // 6 MiB, rounded to 8 MiB
  ASSERT_EQ(buffer.capacity(), 4 * kHugePage);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buffer.data()) % kHugePage, 0u);
  std::memset(buffer.data(), 7, buffer.capacity());  // the whole capacity is ours to write
  EXPECT_EQ(buffer.data()[buffer.capacity() - 1], 7);
  // "hg": the range was advised MADV_HUGEPAGE, its last whole 2 MiB page included.
  EXPECT_NE(vm_flags(buffer.data()).find(" hg"), std::string::npos) << vm_flags(buffer.data());
  EXPECT_NE(vm_flags(buffer.data() + buffer.capacity() - 1).find(" hg"), std::string::npos);
}

TEST(AlignedBufferHuge, GrowingAndMovingKeepTheAlignmentAndFreeTheOldBuffer) {
  AlignedBuffer buffer(4096);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buffer.data()) % AlignedBuffer::kAlignment, 0u);
  // A thousand growths and frees of a huge buffer: operator delete must get what operator new
  // gave (not the aligned pointer), or the allocator aborts or leaks 8 GB of address space.
  for (int i = 0; i < 1000; ++i) {
    AlignedBuffer big;
    big.reserve(kHugePage);
    big.reserve(2 * kHugePage + 1);
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(big.data()) % kHugePage, 0u);
    big.data()[0] = 1;
    AlignedBuffer moved(std::move(big));
    EXPECT_EQ(moved.data()[0], 1);
    moved.swap(buffer);
    buffer.reset();
  }
  EXPECT_EQ(buffer.capacity(), 0u);
}

}  // namespace
}  // namespace sluice
