// A console reporter that also prints, after the usual table, each benchmark's
// time as a ratio to a baseline measured in the same run, so figures compare
// across machines, and optionally chosen counters (figures such as records/s),
// each against a target and as a ratio to a baseline's counter.
#ifndef TRAINSCOPE_BENCH_RATIO_REPORTER_HPP_
#define TRAINSCOPE_BENCH_RATIO_REPORTER_HPP_

#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace trainscope::bench {

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  // Each pair: (benchmark name, baseline benchmark name, target ratio or 0).
  struct Ratio {
    std::string name;
    std::string baseline;
    double target;
  };
  // A counter of a benchmark: printed with its target (min_target, max_target
  // when > 0) and, when `baseline` names a benchmark, as a ratio to that
  // benchmark's `baseline_counter`.
  struct Figure {
    std::string name;
    std::string counter;
    double min_target = 0;
    double max_target = 0;
    std::string baseline = {};
    std::string baseline_counter = {};
  };
  explicit RatioReporter(std::vector<Ratio> ratios, std::vector<Figure> figures = {})
      : ratios_(std::move(ratios)), figures_(std::move(figures)) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.error_occurred || run.run_type != Run::RT_Iteration) continue;
      times_[run.run_name.str()] = run.GetAdjustedRealTime();
      for (const auto& [name, counter] : run.counters) {
        counters_[run.run_name.str()][name] = counter.value;
      }
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\n%-48s %-36s %10s %8s\n", "benchmark", "baseline (same run)", "ratio", "target");
    for (const Ratio& r : ratios_) {
      auto a = times_.find(r.name);
      auto b = times_.find(r.baseline);
      if (a == times_.end() || b == times_.end() || b->second <= 0) {
        std::printf("%-48s %-36s %10s %8s\n", r.name.c_str(), r.baseline.c_str(), "skipped", "");
        continue;
      }
      const double ratio = a->second / b->second;
      char target[32] = "";
      if (r.target > 0) std::snprintf(target, sizeof(target), "<=%.2f", r.target);
      std::printf("%-48s %-36s %10.3f %8s%s\n", r.name.c_str(), r.baseline.c_str(), ratio, target,
                  r.target > 0 && ratio > r.target ? "  MISSED" : "");
    }
    if (figures_.empty()) return;
    std::printf("\n%-48s %-20s %12s %12s %-30s %10s\n", "benchmark", "figure", "value", "target",
                "baseline (same run)", "ratio");
    for (const Figure& f : figures_) {
      const double* value = counter(f.name, f.counter);
      if (value == nullptr) {
        std::printf("%-48s %-20s %12s\n", f.name.c_str(), f.counter.c_str(), "skipped");
        continue;
      }
      char target[32] = "";
      if (f.min_target > 0) std::snprintf(target, sizeof(target), ">=%.4g", f.min_target);
      if (f.max_target > 0) std::snprintf(target, sizeof(target), "<=%.4g", f.max_target);
      const bool missed = (f.min_target > 0 && *value < f.min_target) ||
                          (f.max_target > 0 && *value > f.max_target);
      char ratio[32] = "";
      std::string baseline;
      if (!f.baseline.empty()) {
        baseline = f.baseline + ":" + f.baseline_counter;
        const double* base = counter(f.baseline, f.baseline_counter);
        if (base != nullptr && *base > 0) {
          std::snprintf(ratio, sizeof(ratio), "%.3f", *value / *base);
        } else {
          std::snprintf(ratio, sizeof(ratio), "skipped");
        }
      }
      std::printf("%-48s %-20s %12.4g %12s %-30s %10s%s\n", f.name.c_str(), f.counter.c_str(),
                  *value, target, baseline.c_str(), ratio, missed ? "  MISSED" : "");
    }
  }

 private:
  // `name` exactly, or with a suffix such as "/iterations:1/manual_time".
  const double* counter(const std::string& name, const std::string& counter) const {
    auto run = counters_.find(name);
    if (run == counters_.end()) {
      run = counters_.lower_bound(name + "/");
      if (run == counters_.end() || run->first.compare(0, name.size() + 1, name + "/") != 0) {
        return nullptr;
      }
    }
    auto it = run->second.find(counter);
    return it == run->second.end() ? nullptr : &it->second;
  }

  std::vector<Ratio> ratios_;
  std::vector<Figure> figures_;
  std::map<std::string, double> times_;
  std::map<std::string, std::map<std::string, double>> counters_;
};

// Runs the registered benchmarks with a RatioReporter.
inline int run_with_ratios(int argc, char** argv, std::vector<RatioReporter::Ratio> ratios,
                           std::vector<RatioReporter::Figure> figures = {}) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter(std::move(ratios), std::move(figures));
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}

}  // namespace trainscope::bench

#endif  // TRAINSCOPE_BENCH_RATIO_REPORTER_HPP_
