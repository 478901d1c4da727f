// Sweep jobs and options for the scheduler tests: shell jobs on CPU slots,
// without hardware sampling, and the runs they left by job name.
#ifndef TRAINSCOPE_TESTS_SUPPORT_SWEEP_JOBS_HPP_
#define TRAINSCOPE_TESTS_SUPPORT_SWEEP_JOBS_HPP_

#include <filesystem>
#include <map>
#include <string>

#include "trainscope/run/run_reader.hpp"
#include "trainscope/sweep/plan.hpp"
#include "trainscope/sweep/scheduler.hpp"

namespace trainscope::testing {

inline sweep::Job shell_job(const std::string& id, const std::string& script, int group = -1) {
  sweep::Job job;
  job.id = id;
  job.command = {"sh", "-c", script};
  job.group = group;
  job.source = "test: " + id;
  return job;
}

inline sweep::SweepOptions quiet_options(const std::string& dir, int slots) {
  sweep::SweepOptions options;
  options.dir = dir;
  options.slots = *sweep::cpu_slots(slots);
  options.sample_hardware = false;
  options.record_environment = false;
  return options;
}

// The runs under <dir>/runs by job name (the run's name).
inline std::multimap<std::string, RunInfo> runs_by_job(const std::string& dir) {
  std::multimap<std::string, RunInfo> runs;
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/runs")) {
    absl::StatusOr<RunReader> reader = RunReader::Open(entry.path().string());
    if (reader.ok()) runs.emplace(reader->info().name, reader->info());
  }
  return runs;
}

}  // namespace trainscope::testing

#endif  // TRAINSCOPE_TESTS_SUPPORT_SWEEP_JOBS_HPP_
