// How soon a freed slot starts the next job: 21 short jobs on one full slot,
// each writing the time its command starts and ends (CLOCK_REALTIME, ns, via
// date +%s%N); the gap is the next command's start minus the previous one's
// end, so it covers everything in between: the launch noticing the exit, the
// run's end, the scheduler's state and results files (fsynced), and the next
// run's start and spawn. Printed against Furcate's scheduler, which looks for
// free devices on a 60 s poll (a freed slot waits up to 60 s, 30 s on average).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/temp_dir.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/sweep/scheduler.hpp"

namespace {

std::vector<long long> read_times(const std::string& path) {
  std::vector<long long> times;
  std::ifstream in(path);
  for (long long t; in >> t;) times.push_back(t);
  return times;
}

}  // namespace

int main() {
  using namespace trainscope::sweep;
  constexpr int kJobs = 21;  // 20 gaps
  trainscope::testing::TempDir tmp("sweep_bench");
  const std::string starts = tmp.file("starts");
  const std::string ends = tmp.file("ends");
  Plan plan;
  plan.name = "bench";
  for (int i = 0; i < kJobs; ++i) {
    Job job;
    job.id = "job" + std::to_string(i);
    job.command = {"sh", "-c", "date +%s%N >> " + starts + "; sleep 0.05; date +%s%N >> " + ends};
    plan.jobs.push_back(job);
  }
  SweepOptions options;
  options.dir = tmp.file("sweep");
  options.slots = *cpu_slots(1);
  options.sample_hardware = false;
  options.record_environment = false;
  absl::StatusOr<SweepResult> result = run_sweep(plan, options);
  if (!result.ok() || result->finished != kJobs) {
    std::fprintf(stderr, "sweep_bench: the sweep failed: %s\n",
                 result.ok() ? "not every job finished" : result.status().ToString().c_str());
    return 1;
  }
  const std::vector<long long> start_ns = read_times(starts);
  const std::vector<long long> end_ns = read_times(ends);
  std::vector<double> gaps_ms;
  for (std::size_t i = 0; i + 1 < start_ns.size() && i < end_ns.size(); ++i) {
    gaps_ms.push_back(static_cast<double>(start_ns[i + 1] - end_ns[i]) / 1e6);
  }
  if (gaps_ms.empty()) {
    std::fprintf(stderr, "sweep_bench: no times recorded\n");
    return 1;
  }
  std::sort(gaps_ms.begin(), gaps_ms.end());
  const double median = gaps_ms[gaps_ms.size() / 2];
  std::printf(
      "slot gap (job end -> next job start, 1 slot, %zu gaps): median %.1f ms, min %.1f "
      "ms, max %.1f ms\n",
      gaps_ms.size(), median, gaps_ms.front(), gaps_ms.back());
  // The scheduler's own part, from the run store: one run's end to the next run's start.
  std::vector<std::pair<long long, long long>> runs;  // (start ms, end ms)
  for (const auto& entry : std::filesystem::directory_iterator(options.dir + "/runs")) {
    absl::StatusOr<trainscope::RunReader> reader = trainscope::RunReader::Open(entry.path());
    if (reader.ok()) runs.emplace_back(reader->info().start_time_ms, reader->info().end_time_ms);
  }
  std::sort(runs.begin(), runs.end());
  std::vector<long long> run_gaps_ms;
  for (std::size_t i = 0; i + 1 < runs.size(); ++i)
    run_gaps_ms.push_back(runs[i + 1].first - runs[i].second);
  std::sort(run_gaps_ms.begin(), run_gaps_ms.end());
  if (!run_gaps_ms.empty()) {
    std::printf(
        "  of which the scheduler (run end -> next run start): median %lld ms, max %lld ms\n",
        run_gaps_ms[run_gaps_ms.size() / 2], run_gaps_ms.back());
  }
  std::printf(
      "Furcate (60 s poll): up to 60000 ms, 30000 ms on average -> %.0fx shorter (median)\n",
      30000.0 / median);
  std::printf("target: < 500 ms: %s\n", gaps_ms.back() < 500.0 ? "met" : "MISSED");
  return 0;
}
