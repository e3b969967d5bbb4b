// /proc/loadavg, /proc/stat and getrusage() behind the readings of run_conditions.hpp.
#include "run_conditions.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>

namespace sluice::bench {
namespace {

double seconds_of(const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; }

double rusage_cpu(int who) {
  rusage u{};
  if (::getrusage(who, &u) != 0) return 0;
  return seconds_of(u.ru_utime) + seconds_of(u.ru_stime);
}

}  // namespace

double load_average() {
  std::ifstream in("/proc/loadavg");
  double one_minute = -1;
  in >> one_minute;
  return one_minute;
}

CpuSnapshot cpu_snapshot() {
  CpuSnapshot s;
  s.wall = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  s.own_cpu = rusage_cpu(RUSAGE_SELF) + rusage_cpu(RUSAGE_CHILDREN);
  // "cpu  user nice system idle iowait irq softirq steal ...", in clock ticks, all CPUs summed.
  std::ifstream in("/proc/stat");
  std::string label;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  in >> label >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  if (!in || label != "cpu") return s;
  const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  s.machine_busy = (user + nice + system + irq + softirq) / tick;
  s.steal = steal / tick;
  return s;
}

CpuUse cpu_use(const CpuSnapshot& before, const CpuSnapshot& after) {
  CpuUse u;
  u.wall_seconds = after.wall - before.wall;
  u.own_cpu_seconds = after.own_cpu - before.own_cpu;
  if (u.wall_seconds > 0) {
    const double others = (after.machine_busy - before.machine_busy) - u.own_cpu_seconds + (after.steal - before.steal);
    u.others_cores = std::max(0.0, others / u.wall_seconds);
  }
  return u;
}

}  // namespace sluice::bench
