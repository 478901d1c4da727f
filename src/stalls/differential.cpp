#include "trainscope/stalls/differential.hpp"
#include "trainscope/hardware/host/host_metrics.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/time/time.h"
#include "common/files.hpp"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "nlohmann/json.hpp"
#include "stalls/stalls_json.hpp"
#include "trainscope/launch/launch.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/stalls/timed_loader.hpp"
#include "trainscope/stats/format_numbers.hpp"
#include "trainscope/steps/steps.hpp"

namespace trainscope::stalls {
namespace {

using nlohmann::json;

// ---- the conclusions --------------------------------------------------------------------------

// Findings, each with the recommendation the what-ifs support.
std::vector<std::string> findings_of(const DifferentialAnalysis& a, int cores) {
  const Differential& d = a.differential;
  const std::optional<WorkerFit> fit = a.workers ? a.workers->fit : std::nullopt;
  std::vector<std::string> findings;
  if (d.prep_share >= 0.05) {
    std::string finding = fmt::format(
        "prep-bound: {} of the cold run's time (+-{}) waits for "
        "batches to be prepared",
        stats::format_share(d.prep_share), stats::format_share(d.prep_share_ci));
    if (fit && fit->workers_to_keep_up > 0) {
      finding += fmt::format(
          "; {} loader workers would prepare {:.0f} samples/s, enough for "
          "the {:.0f} the step can take (removing most of the stall)",
          fit->workers_to_keep_up, predict_throughput(*fit, fit->workers_to_keep_up, 0),
          d.ingestion_rate);
    } else if (fit) {
      finding += fmt::format(
          "; even {} workers (all cores) would prepare only {:.0f} of the "
          "{:.0f} samples/s the step can take: cheaper preprocessing or "
          "offloading it (e.g. to the GPU) is needed",
          cores, predict_throughput(*fit, cores, 0), d.ingestion_rate);
    } else {
      finding +=
          "; run again with --vary num_workers=2,4 to see whether more loader workers "
          "would help";
    }
    findings.push_back(finding);
  }
  if (d.fetch_share >= 0.05) {
    std::string finding = fmt::format(
        "fetch-bound: {} of the cold run's time (+-{}) waits for "
        "storage",
        stats::format_share(d.fetch_share), stats::format_share(d.fetch_share_ci));
    for (const CachePoint& p : a.cache.model.points) {
      if (p.samples_per_s >= 0.95 * std::min(d.ingestion_rate, d.prep_rate)) {
        finding += fmt::format("; caching {} of the dataset would remove it",
                               stats::format_share(p.cached));
        break;
      }
    }
    findings.push_back(finding);
  }
  if (findings.empty()) {
    findings.push_back(fmt::format("not data-bound: prep {} and fetch {} of the time",
                                   stats::format_share(d.prep_share),
                                   stats::format_share(d.fetch_share)));
  }
  const GpuWhatIf& gpu = a.gpus;
  const double gpus = gpu.gpus_until_data_bound;
  if (gpus >= 1) {
    findings.push_back(fmt::format(
        "GPUs per node: the loader ({:.0f} samples/s alone) keeps up with up to {:.1f}x this "
        "node's GPUs (ingestion scales with them, the loader is shared); beyond that the job is "
        "data-bound{}",
        gpu.loader_rate, gpus,
        gpu.gpus_until_data_bound_cold < 0.95 * gpus
            ? fmt::format(" ({:.1f}x with the dataset uncached)", gpu.gpus_until_data_bound_cold)
            : std::string()));
  } else if (gpus > 0) {
    findings.push_back(fmt::format(
        "GPUs per node: the loader supplies {:.0f}% of what this node's GPUs could take; more "
        "GPUs per node would only wait longer",
        100 * gpus));
  }
  return findings;
}

// ---- running the legs -------------------------------------------------------------------------

std::string default_dir() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char name[32];
  std::strftime(name, sizeof name, "%Y%m%d-%H%M%S", &tm);
  return std::string("trainscope-stalls/") + name;
}

// One run of the command: its leg name, its mode and what it appends.
struct LegPlan {
  std::string name;
  std::string mode;  // kSyntheticMode, ...
  std::vector<std::string> extra_args;
  LegResult* result = nullptr;
  bool varied = false;  // a warm run of --vary (its residency is not kept)
};

void read_hardware(LegResult* leg) {
  absl::StatusOr<RunReader> reader = RunReader::Open(leg->run_dir);
  if (!reader.ok()) return;
  double disk_sum = 0, cpu_sum = 0;
  int disk_n = 0, cpu_n = 0;
  for (const std::string& host : reader->hosts()) {
    absl::StatusOr<Chunk<MetricPoint>> points = reader->read_host_metrics(host);
    if (!points.ok()) continue;
    for (const MetricPoint& p : points->rows) {
      if (p.key == host::kDiskReadMbPerSecMetric && p.value > 0) {
        disk_sum += p.value;
        ++disk_n;
      } else if (p.key == host::kProcReadMbMetric) {
        leg->read_mb = std::max(leg->read_mb, p.value);
      }
    }
  }
  // The device's rate while it was busy (bytes over its io_ticks) when it read
  // enough to tell; else the mean of the samples that saw reads, which the
  // sampler's idle time in each interval dilutes.
  if (leg->disk.bytes >= (1u << 20) && leg->disk.busy_ms >= 5) {
    leg->disk_read_mb_s = leg->disk.mb_s();
    leg->disk_rate_from = "diskstats";
  } else {
    leg->disk_read_mb_s = disk_n ? disk_sum / disk_n : 0;
    leg->disk_rate_from = "samples";
  }
  // The job's CPU as every view has it (the steps room's: its process trees
  // summed per host sample), in % of one core, mean over the samples.
  if (absl::StatusOr<steps::RunSteps> stepped = steps::read_steps(*reader); stepped.ok()) {
    for (const steps::HostLoad& host : stepped->hosts)
      for (const steps::HostSample& x : host.samples) {
        if (!std::isfinite(x.job_cpu_pct)) continue;
        cpu_sum += x.job_cpu_pct * host.cores;
        ++cpu_n;
      }
  }
  leg->cpu_pct = cpu_n ? cpu_sum / cpu_n : 0;
}

void say(const DifferentialOptions& options, const std::string& line) {
  if (options.progress) options.progress(line);
}

// Runs one leg into plan.result; FailedPrecondition naming the leg when it did
// not give W + N iterations.
absl::Status run_leg(const DifferentialOptions& options, const std::string& dir,
                     const LegPlan& plan) {
  LegResult& leg = *plan.result;
  leg.run_dir = dir + "/runs/" + plan.name;
  LaunchOptions launch_options;
  launch_options.command = options.command;
  launch_options.command.insert(launch_options.command.end(), plan.extra_args.begin(),
                                plan.extra_args.end());
  launch_options.environment = {{kModeEnv, plan.mode},
                                {kIterationsEnv, std::to_string(options.iterations)},
                                {kWarmupEnv, std::to_string(options.warmup)}};
  launch_options.run.dir = leg.run_dir;
  launch_options.run.name = plan.name;
  launch_options.run.tags[kLegTag] = plan.name;
  launch_options.run.tags[kAnalysisTag] = dir;
  launch_options.sample_interval = absl::Milliseconds(250);
  launch_options.tee = false;
  launch_options.join_job_from_environment = false;
  launch_options.die_with_parent = true;
  const auto began = std::chrono::steady_clock::now();
  const DiskReadCounter disk;
  absl::StatusOr<LaunchResult> result = launch(std::move(launch_options));
  leg.disk = disk.read_since();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  if (!result.ok()) {
    return absl::Status(
        result.status().code() == absl::StatusCode::kInvalidArgument
            ? absl::StatusCode::kFailedPrecondition
            : result.status().code(),
        fmt::format("the {} run: {}", plan.name, std::string(result.status().message())));
  }
  say(options,
      fmt::format("{:<12} run {}, exit {}, {:.1f} s", plan.name,
                  std::string(run_status_name(result->status)), result->exit_code, seconds));
  if (result->exit_code != 0) {
    return absl::FailedPreconditionError(
        fmt::format("the {} run failed (exit {}): see {}/stderr.log", plan.name, result->exit_code,
                    leg.run_dir));
  }
  absl::StatusOr<RunStalls> stalls = analyze_run(leg.run_dir);
  if (!stalls.ok() || stalls->iteration_s.empty()) {
    return absl::FailedPreconditionError(fmt::format(
        "the {} run recorded no timed loader ({}): the command must iterate its data with "
        "`for batch in tmr.timed(loader):` (trainscope.Timer or CPUGPUTimer), which also ends "
        "it after the measured iterations",
        plan.name, stalls.ok() ? "no iteration rows" : std::string(stalls.status().message())));
  }
  leg.stalls = *std::move(stalls);
  absl::StatusOr<Timing> timing =
      measured_time(leg.stalls.iteration_s, options.warmup, options.iterations);
  if (!timing.ok()) {
    return absl::FailedPreconditionError(
        fmt::format("the {} run ended early: {} (does the loader hold enough batches, or "
                    "does the command stop by itself?)",
                    plan.name, std::string(timing.status().message())));
  }
  leg.timing = *timing;
  leg.live_wait_share = measured_wait_share(leg.stalls, options.warmup, options.iterations);
  read_hardware(&leg);
  return absl::OkStatus();
}

absl::Status check_options(const DifferentialOptions& o) {
  if (o.command.empty()) return absl::InvalidArgumentError("no command to analyze");
  if (o.iterations < 1) {
    return absl::InvalidArgumentError(
        fmt::format("iterations {}: needs a whole number >= 1", o.iterations));
  }
  if (o.warmup < 0) {
    return absl::InvalidArgumentError(
        fmt::format("warmup {}: needs a whole number >= 0", o.warmup));
  }
  if (o.iterations < o.warmup) {
    return absl::InvalidArgumentError(
        fmt::format("iterations {} is smaller than warmup {}: measure at least as many "
                    "iterations as are thrown away",
                    o.iterations, o.warmup));
  }
  if (o.vary_key.empty() != o.vary_values.empty()) {
    return absl::InvalidArgumentError("vary needs a key and at least one value (num_workers=2,4)");
  }
  for (int value : o.vary_values) {
    if (value < 0) {
      return absl::InvalidArgumentError(
          fmt::format("vary {}={}: needs whole numbers >= 0", o.vary_key, value));
    }
  }
  return absl::OkStatus();
}

// ---- the document -----------------------------------------------------------------------------

json residency_json(const Residency& r) {
  return {{"files", r.files},
          {"bytes", r.bytes},
          {"resident_bytes", r.resident_bytes},
          {"resident_share", r.share()}};
}

Residency residency_from(const trainscope::detail::Field& f) {
  Residency r;
  r.files = f["files"].unsigned_integer();
  r.bytes = f["bytes"].unsigned_integer();
  r.resident_bytes = f["resident_bytes"].unsigned_integer();
  (void)f["resident_share"].number();  // derived from the bytes
  return r;
}

json leg_json(const LegResult& leg) {
  json out = {{"run_dir", leg.run_dir},
              {"time_s", leg.timing.total_s},
              {"time_ci_s", leg.timing.ci_half_s},
              {"live_wait_share", leg.live_wait_share},
              {"disk_read_mb_s", leg.disk_read_mb_s},
              {"disk_rate_from", leg.disk_rate_from},
              {"disk",
               {{"device", leg.disk.device},
                {"bytes_read", leg.disk.bytes},
                {"busy_ms", leg.disk.busy_ms}}},
              {"read_mb", leg.read_mb},
              {"cpu_pct", leg.cpu_pct},
              {"analysis", detail::run_stalls_to_json(leg.stalls)}};
  if (leg.residency) out["residency"] = residency_json(*leg.residency);
  return out;
}

LegResult leg_from(const trainscope::detail::Field& f, int iterations) {
  LegResult leg;
  leg.run_dir = f["run_dir"].string();
  leg.timing.total_s = f["time_s"].number();
  leg.timing.ci_half_s = f["time_ci_s"].number();
  leg.timing.iterations = static_cast<std::size_t>(iterations);
  leg.live_wait_share = f["live_wait_share"].number();
  leg.disk_read_mb_s = f["disk_read_mb_s"].number();
  leg.disk_rate_from = f["disk_rate_from"].string();
  const trainscope::detail::Field disk = f["disk"];
  leg.disk.device = disk["device"].string();
  leg.disk.bytes = disk["bytes_read"].unsigned_integer();
  leg.disk.busy_ms = disk["busy_ms"].unsigned_integer();
  leg.read_mb = f["read_mb"].number();
  leg.cpu_pct = f["cpu_pct"].number();
  if (std::optional<trainscope::detail::Field> r = f.find("residency"))
    leg.residency = residency_from(*r);
  leg.stalls = detail::run_stalls_from_json(f["analysis"]);
  return leg;
}

// (n, samples/s) pairs: "predicted" of the worker and GPU what-ifs.
json rate_points(const std::vector<std::pair<int, double>>& points, const char* what) {
  json out = json::array();
  for (const auto& [n, rate] : points) out.push_back({{what, n}, {"samples_per_s", rate}});
  return out;
}

std::vector<std::pair<int, double>> rate_points_from(const trainscope::detail::Field& f,
                                                     const char* what) {
  std::vector<std::pair<int, double>> out;
  for (const trainscope::detail::Field& p : f.items()) {
    out.emplace_back(p[what].int_at_least(0), p["samples_per_s"].number());
  }
  return out;
}

json number_or_null(double value) { return std::isfinite(value) ? json(value) : json(nullptr); }

json document(const DifferentialAnalysis& a) {
  json out;
  out["dataset"] = {{"path", a.dataset.path},
                    {"residency_before", residency_json(a.dataset.residency_before)},
                    {"available_memory_bytes", a.dataset.available_memory_bytes}};
  out["iterations"] = a.iterations;
  out["warmup"] = a.warmup;
  out["batch_size"] = a.batch_size;
  json runs = json::object();
  runs["synthetic"] = leg_json(a.runs.synthetic);
  runs["cold"] = leg_json(a.runs.cold);
  runs["warm"] = leg_json(a.runs.warm);
  runs["loader"] = leg_json(a.runs.loader);
  const std::string key = a.workers ? a.workers->key : std::string();
  for (const VariedLeg& v : a.runs.varied) runs[varied_leg_name(key, v.value)] = leg_json(v.leg);
  out["runs"] = std::move(runs);
  const Differential& d = a.differential;
  out["differential"] = {
      {"ingestion_rate", d.ingestion_rate}, {"prep_rate", d.prep_rate},
      {"fetch_rate", d.fetch_rate},         {"prep_stall_s", d.prep_stall_s},
      {"fetch_stall_s", d.fetch_stall_s},   {"prep_share", d.prep_share},
      {"prep_share_ci", d.prep_share_ci},   {"fetch_share", d.fetch_share},
      {"fetch_share_ci", d.fetch_share_ci}, {"live_wait_share_cold", d.live_wait_share},
      {"methods_agree", d.agree},           {"reconcile", d.reconcile}};
  json cache_points = json::array();
  for (const CachePoint& p : a.cache.model.points) {
    cache_points.push_back({{"cached_share", p.cached}, {"samples_per_s", p.samples_per_s}});
  }
  const CacheModel& m = a.cache.model;
  out["what_if"]["cache"] = {{"disk_read_mb_s", a.cache.disk_read_mb_s},
                             {"disk_rate_from", a.cache.disk_rate_from},
                             {"memory_mb_s", a.cache.memory_mb_s},
                             {"bytes_per_sample", a.cache.bytes_per_sample},
                             {"warm_s_per_sample", m.warm_s},
                             {"disk_extra_s_per_sample", m.disk_extra_s},
                             // null: fully overlapped (the slower of reading and the rest)
                             {"overlap_k", number_or_null(m.overlap_k)},
                             {"basis", m.basis},
                             {"points", std::move(cache_points)}};
  if (a.workers && a.workers->fit) {
    const WorkerFit& fit = *a.workers->fit;
    out["what_if"]["workers"] = {{"key", a.workers->key},
                                 {"per_worker_rate", fit.per_worker_rate},
                                 {"cores", fit.cores},
                                 {"fitted_runs", fit.fitted_runs},
                                 {"workers_to_keep_up", fit.workers_to_keep_up},
                                 {"predicted", rate_points(fit.predicted, "workers")}};
  } else if (a.workers) {
    out["what_if"]["workers"] = {{"key", a.workers->key}, {"note", a.workers->note}};
  }
  const GpuWhatIf& g = a.gpus;
  out["what_if"]["gpus_until_data_bound"] = g.gpus_until_data_bound;
  out["what_if"]["gpus"] = {{"loader_samples_per_s", g.loader_rate},
                            {"loader_samples_per_s_cold", g.loader_rate_cold},
                            {"ingestion_samples_per_s", d.ingestion_rate},
                            {"until_data_bound", g.gpus_until_data_bound},
                            {"until_data_bound_cold", g.gpus_until_data_bound_cold},
                            {"basis", g.basis},
                            {"predicted", rate_points(g.predicted, "gpus")}};
  out["findings"] = a.findings;
  out["notes"] = a.notes;
  return out;
}

// The value of a varied leg's name "warm-<key>-<value>", or nullopt.
std::optional<int> varied_value(const std::string& name, const std::string& key) {
  const std::string prefix = "warm-" + key + "-";
  if (key.empty() || name.rfind(prefix, 0) != 0) return std::nullopt;
  int value = 0;
  if (!absl::SimpleAtoi(name.substr(prefix.size()), &value) || value < 0) return std::nullopt;
  if (varied_leg_name(key, value) != name) return std::nullopt;  // "+2", "02"
  return value;
}

DifferentialAnalysis from_document(const trainscope::detail::Field& root) {
  DifferentialAnalysis a;
  a.iterations = root["iterations"].int_at_least(1);
  a.warmup = root["warmup"].int_at_least(0);
  a.batch_size = root["batch_size"].int_at_least(1);
  const trainscope::detail::Field dataset = root["dataset"];
  a.dataset.path = dataset["path"].string();
  a.dataset.residency_before = residency_from(dataset["residency_before"]);
  a.dataset.available_memory_bytes = dataset["available_memory_bytes"].unsigned_integer();

  const trainscope::detail::Field what_if = root["what_if"];
  if (std::optional<trainscope::detail::Field> workers = what_if.find("workers")) {
    WorkersWhatIf w;
    w.key = (*workers)["key"].string();
    if (std::optional<trainscope::detail::Field> note = workers->find("note")) {
      w.note = note->string();
    } else {
      WorkerFit fit;
      fit.per_worker_rate = (*workers)["per_worker_rate"].number();
      fit.cores = (*workers)["cores"].int_at_least(1);
      fit.fitted_runs = (*workers)["fitted_runs"].int_at_least(0);
      fit.workers_to_keep_up = (*workers)["workers_to_keep_up"].int_at_least(0);
      fit.predicted = rate_points_from((*workers)["predicted"], "workers");
      w.fit = std::move(fit);
    }
    a.workers = std::move(w);
  }

  const trainscope::detail::Field runs = root["runs"];
  const std::map<std::string, LegResult*> named = {{"synthetic", &a.runs.synthetic},
                                                   {"cold", &a.runs.cold},
                                                   {"warm", &a.runs.warm},
                                                   {"loader", &a.runs.loader}};
  for (const auto& [name, leg] : named) *leg = leg_from(runs[name], a.iterations);
  const std::string key = a.workers ? a.workers->key : std::string();
  for (const auto& [name, leg] : runs.members()) {
    if (named.count(name)) continue;
    const std::optional<int> value = varied_value(name, key);
    if (!value) {
      leg.fail(key.empty() ? "not a run of the analysis (a varied run needs what_if.workers)"
                           : fmt::format("not a run of the analysis (synthetic, cold, warm, "
                                         "loader or warm-{}-<value>)",
                                         key));
    }
    a.runs.varied.push_back({*value, leg_from(leg, a.iterations)});
  }
  // In the order they ran: by value, as --vary gives them mostly; the
  // document keeps no other order.
  std::stable_sort(a.runs.varied.begin(), a.runs.varied.end(),
                   [](const VariedLeg& x, const VariedLeg& y) { return x.value < y.value; });

  const trainscope::detail::Field diff = root["differential"];
  Differential& d = a.differential;
  d.synthetic = a.runs.synthetic.timing;
  d.cold = a.runs.cold.timing;
  d.warm = a.runs.warm.timing;
  d.batch_size = a.batch_size;
  d.ingestion_rate = diff["ingestion_rate"].number();
  d.prep_rate = diff["prep_rate"].number();
  d.fetch_rate = diff["fetch_rate"].number();
  d.prep_stall_s = diff["prep_stall_s"].number();
  d.fetch_stall_s = diff["fetch_stall_s"].number();
  d.prep_share = diff["prep_share"].number();
  d.prep_share_ci = diff["prep_share_ci"].number();
  d.fetch_share = diff["fetch_share"].number();
  d.fetch_share_ci = diff["fetch_share_ci"].number();
  d.live_wait_share = diff["live_wait_share_cold"].number();
  d.agree = diff["methods_agree"].boolean();
  d.reconcile = diff["reconcile"].string();

  const trainscope::detail::Field cache = what_if["cache"];
  a.cache.disk_read_mb_s = cache["disk_read_mb_s"].number();
  a.cache.disk_rate_from = cache["disk_rate_from"].string();
  a.cache.memory_mb_s = cache["memory_mb_s"].number();
  a.cache.bytes_per_sample = cache["bytes_per_sample"].number();
  CacheModel& m = a.cache.model;
  m.warm_s = cache["warm_s_per_sample"].number();
  m.disk_extra_s = cache["disk_extra_s_per_sample"].number();
  m.ingestion_s = d.ingestion_rate > 0 ? 1 / d.ingestion_rate : 0;
  m.overlap_k = cache["overlap_k"].number();
  if (std::isnan(m.overlap_k)) m.overlap_k = std::numeric_limits<double>::infinity();
  m.basis = cache["basis"].string();
  for (const trainscope::detail::Field& p : cache["points"].items()) {
    m.points.push_back({p["cached_share"].number(), p["samples_per_s"].number()});
  }

  (void)what_if["gpus_until_data_bound"].number();  // what_if.gpus.until_data_bound again
  const trainscope::detail::Field gpus = what_if["gpus"];
  GpuWhatIf& g = a.gpus;
  g.loader_rate = gpus["loader_samples_per_s"].number();
  g.loader_rate_cold = gpus["loader_samples_per_s_cold"].number();
  (void)gpus["ingestion_samples_per_s"].number();  // differential.ingestion_rate again
  g.gpus_until_data_bound = gpus["until_data_bound"].number();
  g.gpus_until_data_bound_cold = gpus["until_data_bound_cold"].number();
  g.basis = gpus["basis"].string();
  g.predicted = rate_points_from(gpus["predicted"], "gpus");

  a.findings = root["findings"].strings();
  a.notes = root["notes"].strings();
  return a;
}

}  // namespace

std::string varied_leg_name(const std::string& key, int value) {
  return fmt::format("warm-{}-{}", key, value);
}

DifferentialAnalysis conclude(DifferentialInputs in) {
  DifferentialAnalysis a;
  a.dataset = std::move(in.dataset);
  a.iterations = in.iterations;
  a.warmup = in.warmup;
  a.runs = std::move(in.runs);
  a.notes = std::move(in.notes);
  const LegResult& cold = a.runs.cold;
  a.batch_size = cold.stalls.batch_size.value_or(1);
  if (!cold.stalls.batch_size) {
    a.notes.push_back("the batch size is unknown (no tensor-like batch): rates are per batch");
  }
  const Differential d = differential(a.runs.synthetic.timing, cold.timing, a.runs.warm.timing,
                                      a.batch_size, cold.live_wait_share);
  a.differential = d;
  // Every batch handed out was read, and the one that found the limit.
  const double samples_read = static_cast<double>(a.warmup + a.iterations + 1) * a.batch_size;
  a.cache.disk_read_mb_s = cold.disk_read_mb_s;
  a.cache.disk_rate_from = cold.disk_rate_from;
  a.cache.memory_mb_s = in.memory_mb_s;
  a.cache.bytes_per_sample = cold.read_mb > 0 ? cold.read_mb * 1e6 / samples_read : 0;
  a.cache.model = cache_what_if(d, a.cache.bytes_per_sample, cold.disk_read_mb_s, in.memory_mb_s,
                                cold.residency ? cold.residency->share() : 0);
  const double n_b = static_cast<double>(a.iterations) * a.batch_size;
  std::vector<WorkerRun> worker_runs;
  for (const VariedLeg& v : a.runs.varied) {
    worker_runs.push_back({v.value, n_b / v.leg.timing.total_s, v.leg.live_wait_share});
  }
  if (!worker_runs.empty()) {
    WorkersWhatIf w;
    w.key = in.vary_key;
    absl::StatusOr<WorkerFit> fitted = worker_what_if(worker_runs, d.ingestion_rate, in.cores);
    if (fitted.ok()) {
      w.fit = *std::move(fitted);
    } else {
      w.note = std::string(fitted.status().message());
    }
    a.workers = std::move(w);
  }
  const Timing& loader = a.runs.loader.timing;
  a.gpus = gpu_what_if(d, loader.total_s > 0 ? n_b / loader.total_s : 0, a.cache.model);
  a.findings = findings_of(a, in.cores);
  return a;
}

absl::StatusOr<DifferentialAnalysis> run_differential(const DifferentialOptions& options) {
  if (absl::Status ok = check_options(options); !ok.ok()) return ok;
  absl::StatusOr<std::vector<std::string>> files = dataset_files(options.dataset);
  if (!files.ok()) return files.status();
  const std::string dir = options.dir.empty() ? default_dir() : options.dir;
  std::error_code error;
  std::filesystem::create_directories(dir + "/runs", error);
  if (error) {
    return absl::FailedPreconditionError(fmt::format("cannot create {}: {}", dir, error.message()));
  }
  DifferentialInputs in;
  in.iterations = options.iterations;
  in.warmup = options.warmup;
  in.vary_key = options.vary_key;
  // The loader alone (warm cache, no compute) gives the loader's own rate,
  // which the warm run cannot show once it keeps up with the step: the GPU what-if.
  std::vector<LegPlan> plans = {{"synthetic", kSyntheticMode, {}, &in.runs.synthetic},
                                {"cold", kColdMode, {}, &in.runs.cold},
                                {"warm", kWarmMode, {}, &in.runs.warm},
                                {"loader", kLoaderMode, {}, &in.runs.loader}};
  in.runs.varied.resize(options.vary_values.size());
  for (std::size_t i = 0; i < options.vary_values.size(); ++i) {
    const int value = options.vary_values[i];
    in.runs.varied[i].value = value;
    plans.push_back({varied_leg_name(options.vary_key, value),
                     kWarmMode,
                     {"--" + options.vary_key, std::to_string(value)},
                     &in.runs.varied[i].leg,
                     /*varied=*/true});
  }
  in.dataset.path = options.dataset;
  in.dataset.residency_before = residency(*files);
  in.dataset.available_memory_bytes = available_memory_bytes();
  const std::uint64_t available = in.dataset.available_memory_bytes;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const LegPlan& plan = plans[i];
    say(options, fmt::format("[{}/{}] {} run", i + 1, plans.size(), plan.name));
    if (plan.mode == kColdMode) {
      plan.result->residency = evict(*files);
      const double share = plan.result->residency->share();
      say(options, fmt::format("evicted {}: {} still resident", options.dataset,
                               stats::format_share(share)));
      if (share > 0.05) {
        in.notes.push_back(fmt::format(
            "{} of the dataset stayed in the page cache after eviction (pages mapped or dirty "
            "in another process, or a filesystem that keeps them): the cold run is partly warm",
            stats::format_share(share)));
      }
    } else if (plan.mode == kWarmMode || plan.mode == kLoaderMode) {
      if (available != 0 && in.dataset.residency_before.bytes > available) {
        in.notes.push_back(fmt::format(
            "the dataset ({:.0f} MB) does not fit in available memory ({:.0f} MB): the warm run "
            "is only partly warm",
            in.dataset.residency_before.bytes / 1e6, available / 1e6));
      }
      const Residency warmed = warm(*files, available);
      if (!plan.varied) plan.result->residency = warmed;
      say(options, fmt::format("read in {}: {} resident", options.dataset,
                               stats::format_share(warmed.share())));
    }
    if (absl::Status ran = run_leg(options, dir, plan); !ran.ok()) return ran;
  }
  in.memory_mb_s = memory_bandwidth_mb_s();
  in.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  DifferentialAnalysis analysis = conclude(std::move(in));
  analysis.dir = dir;
  if (absl::Status stored = write_differential(analysis); !stored.ok()) return stored;
  return analysis;
}

std::string differential_json(const DifferentialAnalysis& analysis) {
  return document(analysis).dump(1);
}

absl::Status write_differential(const DifferentialAnalysis& analysis) {
  return ::trainscope::detail::write_file_atomically(
      (std::filesystem::path(analysis.dir) / kAnalysisFileName).string(),
      differential_json(analysis));
}

absl::StatusOr<DifferentialAnalysis> parse_differential(std::string_view text,
                                                        const std::string& file) {
  return ::trainscope::detail::parse_document<DifferentialAnalysis>(text, file, "stalls analysis",
                                                                    from_document);
}

absl::StatusOr<DifferentialAnalysis> read_differential(const std::string& dir) {
  const std::string file = (std::filesystem::path(dir) / kAnalysisFileName).string();
  absl::StatusOr<std::string> text = ::trainscope::detail::read_whole_file(file);
  if (absl::IsNotFound(text.status())) {
    return absl::NotFoundError(fmt::format(
        "{}: no such file (the analysis did not finish, or the file was not copied with its "
        "runs)",
        file));
  }
  if (!text.ok()) return text.status();
  absl::StatusOr<DifferentialAnalysis> analysis = parse_differential(*text, file);
  if (analysis.ok()) analysis->dir = dir;
  return analysis;
}

std::string format_differential(const DifferentialAnalysis& a,
                                const std::vector<std::string>& command) {
  const Differential& d = a.differential;
  const LegResult& cold = a.runs.cold;
  std::string out =
      fmt::format("Data stalls of `{}` ({} iterations of {} samples after {} warm-up)\n\n",
                  fmt::join(command, " "), a.iterations, a.batch_size, a.warmup);
  out += fmt::format("  {:<22} {:>10} {:>10} {:>12}\n", "run", "time", "+-95%", "waiting");
  const auto row = [&](const std::string& name, const LegResult& leg) {
    out += fmt::format("  {:<22} {:9.3f}s {:9.3f}s {:>12}\n", name, leg.timing.total_s,
                       leg.timing.ci_half_s, stats::format_share(leg.live_wait_share));
  };
  row("synthetic", a.runs.synthetic);
  row("cold", a.runs.cold);
  row("warm", a.runs.warm);
  row("loader", a.runs.loader);
  const std::string key = a.workers ? a.workers->key : std::string();
  for (const VariedLeg& v : a.runs.varied) row(varied_leg_name(key, v.value), v.leg);
  out += fmt::format(
      "\n  ingestion {:.1f} samples/s, prep {:.1f} samples/s, fetch {}\n", d.ingestion_rate,
      d.prep_rate,
      d.fetch_rate > 0 ? fmt::format("{:.1f} samples/s", d.fetch_rate) : "not limiting");
  out += fmt::format("  the loader alone {:.1f} samples/s (warm), {:.1f} (uncached)\n",
                     a.gpus.loader_rate, a.gpus.loader_rate_cold);
  out += fmt::format("  prep stall {} +-{}, fetch stall {} +-{} of the cold run\n",
                     stats::format_share(d.prep_share), stats::format_share(d.prep_share_ci),
                     stats::format_share(d.fetch_share), stats::format_share(d.fetch_share_ci));
  out += fmt::format("  live data-wait share of the cold run {}: the methods {}\n",
                     stats::format_share(d.live_wait_share),
                     d.agree ? "agree (within 5 points)" : "disagree");
  if (!d.agree) out += fmt::format("    {}\n", d.reconcile);
  out += fmt::format("  disk {:.0f} MB/s ({}), memory {:.0f} MB/s, {:.0f} bytes per sample\n",
                     cold.disk_read_mb_s,
                     cold.disk_rate_from == "diskstats"
                         ? fmt::format("{} read {:.0f} MB in {} ms busy", cold.disk.device,
                                       cold.disk.bytes / 1e6, cold.disk.busy_ms)
                         : std::string("mean of the hardware samples"),
                     a.cache.memory_mb_s, a.cache.bytes_per_sample);
  out += "\nFindings:\n";
  for (const std::string& f : a.findings) out += fmt::format("  - {}\n", f);
  for (const std::string& n : a.notes) out += fmt::format("  note: {}\n", n);
  out += fmt::format("\nAnalysis: {}/{}\n", a.dir, kAnalysisFileName);
  return out;
}

}  // namespace trainscope::stalls
