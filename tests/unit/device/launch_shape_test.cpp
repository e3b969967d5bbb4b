// Kernel launches and empty work, checked on the host: LaunchShape (src/device/launch_shape.hpp)
// sizes every launch of src/device and src/train/cuda and is empty, so launch() launches nothing,
// for zero or negative work (a zero-sized grid is a CUDA launch error: softmax over 0 rows used to
// return one); and no .cu or .cuh file launches a kernel except through launch()
// (src/device/launch.cuh), so no launch can skip that rule. The kernels' behaviour on empty work
// is tests/gpu/empty_work_gpu_test.cpp's.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "device/launch_shape.hpp"

namespace sluice::device_detail {
namespace {

TEST(LaunchShape, GridStrideCoversEveryItemAndIsEmptyWithoutWork) {
  EXPECT_TRUE(LaunchShape::grid_stride(0, 256).empty());
  EXPECT_TRUE(LaunchShape::grid_stride(-5, 256).empty());
  EXPECT_TRUE(LaunchShape::grid_stride(10, 0).empty());
  const LaunchShape one = LaunchShape::grid_stride(1, 256);
  EXPECT_FALSE(one.empty());
  EXPECT_EQ(one.grid_x, 1u);
  EXPECT_EQ(one.threads, 256u);
  EXPECT_EQ(LaunchShape::grid_stride(256, 256).grid_x, 1u);
  EXPECT_EQ(LaunchShape::grid_stride(257, 256).grid_x, 2u);
  // Past the cap the threads stride: the grid stops growing but still covers the work.
  const LaunchShape huge = LaunchShape::grid_stride(std::int64_t{1} << 40, 256);
  EXPECT_EQ(huge.grid_x, static_cast<std::uint32_t>(LaunchShape::kMaxStrideBlocks));
  EXPECT_EQ(huge.grid_y, 1u);
  EXPECT_EQ(huge.grid_z, 1u);
}

TEST(LaunchShape, OneBlockPerUnitIsEmptyWithoutUnits) {
  EXPECT_TRUE(LaunchShape::per_block(0, 512).empty());  // batch norm over zero channels
  EXPECT_TRUE(LaunchShape::per_block(-1, 512).empty());
  EXPECT_EQ(LaunchShape::per_block(64, 512).grid_x, 64u);
  EXPECT_EQ(LaunchShape::per_block(64, 512).threads, 512u);
  // More blocks than gridDim.x allows: refused as empty rather than wrapped to a wrong count.
  EXPECT_TRUE(LaunchShape::per_block(LaunchShape::kMaxGridX + 1, 256).empty());
}

TEST(LaunchShape, GroupedRowsAreEmptyForZeroRows) {
  // The softmax loss and global average pooling: a warp per row, 8 rows a block of 256 threads.
  EXPECT_TRUE(LaunchShape::grouped(0, 8, 256).empty());  // softmax over 0 rows: no launch
  EXPECT_EQ(LaunchShape::grouped(1, 8, 256).grid_x, 1u);
  EXPECT_EQ(LaunchShape::grouped(8, 8, 256).grid_x, 1u);
  EXPECT_EQ(LaunchShape::grouped(9, 8, 256).grid_x, 2u);
  EXPECT_TRUE(LaunchShape::grouped(9, 0, 256).empty());
}

TEST(LaunchShape, AnyZeroDimensionIsEmpty) {
  LaunchShape s = LaunchShape::grid_stride(1000, 256);
  EXPECT_FALSE(s.empty());
  s.grid_y = 0;  // the normalize kernel's images: a batch of 0
  EXPECT_TRUE(s.empty());
  s.grid_y = 3;
  EXPECT_EQ(s.blocks(), 3 * s.grid_x);
  s.threads = 0;
  EXPECT_TRUE(s.empty());
  EXPECT_TRUE(LaunchShape{}.empty());
}

// Every file of the two folders that hold kernels; a `<<<` outside launch.cuh is a launch that
// bypasses the empty-work rule (and the error check after it).
TEST(LaunchShape, EveryKernelLaunchGoesThroughLaunch) {
  const std::filesystem::path root = SLUICE_SOURCE_DIR;
  std::vector<std::string> bypasses;
  int files = 0;
  for (const char* folder : {"src/device", "src/train/cuda"}) {
    for (const auto& entry : std::filesystem::directory_iterator(root / folder)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".cu" && ext != ".cuh" && ext != ".cpp" && ext != ".hpp") continue;
      if (entry.path().filename() == "launch.cuh") continue;
      ++files;
      std::ifstream in(entry.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        const std::size_t comment = line.find("//");
        const std::string code = line.substr(0, comment);
        if (code.find("<<<") != std::string::npos || code.find("cudaLaunchKernel") != std::string::npos) {
          bypasses.push_back(std::string(folder) + "/" + entry.path().filename().string() + ":" + std::to_string(n) +
                             ": " + line);
        }
      }
    }
  }
  EXPECT_GT(files, 10) << "the source folders were not found under " << root;
  std::ostringstream text;
  for (const std::string& b : bypasses) text << "\n  " << b;
  EXPECT_TRUE(bypasses.empty()) << "kernels launched outside device_detail::launch (src/device/launch.cuh):"
                                << text.str();
}

}  // namespace
}  // namespace sluice::device_detail
