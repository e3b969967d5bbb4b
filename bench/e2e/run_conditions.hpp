// What a benchmark run shared the machine with: the 1-minute load average, the CPU time this
// process and its children used, and the CPU time every other process on the machine used, read
// around each system's run so that loader_compare can say how busy the machine was while each
// system ran and refuse a verdict when others took a share of the cores the systems needed.
#pragma once

namespace sluice::bench {

// The 1-minute load average (/proc/loadavg), or -1 when it cannot be read.
double load_average();

// A reading to take before and after a system's run.
struct CpuSnapshot {
  double wall = 0;          // steady clock, seconds
  double own_cpu = 0;       // this process (user + system) and its waited-for children (the torch peer)
  double machine_busy = 0;  // every CPU's user, nice, system, irq and softirq time (/proc/stat)
  double steal = 0;         // time the hypervisor gave other guests (/proc/stat)
};
CpuSnapshot cpu_snapshot();

// Between two snapshots: the CPU seconds this process used, and the cores (CPU seconds per wall
// second) that everything else on the machine used meanwhile, the hypervisor's steal included.
struct CpuUse {
  double wall_seconds = 0;
  double own_cpu_seconds = 0;
  double others_cores = 0;
};
CpuUse cpu_use(const CpuSnapshot& before, const CpuSnapshot& after);

}  // namespace sluice::bench
