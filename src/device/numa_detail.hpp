// NUMA internals with the sysfs root as a parameter, so tests can point them at a fake /sys,
// and the raw mbind/affinity calls that the public helpers only make on multi-node machines.
// Internal to src/device.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::device_detail {

int numa_node_count_in(const std::string& sys_root);
int numa_node_of_pci_in(const std::string& sys_root, std::string_view bus_id);
std::vector<int> numa_node_cpus_in(const std::string& sys_root, int node);

// mbind(addr, bytes, MPOL_PREFERRED, {node}); 0 or the errno.
int mbind_preferred(void* addr, std::size_t bytes, int node);
// Restricts the calling thread to `cpus` & its current mask; 0, the errno, or -1 when the
// intersection is empty.
int restrict_thread_to_cpus(const std::vector<int>& cpus);

}  // namespace sluice::device_detail
