// map_huge_aligned (sluice/detail/memory/huge_mapping.hpp): 2 MiB-aligned and, where the kernel
// allows transparent huge pages, faulted in as 2 MiB pages; unmapping gives back all it mapped;
// prefault_pages faults a buffer's whole pages in ahead of use.
#include "sluice/detail/memory/huge_mapping.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "resident_pages.hpp"

namespace sluice {
namespace {

constexpr std::uint64_t kHugePage = std::uint64_t{2} << 20;

// The kB of AnonHugePages in the mapping of /proc/self/smaps that starts at `data`, or -1.
long anon_huge_kb(const std::uint8_t* data) {
  std::ifstream smaps("/proc/self/smaps");
  char start[32];
  std::snprintf(start, sizeof start, "%lx-", static_cast<unsigned long>(reinterpret_cast<std::uintptr_t>(data)));
  std::string line;
  bool in = false;
  while (std::getline(smaps, line)) {
    if (line.find('-') != std::string::npos && line.find(':') == std::string::npos) in = false;
    if (line.rfind(start, 0) == 0) in = true;
    if (in && line.rfind("AnonHugePages:", 0) == 0) return std::stol(line.substr(14));
  }
  return -1;
}

std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s;
  std::getline(f, s);
  return s;
}

TEST(HugeMapping, IsZeroAlignedTo2MiBAndFaultedInAsHugePages) {
  const std::uint64_t size = 8 * kHugePage / 2 + 1000;  // 8 MiB and a part of a page
  std::uint8_t* data = map_huge_aligned(size);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(data) % kHugePage, 0u);
  EXPECT_EQ(data[0], 0);
  EXPECT_EQ(data[size - 1], 0);
  std::memset(data, 1, size);  // the owner's first writes
  const long huge_kb = anon_huge_kb(data);
  const std::string mode = thp_mode();
  unmap_huge_aligned(data, size);
  if (mode.empty() || mode.find("[never]") != std::string::npos) {
    GTEST_SKIP() << "transparent huge pages are off here ('" << mode << "'): the buffer has 4 KiB pages";
  }
  // Four whole 2 MiB pages fit; at least one must be huge (a fragmented machine may lack the rest).
  EXPECT_GE(huge_kb, 2048) << "THP '" << mode << "'";
}

// prefault_pages faults a buffer in ahead of its first use (in set-up, not in the first epoch):
// a fresh mapping has no page in memory, and after the call every whole one is, the part of a
// page past the buffer's end left alone; a buffer that does not start on a page leaves its first
// partial page (a neighbour's) alone too.
TEST(HugeMapping, PrefaultPagesLeavesEveryWholePageOfTheBufferResident) {
  const std::uint64_t size = 6 * kHugePage / 2 + 5000;  // 6 MiB, a page and a part of one
  std::uint8_t* data = map_huge_aligned(size);
  EXPECT_EQ(test::nonresident_pages(data, size), test::whole_pages(data, size)) << "a fresh mapping";
  prefault_pages(data, size);
  EXPECT_EQ(test::nonresident_pages(data, size), 0) << "of " << test::whole_pages(data, size);
  EXPECT_EQ(data[0], 0);  // zero, as mapped
  EXPECT_EQ(data[size - 1], 0);
  unmap_huge_aligned(data, size);

  std::uint8_t* other = map_huge_aligned(4 * 4096);
  prefault_pages(other + 100, 2 * 4096);  // pages 1 (whole) and parts of 0 and 2
  std::vector<unsigned char> resident(4);
  ASSERT_EQ(::mincore(other, 4 * 4096, resident.data()), 0);
  EXPECT_EQ(resident[1] & 1, 1);
  EXPECT_EQ(resident[3] & 1, 0);
  prefault_pages(nullptr, 0);  // nothing to do
  prefault_pages(other + 10, 100);  // no whole page inside: nothing
  unmap_huge_aligned(other, 4 * 4096);
}

TEST(HugeMapping, UnmappingGivesBackTheWholeMappingHeadAndTailIncluded) {
  // Each map takes one huge page more than the buffer and gives back what lies outside it: a
  // thousand 1 MiB buffers mapped and unmapped leave the address space as it was (leaking the
  // heads or tails would leave up to 2 GB of it mapped).
  auto vm_size_kb = [] {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("VmSize:", 0) == 0) return std::stol(line.substr(7));
    }
    return -1L;
  };
  const long before = vm_size_kb();
  ASSERT_GT(before, 0);
  for (int i = 0; i < 1000; ++i) {
    std::uint8_t* data = map_huge_aligned(kHugePage / 2);
    data[0] = 1;
    unmap_huge_aligned(data, kHugePage / 2);
  }
  // Under 512 MiB: a thread of the process may reserve a malloc arena (128 MiB) meanwhile.
  EXPECT_LT(vm_size_kb() - before, 512 * 1024);
}

}  // namespace
}  // namespace sluice
