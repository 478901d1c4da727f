// `trainscope stalls RUN_DIR` (the live data-wait share of a run) and
// `trainscope stalls --dataset PATH -- command...` (DS-Analyzer's differential
// analysis over a synthetic, a cold-cache and a warm-cache run, with what-ifs).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "cli.hpp"
#include "commands.hpp"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "trainscope/launch/launch.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/stalls/analysis.hpp"
#include "trainscope/stalls/page_cache.hpp"

namespace trainscope::cli {
namespace {

using nlohmann::json;
using namespace trainscope::stalls;

constexpr char kDescription[] =
    "With a run directory: how long the run waited for its data (the IO regions of\n"
    "`for batch in tmr.timed(loader):`), per pass over the loader and for the run,\n"
    "classed as TensorFlow's input-pipeline analyzer does (under 5% not input-bound,\n"
    "5-20% moderately, 20% or more highly), and whether the waits are spread out (a\n"
    "slow pipeline) or bunched at pass starts (worker start-up, cache misses).\n"
    "\n"
    "With --dataset and a command: DS-Analyzer's differential analysis, without\n"
    "root. The command runs four times, each a run of one analysis directory:\n"
    "synthetic (the timed loader hands out its first batch again and again: pure\n"
    "compute), cold (the dataset's files evicted from the page cache with\n"
    "posix_fadvise, checked with mincore), warm (the files read in first) and\n"
    "loader (warm, the loader alone: batches taken as soon as they are ready, none\n"
    "handed to the loop); each stops cleanly after --warmup + --iterations\n"
    "batches. Then prep and fetch\n"
    "stalls with confidence intervals, the rates, and what-ifs on cache size,\n"
    "loader workers (--vary num_workers=2,4: more warm runs, the value passed as\n"
    "`--num_workers 2`) and GPUs per node.\n"
    "\n"
    "examples:\n"
    "  trainscope stalls trainscope-runs/<run-id>\n"
    "  trainscope stalls --dataset /data/imagenet/train --iterations 100 -- python train.py\n"
    "  trainscope stalls --dataset data/ --vary num_workers=1,2,4 --json -- python train.py\n";

struct Args {
  std::vector<std::string> positionals;
  std::vector<std::string> command;
  std::optional<std::string> dataset;
  int iterations = 50;
  int warmup = 5;
  std::string vary_key;
  std::vector<int> vary_values;
  std::string dir;
  bool json = false;
};

int parse_count(const std::string& flag, const std::string& value, int minimum) {
  int n = 0;
  if (!absl::SimpleAtoi(value, &n) || n < minimum) {
    bad_value(fmt::format("{} needs a whole number >= {}, got '{}'", flag, minimum, value));
  }
  return n;
}

std::optional<Args> parse(const std::vector<std::string>& raw, int* exit_code) {
  Args args;
  std::vector<std::string> options = raw;
  if (auto dash = std::find(raw.begin(), raw.end(), "--"); dash != raw.end()) {
    options.assign(raw.begin(), dash);
    args.command.assign(dash + 1, raw.end());
  }
  CommandLine line({"stalls",
                    "trainscope stalls RUN_DIR [--json]\n"
                    "       trainscope stalls --dataset PATH [options] -- command...",
                    kDescription, ""});
  line.add_value("--dataset", "PATH", "the files the loader reads (a directory or a file)",
                 &args.dataset);
  line.add_value(
      "--iterations", "N", "measured iterations per run (default 50)",
      [&](const std::string& v) { args.iterations = parse_count("--iterations", v, 1); });
  line.add_value("--warmup", "W", "iterations before the measured ones (default 5)",
                 [&](const std::string& v) { args.warmup = parse_count("--warmup", v, 0); });
  line.add_value(
      "--vary", "KEY=V1,V2",
      "more warm runs, one per value, with `--KEY V` appended to the command\n"
      "(loader workers: the what-if on CPU count)",
      [&](const std::string& v) {
        const std::size_t eq = v.find('=');
        if (eq == std::string::npos || eq == 0) {
          bad_value("--vary needs KEY=V1,V2 (e.g. num_workers=2,4), got '" + v + "'");
        }
        args.vary_key = v.substr(0, eq);
        args.vary_values.clear();
        for (absl::string_view item : absl::StrSplit(v.substr(eq + 1), ',')) {
          args.vary_values.push_back(parse_count("--vary " + args.vary_key, std::string(item), 0));
        }
      });
  line.add_value("--dir", "DIR",
                 "the analysis directory (default ./trainscope-stalls/<time>): its runs\n"
                 "go under DIR/runs/, the analysis into DIR/stalls.json",
                 &args.dir);
  line.add_flag("--json", "print the analysis as JSON", &args.json);
  line.add_positionals("RUN_DIR", &args.positionals, /*options_end_at_first=*/false);
  if (std::optional<int> done = line.parse(options)) {
    *exit_code = *done;
    return std::nullopt;
  }
  const auto usage = [&](const std::string& message) {
    *exit_code = line.usage_error(message);
    return std::nullopt;
  };
  if (args.dataset) {
    if (args.command.empty()) return usage("--dataset needs a command after `--`");
    if (!args.positionals.empty()) return usage("give either RUN_DIR or --dataset, not both");
    if (args.iterations < args.warmup) {
      return usage(
          fmt::format("--iterations {} is smaller than --warmup {}: measure at least as "
                      "many iterations as are thrown away",
                      args.iterations, args.warmup));
    }
  } else {
    if (args.positionals.size() != 1) return usage("give one RUN_DIR, or --dataset and a command");
    if (!args.command.empty()) return usage("a command needs --dataset");
  }
  return args;
}

std::string pct(double share) { return fmt::format("{:.1f}%", 100 * share); }

json run_json(const RunStalls& r) { return json::parse(run_stalls_json(r)); }

std::string run_text(const RunStalls& r) {
  std::string out =
      fmt::format("{} ({}){}\n", r.run_dir, r.status,
                  r.ranks.size() > 1 ? fmt::format(", passes of rank {}", r.rank) : std::string());
  out += fmt::format("  {:>5} {:>10} {:>10} {:>8} {:>8} {:>10} {:>10} {:>9}\n", "pass", "time",
                     "waiting", "share", "batches", "p50 wait", "p95 wait", "at start");
  const auto row = [&](const std::string& name, const PassStalls& p) {
    out += fmt::format("  {:>5} {:>9.3f}s {:>9.3f}s {:>8} {:>8} {:>8.2f}ms {:>8.2f}ms {:>9}\n",
                       name, p.wall_s, p.wait_s, pct(p.share), p.batches, p.wait_p50_s * 1e3,
                       p.wait_p95_s * 1e3, pct(p.startup_wait_share));
  };
  for (const PassStalls& p : r.passes) row(std::to_string(p.index), p);
  row("run", r.total);
  out += fmt::format("  input-bound: {} ({} of the time waiting for data); waits: {}\n",
                     input_bound_class(r.total.share), pct(r.total.share), r.pattern);
  if (r.ranks.size() > 1) {
    // In a data-parallel job every step waits for the rank that waits longest.
    const RankStalls* most = &r.ranks.front();
    std::vector<std::string> shares;
    for (const RankStalls& k : r.ranks) {
      shares.push_back(fmt::format("rank {} {}", k.rank, pct(k.total.share)));
      if (k.total.share > most->total.share) most = &k;
    }
    out += fmt::format("  per rank: {}", fmt::join(shares, ", "));
    out += fmt::format("; rank {} waits most ({} input-bound)\n", most->rank,
                       input_bound_class(most->total.share));
  }
  return out;
}

int analyze_one(const Args& args) {
  absl::StatusOr<RunStalls> stalls = analyze_run(args.positionals.front());
  if (!stalls.ok()) {
    std::fprintf(stderr, "trainscope stalls: %s\n", std::string(stalls.status().message()).c_str());
    return kExitFailed;
  }
  if (args.json) {
    std::printf("%s\n", run_json(*stalls).dump(1).c_str());
  } else {
    std::printf("%s", run_text(*stalls).c_str());
  }
  return kExitOk;
}

// --- the differential analysis ----------------------------------------------

struct Leg {
  std::string name;  // synthetic, cold, warm, warm-<key>-<value>
  std::string mode;  // TRAINSCOPE_STALLS_MODE
  std::vector<std::string> extra_args;
  std::optional<int> vary_value;
  std::string run_dir;
  RunStalls stalls;
  Timing timing;
  double live_share = 0;
  Residency residency;
  double disk_read_mb_s = 0;   // the device's read rate while busy, else the samples' mean
  std::string disk_rate_from;  // "diskstats" or "samples"
  DiskReads disk;              // what the busiest device read during the run
  double read_mb = 0;          // by the process tree
  double cpu_pct = 0;          // of the process tree, mean
};

std::string default_dir() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char name[32];
  std::strftime(name, sizeof name, "%Y%m%d-%H%M%S", &tm);
  return std::string("trainscope-stalls/") + name;
}

void read_hardware(Leg* leg) {
  absl::StatusOr<RunReader> reader = RunReader::Open(leg->run_dir);
  if (!reader.ok()) return;
  double disk_sum = 0, cpu_sum = 0;
  int disk_n = 0, cpu_n = 0;
  for (const std::string& host : reader->hosts()) {
    absl::StatusOr<Chunk<MetricPoint>> points = reader->read_host_metrics(host);
    if (!points.ok()) continue;
    for (const MetricPoint& p : points->rows) {
      if (p.key == "system/disk.read_mb_s" && p.value > 0) {
        disk_sum += p.value;
        ++disk_n;
      } else if (p.key == "system/proc.read_mb") {
        leg->read_mb = std::max(leg->read_mb, p.value);
      } else if (p.key == "system/proc.cpu_pct") {
        cpu_sum += p.value;
        ++cpu_n;
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
  leg->cpu_pct = cpu_n ? cpu_sum / cpu_n : 0;
}

// Runs one leg; an error message when it did not give W + N iterations.
std::optional<std::string> run_leg(const Args& args, const std::string& dir, Leg* leg) {
  leg->run_dir = dir + "/runs/" + leg->name;
  ::setenv("TRAINSCOPE_STALLS_MODE", leg->mode.c_str(), 1);
  ::setenv("TRAINSCOPE_STALLS_ITERATIONS", std::to_string(args.iterations).c_str(), 1);
  ::setenv("TRAINSCOPE_STALLS_WARMUP", std::to_string(args.warmup).c_str(), 1);
  LaunchOptions options;
  options.command = args.command;
  options.command.insert(options.command.end(), leg->extra_args.begin(), leg->extra_args.end());
  options.run.dir = leg->run_dir;
  options.run.name = leg->name;
  options.run.tags["trainscope.stalls.leg"] = leg->name;
  options.run.tags["trainscope.stalls.analysis"] = dir;
  options.sample_interval = absl::Milliseconds(250);
  options.tee = false;
  options.join_job_from_environment = false;
  options.die_with_parent = true;
  const auto began = std::chrono::steady_clock::now();
  const DiskReadCounter disk;
  absl::StatusOr<LaunchResult> result = launch(std::move(options));
  leg->disk = disk.read_since();
  ::unsetenv("TRAINSCOPE_STALLS_MODE");
  ::unsetenv("TRAINSCOPE_STALLS_ITERATIONS");
  ::unsetenv("TRAINSCOPE_STALLS_WARMUP");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  if (!result.ok()) return std::string(result.status().message());
  std::fprintf(stderr, "trainscope stalls: %-12s run %s, exit %d, %.1f s\n", leg->name.c_str(),
               std::string(run_status_name(result->status)).c_str(), result->exit_code, seconds);
  if (result->exit_code != 0) {
    return fmt::format("the {} run failed (exit {}): see {}/stderr.log", leg->name,
                       result->exit_code, leg->run_dir);
  }
  absl::StatusOr<RunStalls> stalls = analyze_run(leg->run_dir);
  if (!stalls.ok() || stalls->iteration_s.empty()) {
    return fmt::format(
        "the {} run recorded no timed loader ({}): the command must iterate its data with "
        "`for batch in tmr.timed(loader):` (trainscope.Timer or CPUGPUTimer), which also ends "
        "it after the measured iterations",
        leg->name, stalls.ok() ? "no iteration rows" : std::string(stalls.status().message()));
  }
  leg->stalls = *std::move(stalls);
  absl::StatusOr<Timing> timing =
      measured_time(leg->stalls.iteration_s, args.warmup, args.iterations);
  if (!timing.ok()) {
    return fmt::format(
        "the {} run ended early: {} (does the loader hold enough batches, or "
        "does the command stop by itself?)",
        leg->name, std::string(timing.status().message()));
  }
  leg->timing = *timing;
  leg->live_share = measured_wait_share(leg->stalls, args.warmup, args.iterations);
  read_hardware(leg);
  return std::nullopt;
}

json residency_json(const Residency& r) {
  return {{"files", r.files},
          {"bytes", r.bytes},
          {"resident_bytes", r.resident_bytes},
          {"resident_share", r.share()}};
}

int analyze_differential(const Args& args) {
  absl::StatusOr<std::vector<std::string>> files = dataset_files(*args.dataset);
  if (!files.ok()) {
    std::fprintf(stderr, "trainscope stalls: %s\n", std::string(files.status().message()).c_str());
    return kExitUsage;
  }
  const std::string dir = args.dir.empty() ? default_dir() : args.dir;
  std::error_code error;
  std::filesystem::create_directories(dir + "/runs", error);
  if (error) {
    std::fprintf(stderr, "trainscope stalls: cannot create %s: %s\n", dir.c_str(),
                 error.message().c_str());
    return kExitFailed;
  }
  // The loader alone (warm cache, no compute) gives the loader's own rate,
  // which the warm run cannot show once it keeps up with the step: the GPU what-if.
  std::vector<Leg> legs = {
      {"synthetic", "synthetic"}, {"cold", "cold"}, {"warm", "warm"}, {"loader", "loader"}};
  for (int value : args.vary_values) {
    Leg leg{fmt::format("warm-{}-{}", args.vary_key, value), "warm"};
    leg.extra_args = {"--" + args.vary_key, std::to_string(value)};
    leg.vary_value = value;
    legs.push_back(leg);
  }
  std::vector<std::string> notes;
  const Residency dataset = residency(*files);
  const std::uint64_t available = available_memory_bytes();
  for (std::size_t i = 0; i < legs.size(); ++i) {
    Leg& leg = legs[i];
    std::fprintf(stderr, "trainscope stalls: [%zu/%zu] %s run\n", i + 1, legs.size(),
                 leg.name.c_str());
    if (leg.mode == "cold") {
      leg.residency = evict(*files);
      std::fprintf(stderr, "trainscope stalls: evicted %s: %s still resident\n",
                   args.dataset->c_str(), pct(leg.residency.share()).c_str());
      if (leg.residency.share() > 0.05) {
        notes.push_back(fmt::format(
            "{} of the dataset stayed in the page cache after eviction (pages mapped or dirty "
            "in another process, or a filesystem that keeps them): the cold run is partly warm",
            pct(leg.residency.share())));
      }
    } else if (leg.mode == "warm" || leg.mode == "loader") {
      if (available != 0 && dataset.bytes > available) {
        notes.push_back(fmt::format(
            "the dataset ({:.0f} MB) does not fit in available memory ({:.0f} MB): the warm run "
            "is only partly warm",
            dataset.bytes / 1e6, available / 1e6));
      }
      leg.residency = warm(*files, available);
      std::fprintf(stderr, "trainscope stalls: read in %s: %s resident\n", args.dataset->c_str(),
                   pct(leg.residency.share()).c_str());
    }
    if (std::optional<std::string> failed = run_leg(args, dir, &leg)) {
      std::fprintf(stderr, "trainscope stalls: %s\n", failed->c_str());
      return kExitFailed;
    }
  }
  const Leg& synthetic = legs[0];
  const Leg& cold = legs[1];
  const Leg& warm_leg = legs[2];
  const Leg& loader_leg = legs[3];
  const int batch_size = cold.stalls.batch_size.value_or(1);
  if (!cold.stalls.batch_size) {
    notes.push_back("the batch size is unknown (no tensor-like batch): rates are per batch");
  }
  const Differential d =
      differential(synthetic.timing, cold.timing, warm_leg.timing, batch_size, cold.live_share);
  const double memory_mb_s = memory_bandwidth_mb_s();
  const double samples_read = static_cast<double>(args.warmup + args.iterations + 1) * batch_size;
  const double bytes_per_sample = cold.read_mb > 0 ? cold.read_mb * 1e6 / samples_read : 0;
  const CacheModel cache_model =
      cache_what_if(d, bytes_per_sample, cold.disk_read_mb_s, memory_mb_s, cold.residency.share());
  const std::vector<CachePoint>& cache = cache_model.points;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<WorkerRun> worker_runs;
  for (const Leg& leg : legs) {
    if (!leg.vary_value) continue;
    worker_runs.push_back({*leg.vary_value,
                           static_cast<double>(args.iterations) * batch_size / leg.timing.total_s,
                           leg.live_share});
  }
  std::optional<WorkerFit> fit;
  std::string fit_note;
  if (!worker_runs.empty()) {
    absl::StatusOr<WorkerFit> fitted = worker_what_if(worker_runs, d.ingestion_rate, cores);
    if (fitted.ok()) {
      fit = *fitted;
    } else {
      fit_note = std::string(fitted.status().message());
    }
  }
  const double loader_rate =
      loader_leg.timing.total_s > 0
          ? static_cast<double>(args.iterations) * batch_size / loader_leg.timing.total_s
          : 0;
  const GpuWhatIf gpu = gpu_what_if(d, loader_rate, cache_model);
  const double gpus = gpu.gpus_until_data_bound;

  // Findings, each with the recommendation the what-ifs support.
  std::vector<std::string> findings;
  if (d.prep_share >= 0.05) {
    std::string finding = fmt::format(
        "prep-bound: {} of the cold run's time (+-{}) waits for "
        "batches to be prepared",
        pct(d.prep_share), pct(d.prep_share_ci));
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
        pct(d.fetch_share), pct(d.fetch_share_ci));
    for (const CachePoint& p : cache) {
      if (p.samples_per_s >= 0.95 * std::min(d.ingestion_rate, d.prep_rate)) {
        finding += fmt::format("; caching {} of the dataset would remove it", pct(p.cached));
        break;
      }
    }
    findings.push_back(finding);
  }
  if (findings.empty()) {
    findings.push_back(fmt::format("not data-bound: prep {} and fetch {} of the time",
                                   pct(d.prep_share), pct(d.fetch_share)));
  }
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

  json out;
  out["dataset"] = {{"path", *args.dataset},
                    {"residency_before", residency_json(dataset)},
                    {"available_memory_bytes", available}};
  out["iterations"] = args.iterations;
  out["warmup"] = args.warmup;
  out["batch_size"] = batch_size;
  json runs = json::object();
  for (const Leg& leg : legs) {
    runs[leg.name] = {{"run_dir", leg.run_dir},
                      {"time_s", leg.timing.total_s},
                      {"time_ci_s", leg.timing.ci_half_s},
                      {"live_wait_share", leg.live_share},
                      {"disk_read_mb_s", leg.disk_read_mb_s},
                      {"disk_rate_from", leg.disk_rate_from},
                      {"disk",
                       {{"device", leg.disk.device},
                        {"bytes_read", leg.disk.bytes},
                        {"busy_ms", leg.disk.busy_ms}}},
                      {"read_mb", leg.read_mb},
                      {"cpu_pct", leg.cpu_pct},
                      {"analysis", run_json(leg.stalls)}};
    if (leg.mode != "synthetic" && leg.name.rfind("warm-", 0) != 0) {
      runs[leg.name]["residency"] = residency_json(leg.residency);
    }
  }
  out["runs"] = runs;
  out["differential"] = {
      {"ingestion_rate", d.ingestion_rate}, {"prep_rate", d.prep_rate},
      {"fetch_rate", d.fetch_rate},         {"prep_stall_s", d.prep_stall_s},
      {"fetch_stall_s", d.fetch_stall_s},   {"prep_share", d.prep_share},
      {"prep_share_ci", d.prep_share_ci},   {"fetch_share", d.fetch_share},
      {"fetch_share_ci", d.fetch_share_ci}, {"live_wait_share_cold", d.live_wait_share},
      {"methods_agree", d.agree},           {"reconcile", d.reconcile}};
  json cache_json = json::array();
  for (const CachePoint& p : cache) {
    cache_json.push_back({{"cached_share", p.cached}, {"samples_per_s", p.samples_per_s}});
  }
  out["what_if"]["cache"] = {
      {"disk_read_mb_s", cold.disk_read_mb_s},
      {"disk_rate_from", cold.disk_rate_from},
      {"memory_mb_s", memory_mb_s},
      {"bytes_per_sample", bytes_per_sample},
      {"warm_s_per_sample", cache_model.warm_s},
      {"disk_extra_s_per_sample", cache_model.disk_extra_s},
      // null: fully overlapped (the slower of reading and the rest)
      {"overlap_k",
       std::isinf(cache_model.overlap_k) ? json(nullptr) : json(cache_model.overlap_k)},
      {"basis", cache_model.basis},
      {"points", cache_json}};
  if (fit) {
    json predicted = json::array();
    for (const auto& [w, rate] : fit->predicted) {
      predicted.push_back({{"workers", w}, {"samples_per_s", rate}});
    }
    out["what_if"]["workers"] = {{"key", args.vary_key},
                                 {"per_worker_rate", fit->per_worker_rate},
                                 {"cores", fit->cores},
                                 {"fitted_runs", fit->fitted_runs},
                                 {"workers_to_keep_up", fit->workers_to_keep_up},
                                 {"predicted", predicted}};
  } else if (!fit_note.empty()) {
    out["what_if"]["workers"] = {{"key", args.vary_key}, {"note", fit_note}};
  }
  out["what_if"]["gpus_until_data_bound"] = gpus;
  json gpu_points = json::array();
  for (const auto& [k, rate] : gpu.predicted) {
    gpu_points.push_back({{"gpus", k}, {"samples_per_s", rate}});
  }
  out["what_if"]["gpus"] = {{"loader_samples_per_s", gpu.loader_rate},
                            {"loader_samples_per_s_cold", gpu.loader_rate_cold},
                            {"ingestion_samples_per_s", d.ingestion_rate},
                            {"until_data_bound", gpu.gpus_until_data_bound},
                            {"until_data_bound_cold", gpu.gpus_until_data_bound_cold},
                            {"basis", gpu.basis},
                            {"predicted", gpu_points}};
  out["findings"] = findings;
  out["notes"] = notes;
  const std::string text_json = out.dump(1);
  if (absl::Status stored = store_analysis(dir, text_json); !stored.ok()) {
    std::fprintf(stderr, "trainscope stalls: %s\n", std::string(stored.message()).c_str());
    return kExitFailed;
  }
  if (args.json) {
    std::printf("%s\n", text_json.c_str());
    return kExitOk;
  }
  std::printf("Data stalls of `%s` (%d iterations of %d samples after %d warm-up)\n\n",
              fmt::format("{}", fmt::join(args.command, " ")).c_str(), args.iterations, batch_size,
              args.warmup);
  std::printf("  %-22s %10s %10s %12s\n", "run", "time", "+-95%", "waiting");
  for (const Leg& leg : legs) {
    std::printf("  %-22s %9.3fs %9.3fs %12s\n", leg.name.c_str(), leg.timing.total_s,
                leg.timing.ci_half_s, pct(leg.live_share).c_str());
  }
  std::printf(
      "\n  ingestion %.1f samples/s, prep %.1f samples/s, fetch %s\n", d.ingestion_rate,
      d.prep_rate,
      d.fetch_rate > 0 ? fmt::format("{:.1f} samples/s", d.fetch_rate).c_str() : "not limiting");
  std::printf("  the loader alone %.1f samples/s (warm), %.1f (uncached)\n", gpu.loader_rate,
              gpu.loader_rate_cold);
  std::printf("  prep stall %s +-%s, fetch stall %s +-%s of the cold run\n",
              pct(d.prep_share).c_str(), pct(d.prep_share_ci).c_str(), pct(d.fetch_share).c_str(),
              pct(d.fetch_share_ci).c_str());
  std::printf("  live data-wait share of the cold run %s: the methods %s\n",
              pct(d.live_wait_share).c_str(), d.agree ? "agree (within 5 points)" : "disagree");
  if (!d.agree) std::printf("    %s\n", d.reconcile.c_str());
  std::printf("  disk %.0f MB/s (%s), memory %.0f MB/s, %.0f bytes per sample\n",
              cold.disk_read_mb_s,
              cold.disk_rate_from == "diskstats"
                  ? fmt::format("{} read {:.0f} MB in {} ms busy", cold.disk.device,
                                cold.disk.bytes / 1e6, cold.disk.busy_ms)
                        .c_str()
                  : "mean of the hardware samples",
              memory_mb_s, bytes_per_sample);
  std::printf("\nFindings:\n");
  for (const std::string& f : findings) std::printf("  - %s\n", f.c_str());
  for (const std::string& n : notes) std::printf("  note: %s\n", n.c_str());
  std::printf("\nAnalysis: %s/stalls.json\n", dir.c_str());
  return kExitOk;
}

}  // namespace

int stalls_command(const std::vector<std::string>& raw_args) {
  int exit_code = kExitOk;
  const std::optional<Args> args = parse(raw_args, &exit_code);
  if (!args) return exit_code;
  return args->dataset ? analyze_differential(*args) : analyze_one(*args);
}

}  // namespace trainscope::cli
