// NUMA helpers: parsing (CPU lists, PCI bus ids as CUDA and sysfs write them), lookups against a
// fake /sys with two nodes and a GPU on node 1, and the guarantee that matters on this one-node
// machine: binding threads and memory is a harmless no-op, and the raw calls behind them work.
#include <gtest/gtest.h>

#include <sched.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "device/numa_detail.hpp"
#include "sluice/detail/device/numa.hpp"
#include "test_support.hpp"

namespace sluice {
namespace {

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

TEST(Numa, ParseCpuList) {
  EXPECT_EQ(parse_cpu_list("0-3,8-11"), (std::vector<int>{0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_EQ(parse_cpu_list("5"), (std::vector<int>{5}));
  EXPECT_EQ(parse_cpu_list("0,2"), (std::vector<int>{0, 2}));
  EXPECT_TRUE(parse_cpu_list("").empty());
  EXPECT_TRUE(parse_cpu_list("3-1").empty());
  EXPECT_TRUE(parse_cpu_list("a").empty());
  EXPECT_TRUE(parse_cpu_list("1,,2").empty());
  EXPECT_TRUE(parse_cpu_list("-1").empty());
}

TEST(Numa, SysfsPciAddressFromCudaBusIds) {
  EXPECT_EQ(sysfs_pci_address("00000000:3B:00.0"), "0000:3b:00.0");  // nvidia-smi style
  EXPECT_EQ(sysfs_pci_address("0000:3B:00.0"), "0000:3b:00.0");      // cudaDeviceGetPCIBusId
  EXPECT_EQ(sysfs_pci_address("0001:af:1f.7"), "0001:af:1f.7");
  EXPECT_EQ(sysfs_pci_address("10000:01:00.0"), "10000:01:00.0");    // VMD domains are wider
  EXPECT_EQ(sysfs_pci_address(""), "");
  EXPECT_EQ(sysfs_pci_address("0000:3b:00"), "");
  EXPECT_EQ(sysfs_pci_address("0000:3b:00.8"), "");
  EXPECT_EQ(sysfs_pci_address("zz:3b:00.0"), "");
  EXPECT_EQ(sysfs_pci_address("0000:3b:00.0/../x"), "");
}

TEST(Numa, LookupsAgainstAFakeTwoNodeSysfs) {
  test::TempDir sys;
  write_file(sys / "devices/system/node/online", "0-1\n");
  write_file(sys / "devices/system/node/node0/cpulist", "0-3,8-11\n");
  write_file(sys / "devices/system/node/node1/cpulist", "4-7,12-15\n");
  write_file(sys / "bus/pci/devices/0000:3b:00.0/numa_node", "1\n");
  write_file(sys / "bus/pci/devices/0000:5e:00.0/numa_node", "-1\n");
  const std::string root = sys.path().string();
  EXPECT_EQ(device_detail::numa_node_count_in(root), 2);
  EXPECT_EQ(device_detail::numa_node_of_pci_in(root, "00000000:3B:00.0"), 1);
  EXPECT_EQ(device_detail::numa_node_of_pci_in(root, "0000:5E:00.0"), -1);  // the kernel does not know
  EXPECT_EQ(device_detail::numa_node_of_pci_in(root, "0000:99:00.0"), -1);  // no such device
  EXPECT_EQ(device_detail::numa_node_cpus_in(root, 1), (std::vector<int>{4, 5, 6, 7, 12, 13, 14, 15}));
  EXPECT_TRUE(device_detail::numa_node_cpus_in(root, 2).empty());
  EXPECT_EQ(device_detail::numa_node_count_in((sys / "missing").string()), 1);  // unreadable: one node
}

TEST(Numa, ThisMachineHasAtLeastOneNodeWithCpus) {
  EXPECT_GE(numa_node_count(), 1);
  EXPECT_FALSE(numa_node_cpus(0).empty());
  EXPECT_EQ(numa_node_of(host()), -1);
  EXPECT_EQ(resolve_numa_node(host(), kNumaNone), kNumaNone);
}

TEST(Numa, BindingIsHarmlessOnOneNode) {
  if (numa_node_count() > 1) GTEST_SKIP() << "a multi-node machine: binding is real here";
  EXPECT_EQ(resolve_numa_node(host(), kNumaAuto), kNumaNone);
  EXPECT_EQ(resolve_numa_node(cuda(0), kNumaAuto), kNumaNone);
  EXPECT_EQ(resolve_numa_node(host(), 0), kNumaNone);
  std::thread([] {
    cpu_set_t before;
    CPU_ZERO(&before);
    ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
    EXPECT_FALSE(bind_current_thread_to_numa_node(0));
    cpu_set_t after;
    CPU_ZERO(&after);
    ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
    EXPECT_TRUE(CPU_EQUAL(&before, &after));
  }).join();
  void* page = mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  EXPECT_FALSE(bind_memory_to_numa_node(page, 1 << 16, 0));
  std::memset(page, 1, 1 << 16);
  munmap(page, 1 << 16);
}

// The syscalls a multi-node machine would make, made here with node 0 (all of this machine):
// restricting a thread to node 0's CPUs keeps it runnable, and mbind either works or is refused
// by a sandbox (EPERM/ENOSYS under a container's seccomp policy), never breaking the memory.
TEST(Numa, RawCallsWorkWithNodeZero) {
  std::thread([] {
    const std::vector<int> cpus = numa_node_cpus(0);
    EXPECT_EQ(device_detail::restrict_thread_to_cpus(cpus), 0);
    EXPECT_EQ(device_detail::restrict_thread_to_cpus({1 << 20}), -1);  // no such CPU: untouched
  }).join();
  void* page = mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  const int status = device_detail::mbind_preferred(page, 1 << 16, 0);
  EXPECT_TRUE(status == 0 || status == EPERM || status == ENOSYS) << std::strerror(status);
  std::memset(page, 1, 1 << 16);
  EXPECT_EQ(static_cast<unsigned char*>(page)[12345], 1);
  munmap(page, 1 << 16);
}

}  // namespace
}  // namespace sluice
