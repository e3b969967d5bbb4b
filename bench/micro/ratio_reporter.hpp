// RatioReporter: Google Benchmark's console reporter that also keeps every run's images/s, so a
// micro benchmark's main() can print its rows as ratios of one another, all measured in the same
// run (the only comparison these shared machines allow). Rows are keyed by the name given to
// RegisterBenchmark (without "/min_time:..." and the like); with --benchmark_repetitions each
// repetition is kept and the ratio uses their median.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace sluice::bench {

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      const auto it = run.counters.find("items_per_second");
      if (it != run.counters.end() && run.run_type == Run::RT_Iteration) {
        samples_[run.run_name.function_name].push_back(it->second.value);
      }
    }
  }

  // The median images/s of the row `name`; 0 when it did not run (filtered out).
  double median(const std::string& name) const {
    const auto it = samples_.find(name);
    return it == samples_.end() ? 0.0 : median_of(it->second);
  }

  // Every row that ran, with its median images/s.
  std::map<std::string, double> medians() const {
    std::map<std::string, double> out;
    for (const auto& [name, v] : samples_) out[name] = median_of(v);
    return out;
  }

 private:
  static double median_of(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  }

  std::map<std::string, std::vector<double>> samples_;
};

}  // namespace sluice::bench
