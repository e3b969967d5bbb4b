// NUMA placement from /sys and raw syscalls (libnuma is not a dependency): which node a GPU is
// on, which CPUs a node has, and binding threads (sched_setaffinity) and pages (mbind) to it.
// On a single-node machine the public functions change nothing.
#include "sluice/detail/device/numa.hpp"

#include <linux/mempolicy.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "device/numa_detail.hpp"

namespace sluice {
namespace device_detail {
namespace {

constexpr const char* kSys = "/sys";

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return {};
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

bool parse_hex(std::string_view text, unsigned long& value) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  return ec == std::errc{} && end == text.data() + text.size();
}

}  // namespace

int numa_node_count_in(const std::string& sys_root) {
  const std::vector<int> nodes = parse_cpu_list(read_first_line(sys_root + "/devices/system/node/online"));
  return nodes.empty() ? 1 : static_cast<int>(nodes.size());
}

int numa_node_of_pci_in(const std::string& sys_root, std::string_view bus_id) {
  const std::string address = sysfs_pci_address(bus_id);
  if (address.empty()) return -1;
  const std::string text = read_first_line(sys_root + "/bus/pci/devices/" + address + "/numa_node");
  int node = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), node);
  if (ec != std::errc{} || end != text.data() + text.size() || node < 0) return -1;
  return node;
}

std::vector<int> numa_node_cpus_in(const std::string& sys_root, int node) {
  if (node < 0) return {};
  return parse_cpu_list(read_first_line(sys_root + "/devices/system/node/node" + std::to_string(node) + "/cpulist"));
}

int mbind_preferred(void* addr, std::size_t bytes, int node) {
  if (node < 0) return EINVAL;
  constexpr int kBits = 8 * sizeof(unsigned long);
  std::vector<unsigned long> mask(static_cast<std::size_t>(node / kBits + 1), 0ul);
  mask[static_cast<std::size_t>(node / kBits)] = 1ul << (node % kBits);
  // maxnode is one more than the bits the kernel reads (its long-standing off-by-one).
  const unsigned long maxnode = mask.size() * kBits + 1;
  if (syscall(SYS_mbind, addr, bytes, MPOL_PREFERRED, mask.data(), maxnode, 0u) != 0) return errno;
  return 0;
}

int restrict_thread_to_cpus(const std::vector<int>& cpus) {
  cpu_set_t current;
  CPU_ZERO(&current);
  if (sched_getaffinity(0, sizeof current, &current) != 0) return errno;
  cpu_set_t wanted;
  CPU_ZERO(&wanted);
  int count = 0;
  for (int cpu : cpus) {
    if (cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &current)) {
      CPU_SET(cpu, &wanted);
      ++count;
    }
  }
  if (count == 0) return -1;
  if (sched_setaffinity(0, sizeof wanted, &wanted) != 0) return errno;
  return 0;
}

}  // namespace device_detail

int numa_node_count() { return device_detail::numa_node_count_in(device_detail::kSys); }

std::string sysfs_pci_address(std::string_view bus_id) {
  // domain:bus:device.function, all hexadecimal.
  const std::size_t c1 = bus_id.find(':');
  const std::size_t c2 = c1 == std::string_view::npos ? c1 : bus_id.find(':', c1 + 1);
  const std::size_t dot = c2 == std::string_view::npos ? c2 : bus_id.find('.', c2 + 1);
  if (dot == std::string_view::npos) return {};
  unsigned long domain = 0, bus = 0, device = 0, function = 0;
  if (!device_detail::parse_hex(bus_id.substr(0, c1), domain) ||
      !device_detail::parse_hex(bus_id.substr(c1 + 1, c2 - c1 - 1), bus) ||
      !device_detail::parse_hex(bus_id.substr(c2 + 1, dot - c2 - 1), device) ||
      !device_detail::parse_hex(bus_id.substr(dot + 1), function) || bus > 0xff || device > 0x1f ||
      function > 7) {
    return {};
  }
  char text[32];
  std::snprintf(text, sizeof text, "%04lx:%02lx:%02lx.%lx", domain, bus, device, function);
  return text;
}

int numa_node_of_pci(std::string_view bus_id) { return device_detail::numa_node_of_pci_in(device_detail::kSys, bus_id); }

int numa_node_of(DeviceId device) noexcept {
  if (device.is_host() || device.index < 0 || device.index >= cuda_device_count()) return -1;
  try {
    return describe(device).numa_node;
  } catch (...) {
    return -1;
  }
}

int resolve_numa_node(DeviceId device, int requested) {
  if (requested == kNumaNone || numa_node_count() < 2) return kNumaNone;
  if (requested == kNumaAuto) return numa_node_of(device);
  if (requested < 0) return kNumaNone;
  std::error_code ec;
  const bool exists = std::filesystem::exists(
      std::string(device_detail::kSys) + "/devices/system/node/node" + std::to_string(requested), ec);
  return exists ? requested : kNumaNone;
}

std::vector<int> parse_cpu_list(std::string_view text) {
  std::vector<int> cpus;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view part = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    const std::size_t dash = part.find('-');
    int first = 0;
    int last = 0;
    const auto parse = [](std::string_view s, int& v) {
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      return ec == std::errc{} && end == s.data() + s.size() && v >= 0;
    };
    if (!parse(part.substr(0, dash), first)) return {};
    last = first;
    if (dash != std::string_view::npos && !parse(part.substr(dash + 1), last)) return {};
    if (last < first || last - first > 1 << 16) return {};
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
  }
  return cpus;
}

std::vector<int> numa_node_cpus(int node) { return device_detail::numa_node_cpus_in(device_detail::kSys, node); }

bool bind_current_thread_to_numa_node(int node) {
  if (node < 0 || numa_node_count() < 2) return false;
  const std::vector<int> cpus = numa_node_cpus(node);
  return !cpus.empty() && device_detail::restrict_thread_to_cpus(cpus) == 0;
}

bool bind_memory_to_numa_node(void* addr, std::size_t bytes, int node) {
  if (node < 0 || addr == nullptr || bytes == 0 || numa_node_count() < 2) return false;
  return device_detail::mbind_preferred(addr, bytes, node) == 0;
}

}  // namespace sluice
