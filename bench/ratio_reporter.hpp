// A console reporter that also prints, after the usual table, each benchmark's
// time as a ratio to a baseline measured in the same run, so figures compare
// across machines.
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
  explicit RatioReporter(std::vector<Ratio> ratios) : ratios_(std::move(ratios)) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.error_occurred || run.run_type != Run::RT_Iteration) continue;
      times_[run.run_name.str()] = run.GetAdjustedRealTime();
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
  }

 private:
  std::vector<Ratio> ratios_;
  std::map<std::string, double> times_;
};

// Runs the registered benchmarks with a RatioReporter.
inline int run_with_ratios(int argc, char** argv, std::vector<RatioReporter::Ratio> ratios) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter(std::move(ratios));
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}

}  // namespace trainscope::bench

#endif  // TRAINSCOPE_BENCH_RATIO_REPORTER_HPP_
