// NUMA placement for the device path: on a machine with more than one NUMA node, the pinned
// batch ring and the worker threads that fill it belong on the GPU's node, so the DMA engine
// reads local memory and the workers write it. The GPU's node comes from its PCI bus id
// (/sys/bus/pci/devices/<id>/numa_node); memory is placed with mbind(2) before its pages are
// touched, threads with sched_setaffinity(2) to the node's CPUs (/sys/devices/system/node).
// No libnuma: raw syscalls and /sys only. On a single-node machine every call here is a no-op.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/device/device.hpp"

namespace sluice {

// PinnedOptions::numa_node values besides a node number.
inline constexpr int kNumaNone = -1;  // no placement
inline constexpr int kNumaAuto = -2;  // the device's node when the machine has more than one

// Online NUMA nodes (/sys/devices/system/node/online); 1 when that cannot be read.
int numa_node_count();

// CUDA writes PCI bus ids as "00000000:3B:00.0" or "0000:3B:00.0"; sysfs names them
// "0000:3b:00.0". Returns the sysfs form, or empty when `bus_id` is not a PCI address.
std::string sysfs_pci_address(std::string_view bus_id);

// The NUMA node of a PCI device, -1 when unknown (no such device, or the kernel says -1).
int numa_node_of_pci(std::string_view bus_id);

// The node the device's memory traffic should stay on: the GPU's node; -1 for the host or when
// unknown. Never throws (an unusable device is -1).
int numa_node_of(DeviceId device) noexcept;

// kNumaAuto resolves to numa_node_of(device) when numa_node_count() > 1, else to kNumaNone; a
// node number is kept when the machine has it, else kNumaNone.
int resolve_numa_node(DeviceId device, int requested);

// "0-3,8-11" -> {0, 1, 2, 3, 8, 9, 10, 11}; empty on malformed input.
std::vector<int> parse_cpu_list(std::string_view text);

// The CPUs of a node (/sys/devices/system/node/node<N>/cpulist); empty when unknown.
std::vector<int> numa_node_cpus(int node);

// Restricts the calling thread to the CPUs of `node` that it may already use. Returns false and
// changes nothing when the machine has one node, the node is unknown, or the intersection is
// empty. The runtime calls it on each worker as it enters the pool (a oneTBB
// task_scheduler_observer's on_scheduler_entry).
bool bind_current_thread_to_numa_node(int node);

// Asks the kernel to place the pages of [addr, addr + bytes) on `node` (MPOL_PREFERRED, so a full
// node falls back instead of failing). `addr` must be page-aligned and the pages not yet touched.
// Returns false and changes nothing when the machine has one node or the call fails.
bool bind_memory_to_numa_node(void* addr, std::size_t bytes, int node);

}  // namespace sluice
