#include "sweep/job_launch.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_split.h"
#include "common/files.hpp"
#include "fmt/format.h"
#include "trainscope/common/errors.hpp"
#include "trainscope/hardware/gpu/gpu_sources.hpp"
#include "trainscope/hardware/host/host_metrics.hpp"
#include "trainscope/hardware/host/host_sources.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/stats/numbers.hpp"

namespace trainscope::sweep::detail {

absl::StatusOr<ListenerPlan> plan_listeners(const std::vector<std::string>& listeners,
                                            const std::string& source) {
  static const std::map<std::string, std::vector<std::string>> kSources = {
      {"smi", {kNvmlSource}},
      {"dcgmi", {kNvmlSource, kDcgmSource}},
      {"top", {kHostCpuSource, kHostMemorySource, kHostProcSource}},
      {"iostat", {kHostDiskSource}},
      {"free", {kHostMemorySource}},
      {"ps", {kHostCpuSource, kHostProcSource}},
      {"macmon", {}}};
  ListenerPlan plan;
  plan.all_sources = listeners.empty();
  for (const std::string& listener : listeners) {
    if (listener == "nsys" || listener == "nsysraw" || listener == "ncu" || listener == "ncuraw") {
      const Profiler profiler = listener[1] == 's' ? Profiler::kNsys : Profiler::kNcu;
      if (plan.profiler != Profiler::kNone && plan.profiler != profiler) {
        return absl::InvalidArgumentError(fmt::format(
            "{}: listeners nsys and ncu together: a job runs under one profiler", source));
      }
      plan.profiler = profiler;
      continue;
    }
    const auto it = kSources.find(listener);
    if (it == kSources.end()) {
      return absl::InvalidArgumentError(
          fmt::format("{}: unknown listener '{}' (smi, dcgmi, top, iostat, free, ps, nsys, ncu)",
                      source, listener));
    }
    if (listener == "macmon") {
      warn(fmt::format("{}: listener macmon (macOS) has no equivalent here; ignored", source));
    }
    plan.sources.insert(it->second.begin(), it->second.end());
  }
  return plan;
}

absl::StatusOr<LaunchOptions> job_launch_options(
    const Job& job, const std::string& run_id, const std::string& config_path,
    const JobLaunchSettings& settings, const std::map<std::string, std::string>& extra_tags,
    const std::map<std::string, std::string>& extra_env) {
  absl::StatusOr<ListenerPlan> listeners = plan_listeners(job.listeners, job.source);
  if (!listeners.ok()) return listeners.status();
  LaunchOptions options;
  if (!config_path.empty()) options.environment[kConfigEnv] = config_path;
  for (const auto& [name, value] : extra_env) options.environment[name] = value;
  options.command = job.command;
  for (const auto& [key, value] : job.params) {
    options.command.push_back("--" + key);
    options.command.push_back(value);
  }
  options.run.root = settings.runs_dir;
  options.run.id = run_id;
  options.run.name = job.id;
  options.run.params.insert(job.params.begin(), job.params.end());
  options.run.tags["trainscope.sweep"] = settings.sweep_name;
  options.run.tags["trainscope.sweep.job"] = job.id;
  for (const auto& [key, value] : extra_tags) options.run.tags[key] = value;
  options.profiler = listeners->profiler;
  options.sample_hardware =
      settings.sample_hardware && (listeners->all_sources || !listeners->sources.empty());
  options.sample_interval = settings.sample_interval;
  if (settings.make_sources) {
    options.make_sources = settings.make_sources;
  } else if (!listeners->all_sources) {
    options.make_sources = [wanted = listeners->sources] {
      std::vector<std::unique_ptr<HardwareSource>> chosen;
      for (auto* make : {&host_sources, &gpu_sources}) {
        for (std::unique_ptr<HardwareSource>& source : (*make)()) {
          if (wanted.count(source->name()) != 0) chosen.push_back(std::move(source));
        }
      }
      return chosen;
    };
  }
  options.record_environment = settings.record_environment;
  options.tee = settings.tee;
  options.join_job_from_environment = false;
  return options;
}

void StepSpan::add(std::int64_t start_ns, std::int64_t duration_ns) {
  const std::int64_t end_ns = start_ns + std::max<std::int64_t>(duration_ns, 0);
  if (steps_ == 0 || start_ns < first_start_ns_) first_start_ns_ = start_ns;
  if (steps_ == 0 || end_ns > last_end_ns_) last_end_ns_ = end_ns;
  ++steps_;
}

double StepSpan::rate() const {
  if (steps_ == 0 || last_end_ns_ <= first_start_ns_) return stats::kNaN;
  return static_cast<double>(steps_) * 1e9 / static_cast<double>(last_end_ns_ - first_start_ns_);
}

namespace {

constexpr std::uint64_t kScanBytes = 16u << 20;

// Means of the BATCH and EPOCH regions the job's first timing rank stored.
void read_region_means(const RunReader& reader, JobRecord* record) {
  for (const RankState& rank : reader.ranks()) {
    absl::StatusOr<Summary> summary = reader.read_summary(rank.rank.rank);
    if (!summary.ok()) {  // skipped, as every reader skips a damaged summary, and said
      warn(fmt::format("{} (skipped: the job's BATCH and EPOCH means are not taken from it)",
                       std::string(summary.status().message())));
      continue;
    }
    for (const SummaryEntry& entry : summary->entries) {
      if (entry.device != Device::kCPU || entry.stats.count == 0) continue;
      if (entry.key == "BATCH" && std::isnan(record->batch_mean_s)) {
        record->batch_mean_s = entry.stats.mean;
      } else if (entry.key == "EPOCH" && std::isnan(record->epoch_mean_s)) {
        record->epoch_mean_s = entry.stats.mean;
      }
    }
    if (!std::isnan(record->batch_mean_s) || !std::isnan(record->epoch_mean_s)) return;
  }
}

// StepSpan over the CPU BATCH rows of the lowest rank that has any.
void read_step_rate(const RunReader& reader, JobRecord* record) {
  for (const RankState& rank : reader.ranks()) {
    StepSpan span;
    std::uint64_t offset = 0;
    while (true) {
      absl::StatusOr<RunReader::Scan> scan =
          reader.scan_regions(rank.rank.rank, offset, kScanBytes, [&](const RegionView& row) {
            if (row.device == Device::kCPU && row.key == "BATCH") {
              span.add(row.start_unix_ns, row.duration_ns);
            }
          });
      if (!scan.ok()) {
        if (!absl::IsNotFound(scan.status())) {
          warn(fmt::format("{} (skipped: the job's step rate is not taken from it)",
                           std::string(scan.status().message())));
        }
        break;
      }
      if (scan->next_offset <= offset) break;
      offset = scan->next_offset;
    }
    if (span.steps() > 0) {
      record->steps_per_s = span.rate();
      return;
    }
  }
}

// Per rank the last value of each key, then the mean over the ranks that logged it.
void read_last_metrics(const RunReader& reader, JobRecord* record) {
  std::map<std::string, std::pair<double, int>> sums;
  for (const RankState& rank : reader.ranks()) {
    absl::StatusOr<Chunk<MetricPoint>> metrics = reader.read_metrics(rank.rank.rank);
    if (!metrics.ok()) {
      if (!absl::IsNotFound(metrics.status())) {
        warn(fmt::format("{} (skipped: the job's last metric values are not taken from it)",
                         std::string(metrics.status().message())));
      }
      continue;
    }
    std::map<std::string, double> last;
    for (const MetricPoint& point : metrics->rows) {
      if (point.key.rfind(host::kSystemMetricPrefix, 0) == 0)
        continue;  // hardware readings (format 1)
      last[point.key] = point.value;
    }
    for (const auto& [key, value] : last) {
      sums[key].first += value;
      ++sums[key].second;
    }
  }
  for (const auto& [key, sum] : sums) record->metrics[key] = sum.first / sum.second;
}

}  // namespace

void read_job_results(const std::string& run_dir, JobRecord* record) {
  record->batch_mean_s = record->epoch_mean_s = record->steps_per_s = stats::kNaN;
  record->metrics.clear();
  absl::StatusOr<RunReader> reader = RunReader::Open(run_dir);
  if (!reader.ok()) return;
  read_region_means(*reader, record);
  read_step_rate(*reader, record);
  read_last_metrics(*reader, record);
}

absl::Status check_jobs(const Plan& plan) {
  std::set<std::string> ids;
  for (const Job& job : plan.jobs) {
    if (job.id.empty()) return absl::InvalidArgumentError("a job of the plan has no id");
    if (!ids.insert(job.id).second) {
      return absl::InvalidArgumentError(
          fmt::format("job id '{}' appears twice in the plan ({})", job.id, job.source));
    }
    if (job.command.empty() || job.command[0].empty()) {
      return absl::InvalidArgumentError(
          fmt::format("job '{}' has no command ({})", job.id, job.source));
    }
    if (absl::StatusOr<ListenerPlan> listeners = plan_listeners(job.listeners, job.source);
        !listeners.ok()) {
      return listeners.status();
    }
    if (absl::Status found = check_command(job); !found.ok()) return found;
  }
  return absl::OkStatus();
}

absl::Status check_command(const Job& job) {
  const std::string& program = job.command.at(0);
  bool found = false;
  if (program.find('/') != std::string::npos) {
    found = ::access(program.c_str(), X_OK) == 0;
  } else {
    const char* path = std::getenv("PATH");
    for (absl::string_view dir : absl::StrSplit(path == nullptr ? "" : path, ':')) {
      const std::string candidate =
          fmt::format("{}/{}", dir.empty() ? "." : std::string(dir), program);
      if (::access(candidate.c_str(), X_OK) == 0) {
        found = true;
        break;
      }
    }
  }
  if (!found) {
    return absl::NotFoundError(
        fmt::format("{}: job '{}': command '{}' not found{}", job.source, job.id, program,
                    program.find('/') == std::string::npos ? " on PATH" : ""));
  }
  const std::string name = std::filesystem::path(program).filename().string();
  if (name.rfind("python", 0) == 0 && job.command.size() > 1) {
    const std::string& script = job.command[1];
    const bool is_script = script.size() > 3 && script.compare(script.size() - 3, 3, ".py") == 0;
    std::error_code ignored;
    if (is_script && !std::filesystem::exists(script, ignored)) {
      return absl::NotFoundError(
          fmt::format("{}: job '{}': script '{}' does not exist", job.source, job.id, script));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> write_job_config(const std::string& sweep_dir, const Job& job) {
  if (job.config_json.empty()) return std::string();
  const std::string path = fmt::format("{}/configs/{}.json", sweep_dir, job.id);
  std::error_code ignored;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ignored);
  absl::Status status =
      trainscope::detail::write_file_atomically(path, job.config_json, ".config-");
  if (!status.ok()) return status;
  return path;
}

SweepResult sweep_result(const std::vector<JobRecord>& jobs, bool stopped,
                         bool max_failures_reached) {
  SweepResult result;
  result.stopped = stopped;
  result.max_failures_reached = max_failures_reached;
  result.jobs = jobs;
  for (const JobRecord& record : jobs) {
    if (record.status == JobStatus::kFinished) {
      ++result.finished;
    } else if (record.status == JobStatus::kFailed) {
      ++result.failed;
    } else {
      ++result.unfinished;
    }
  }
  return result;
}

}  // namespace trainscope::sweep::detail
