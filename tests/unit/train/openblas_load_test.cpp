// OpenBLAS is dlopen()ed when the first CPU backend is made, not linked into libsluice: a process
// that uses sluice only as a data loader never maps it, nor starts its spinning thread pool
// (src/train/cpu/openblas_api.hpp). Its own executable, so no other test has made a backend.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "train/cpu/cpu_backend.hpp"
#include "train/cpu/cpu_util.hpp"

namespace sluice::train {
namespace {

bool mapped(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find(library) != std::string::npos) return true;
  }
  return false;
}

TEST(CpuBackendBlas, OpenblasIsMappedOnlyOnceACpuBackendIsMade) {
  ASSERT_TRUE(mapped("libsluice")) << "the test must run against libsluice";
  EXPECT_FALSE(mapped("libopenblas")) << "OpenBLAS mapped before any CPU backend was made";

  cpu::CpuBackend backend(1);
  EXPECT_TRUE(mapped("libopenblas"));
  EXPECT_NE(backend.describe().find("OpenBLAS"), std::string::npos) << backend.describe();

  // The GEMM goes through the loaded table: [1 2; 3 4] x [5 6; 7 8] = [19 22; 43 50].
  const float a[] = {1, 2, 3, 4};
  const float b[] = {5, 6, 7, 8};
  float c[] = {-1, -1, -1, -1};
  cpu::gemm(false, false, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  EXPECT_FLOAT_EQ(c[0], 19.0f);
  EXPECT_FLOAT_EQ(c[1], 22.0f);
  EXPECT_FLOAT_EQ(c[2], 43.0f);
  EXPECT_FLOAT_EQ(c[3], 50.0f);
}

}  // namespace
}  // namespace sluice::train
