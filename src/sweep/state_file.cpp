#include "sweep/state_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <set>
#include <utility>

#include "common/csv.hpp"
#include "common/files.hpp"
#include "common/shell_quote.hpp"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "trainscope/stats/numbers.hpp"

namespace trainscope::sweep::detail {
namespace {

using nlohmann::json;

constexpr int kStateVersion = 1;

json number_or_null(double value) { return std::isfinite(value) ? json(value) : json(nullptr); }

double number_from(const json& in, const char* key) {
  const auto it = in.find(key);
  if (it == in.end() || !it->is_number()) return stats::kNaN;
  return it->get<double>();
}

std::string format_number(double value) {
  return std::isfinite(value) ? fmt::format("{:.9g}", value) : std::string();
}

}  // namespace

json job_to_json(const Job& job) {
  json params = json::array();
  for (const auto& [key, value] : job.params) params.push_back(json::array({key, value}));
  return json{{"id", job.id},
              {"params", params},
              {"repeat", job.repeat},
              {"group", job.group},
              {"devices", job.devices},
              {"collocation", job.collocation},
              {"listeners", job.listeners},
              {"command", job.command},
              {"config_json", job.config_json},
              {"source", job.source}};
}

Job job_from_json(const json& in) {
  Job job;
  job.id = in.at("id").get<std::string>();
  for (const json& pair : in.at("params")) {
    job.params.emplace_back(pair.at(0).get<std::string>(), pair.at(1).get<std::string>());
  }
  job.repeat = in.value("repeat", 0);
  job.group = in.value("group", -1);
  job.devices = in.value("devices", std::vector<int>{});
  job.collocation = in.value("collocation", std::string("-"));
  job.listeners = in.value("listeners", std::vector<std::string>{});
  job.command = in.at("command").get<std::vector<std::string>>();
  job.config_json = in.value("config_json", std::string());
  job.source = in.value("source", std::string());
  return job;
}

std::string state_to_json(const SweepState& state) {
  json jobs = json::array();
  for (const JobRecord& record : state.jobs) {
    json metrics = json::object();
    for (const auto& [key, value] : record.metrics) metrics[key] = number_or_null(value);
    jobs.push_back(json{{"job", job_to_json(record.job)},
                        {"status", job_status_name(record.status)},
                        {"attempts", record.attempts},
                        {"run_id", record.run_id},
                        {"run_dir", record.run_dir},
                        {"exit_code", record.exit_code},
                        {"timed_out", record.timed_out},
                        {"start_ms", record.start_ms},
                        {"end_ms", record.end_ms},
                        {"devices", record.devices},
                        {"error", record.error},
                        {"batch_mean_s", number_or_null(record.batch_mean_s)},
                        {"epoch_mean_s", number_or_null(record.epoch_mean_s)},
                        {"steps_per_s", number_or_null(record.steps_per_s)},
                        {"metrics", metrics},
                        {"slurm_job_id", record.slurm_job_id},
                        {"slurm_index", record.slurm_index}});
  }
  const json out{{"version", kStateVersion},
                 {"name", state.name},
                 {"max_parallel", state.max_parallel},
                 {"allow_cpu", state.allow_cpu},
                 {"jobs", jobs}};
  return out.dump(1) + "\n";
}

absl::StatusOr<SweepState> state_from_json(const std::string& text, const std::string& path) {
  const json in = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (in.is_discarded() || !in.is_object()) {
    return absl::DataLossError(fmt::format("{}: not a JSON object (a corrupt sweep state)", path));
  }
  if (in.value("version", 0) != kStateVersion) {
    return absl::FailedPreconditionError(
        fmt::format("{}: sweep state version {} is not {} (written by another trainscope)", path,
                    in.value("version", 0), kStateVersion));
  }
  SweepState state;
  std::size_t index = 0;
  try {
    state.name = in.value("name", std::string());
    state.max_parallel = in.value("max_parallel", 0);
    state.allow_cpu = in.value("allow_cpu", true);
    for (const json& job : in.at("jobs")) {
      JobRecord record;
      record.job = job_from_json(job.at("job"));
      absl::StatusOr<JobStatus> status = parse_job_status(job.at("status").get<std::string>());
      if (!status.ok()) {
        return absl::DataLossError(fmt::format("{}: job {}: {}", path, record.job.id,
                                               std::string(status.status().message())));
      }
      record.status = *status;
      record.attempts = job.value("attempts", 0);
      record.run_id = job.value("run_id", std::string());
      record.run_dir = job.value("run_dir", std::string());
      record.exit_code = job.value("exit_code", -1);
      record.timed_out = job.value("timed_out", false);
      record.start_ms = job.value("start_ms", std::int64_t{0});
      record.end_ms = job.value("end_ms", std::int64_t{0});
      record.devices = job.value("devices", std::vector<int>{});
      record.error = job.value("error", std::string());
      record.batch_mean_s = number_from(job, "batch_mean_s");
      record.epoch_mean_s = number_from(job, "epoch_mean_s");
      record.steps_per_s = number_from(job, "steps_per_s");
      if (const auto metrics = job.find("metrics"); metrics != job.end()) {
        for (const auto& [key, value] : metrics->items()) {
          record.metrics[key] = value.is_number() ? value.get<double>() : stats::kNaN;
        }
      }
      record.slurm_job_id = job.value("slurm_job_id", std::string());
      record.slurm_index = job.value("slurm_index", -1);
      state.jobs.push_back(std::move(record));
      ++index;
    }
  } catch (const json::exception& error) {
    return absl::DataLossError(
        fmt::format("{}: jobs[{}]: {} (a corrupt sweep state)", path, index, error.what()));
  }
  return state;
}

Plan plan_of(const SweepState& state) {
  Plan plan;
  plan.name = state.name;
  plan.max_parallel = state.max_parallel;
  plan.allow_cpu = state.allow_cpu;
  for (const JobRecord& record : state.jobs) plan.jobs.push_back(record.job);
  return plan;
}

MergeCounts merge_plan(SweepState* state, Plan plan) {
  MergeCounts counts;
  const auto never_started = [](const JobRecord& record) {
    return record.status == JobStatus::kQueued && record.attempts == 0;
  };
  std::vector<JobRecord> jobs;
  std::set<std::string> in_plan;
  for (Job& job : plan.jobs) {
    in_plan.insert(job.id);
    const auto it = std::find_if(state->jobs.begin(), state->jobs.end(),
                                 [&](const JobRecord& record) { return record.job.id == job.id; });
    if (it == state->jobs.end()) {
      JobRecord record;
      record.job = std::move(job);
      jobs.push_back(std::move(record));
      ++counts.added;
    } else {
      JobRecord record = *it;
      if (never_started(record)) record.job = std::move(job);  // takes the new definition
      jobs.push_back(std::move(record));
    }
  }
  for (JobRecord& record : state->jobs) {
    if (in_plan.count(record.job.id) != 0) continue;
    if (never_started(record)) {
      ++counts.dropped;
    } else {
      jobs.push_back(std::move(record));
    }
  }
  state->jobs = std::move(jobs);
  state->name = plan.name;
  state->max_parallel = plan.max_parallel;
  state->allow_cpu = plan.allow_cpu;
  return counts;
}

namespace {

std::string sweep_named(const std::string& name) {
  return name.empty() ? std::string("a sweep") : fmt::format("sweep '{}'", name);
}

}  // namespace

absl::Status check_same_sweep(const SweepState& stored, const Plan& plan, const std::string& dir,
                              bool retry_failed) {
  if (stored.jobs.empty() || plan.jobs.empty()) return absl::OkStatus();
  const auto refuse = [&](const std::string& what, const std::vector<std::string>& recorded,
                          const std::vector<std::string>& asked) {
    return absl::FailedPreconditionError(fmt::format(
        "\"{}\" holds {} whose jobs run `{}`, but {} asks for `{}`: pass another --dir for "
        "this sweep, or `--resume {}` alone to continue the recorded one",
        dir, what, ::trainscope::detail::shell_command(recorded), sweep_named(plan.name),
        ::trainscope::detail::shell_command(asked), dir));
  };
  if (stored.name != plan.name) {
    return refuse(sweep_named(stored.name), stored.jobs.front().job.command,
                  plan.jobs.front().command);
  }
  for (const Job& job : plan.jobs) {
    const auto it = std::find_if(stored.jobs.begin(), stored.jobs.end(),
                                 [&](const JobRecord& record) { return record.job.id == job.id; });
    if (it == stored.jobs.end() || it->job.command == job.command) continue;
    if (it->status == JobStatus::kQueued && it->attempts == 0) continue;  // never started
    if (it->status == JobStatus::kFailed && retry_failed) continue;       // runs afresh
    return refuse(fmt::format("{} (job '{}' {})", sweep_named(stored.name), job.id,
                              job_status_name(it->status)),
                  it->job.command, job.command);
  }
  return absl::OkStatus();
}

Progress progress_of(const SweepState& state, int width, std::string event) {
  Progress p;
  double finished_s = 0;
  for (const JobRecord& record : state.jobs) {
    ++p.total;
    switch (record.status) {
      case JobStatus::kFinished:
        ++p.done;
        finished_s += static_cast<double>(record.end_ms - record.start_ms) / 1000.0;
        break;
      case JobStatus::kRunning:
        ++p.running;
        break;
      case JobStatus::kFailed:
        ++p.failed;
        break;
      default:
        ++p.queued;
    }
  }
  if (p.done > 0) {
    const double mean_s = finished_s / p.done;
    p.eta = absl::Seconds(mean_s * (p.queued + p.running) / std::max(width, 1));
  }
  p.event = std::move(event);
  return p;
}

absl::StatusOr<int> lock_sweep_dir(const std::string& dir) {
  const std::string lock_path = fmt::format("{}/sweep.lock", dir);
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return trainscope::detail::file_error(errno, "open", lock_path);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    ::close(fd);
    return error == EWOULDBLOCK
               ? absl::FailedPreconditionError(fmt::format(
                     "another scheduler runs the sweep in \"{}\" (it holds {})", dir, lock_path))
               : trainscope::detail::file_error(error, "lock", lock_path);
  }
  return fd;
}

absl::Status save_sweep(const std::string& dir, const SweepState& state) {
  absl::Status status = trainscope::detail::write_file_atomically(
      fmt::format("{}/{}", dir, kStateFileName), state_to_json(state), ".sweep-");
  absl::Status results = trainscope::detail::write_file_atomically(
      fmt::format("{}/{}", dir, kResultsFileName), results_csv(state.jobs), ".results-");
  return status.ok() ? results : status;
}

std::string results_csv(const std::vector<JobRecord>& jobs) {
  std::vector<std::string> keys;
  std::set<std::string> seen;
  for (const JobRecord& record : jobs) {
    for (const auto& param : record.job.params) {
      if (seen.insert(param.first).second) keys.push_back(param.first);
    }
  }
  std::string out = "job";
  for (const std::string& key : keys) {
    out.push_back(',');
    trainscope::detail::append_csv_field(key, &out);
  }
  std::set<std::string> metrics;
  for (const JobRecord& record : jobs) {
    for (const auto& metric : record.metrics) metrics.insert(metric.first);
  }
  out +=
      ",status,exit_code,attempts,duration_s,run_id,run_dir,batch_mean_s,epoch_mean_s,"
      "throughput_batches_per_s";
  for (const std::string& key : metrics) {
    out.push_back(',');
    trainscope::detail::append_csv_field(kMetricColumnPrefix + key, &out);
  }
  out.push_back('\n');
  for (const JobRecord& record : jobs) {
    if (record.status == JobStatus::kQueued || record.status == JobStatus::kRunning) continue;
    trainscope::detail::append_csv_field(record.job.id, &out);
    for (const std::string& key : keys) {
      out.push_back(',');
      for (const auto& param : record.job.params) {
        if (param.first == key) {
          trainscope::detail::append_csv_field(param.second, &out);
          break;
        }
      }
    }
    const double duration_s = static_cast<double>(record.end_ms - record.start_ms) / 1000.0;
    out += fmt::format(",{},{},{},{:.3f},{},", job_status_name(record.status), record.exit_code,
                       record.attempts, duration_s, record.run_id);
    trainscope::detail::append_csv_field(
        record.run_id.empty() ? "" : fmt::format("{}/{}", kRunsDirName, record.run_id), &out);
    out += fmt::format(",{},{},{}", format_number(record.batch_mean_s),
                       format_number(record.epoch_mean_s), format_number(record.steps_per_s));
    for (const std::string& key : metrics) {
      const auto it = record.metrics.find(key);
      out += "," + (it == record.metrics.end() ? std::string() : format_number(it->second));
    }
    out.push_back('\n');
  }
  return out;
}

}  // namespace trainscope::sweep::detail
