// A side of a comparison from what the user names: runs, globs, folders of
// runs, a filter over a root, or a saved comparison.
#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/files.hpp"
#include "compare/side_data.hpp"
#include "fmt/format.h"
#include "trainscope/common/errors.hpp"
#include "trainscope/compare/compare.hpp"
#include "trainscope/run/environment_record.hpp"
#include "trainscope/run/run_check.hpp"
#include "trainscope/run/run_dirs.hpp"
#include "trainscope/run/run_files.hpp"
#include "trainscope/run/run_filter.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/run/step_work.hpp"
#include "trainscope/steps/ledger.hpp"
#include "trainscope/steps/steps.hpp"

namespace trainscope::compare {
namespace {

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

struct RegionKey {
  std::string key;
  Device device;
  bool operator<(const RegionKey& o) const {
    return std::tie(key, device) < std::tie(o.key, o.device);
  }
};

// Per occurrence the slowest rank's value (the ranks truncated to the shortest),
// or the chosen rank's.
std::vector<double> combine_ranks(const std::map<std::uint32_t, std::vector<double>>& by_rank,
                                  const std::optional<std::uint32_t>& rank) {
  if (rank) {
    auto it = by_rank.find(*rank);
    return it == by_rank.end() ? std::vector<double>{} : it->second;
  }
  if (by_rank.empty()) return {};
  if (by_rank.size() == 1) return by_rank.begin()->second;
  std::size_t n = std::numeric_limits<std::size_t>::max();
  for (const auto& [r, v] : by_rank) n = std::min(n, v.size());
  std::vector<double> out(n, 0.0);
  for (const auto& [r, v] : by_rank)
    for (std::size_t i = 0; i < n; ++i) out[i] = std::max(out[i], v[i]);
  return out;
}

// Package pins and the GPU driver's versions: what the software warning compares.
std::vector<std::string> packages_of(const RunReader& reader, const EnvironmentRecord& env) {
  std::vector<std::string> out;
  if (!env.driver_version.empty()) out.push_back("driver_version==" + env.driver_version);
  if (!env.cuda_version.empty()) out.push_back("cuda_version==" + env.cuda_version);
  if (!env.pip_freeze.empty()) {
    absl::StatusOr<std::string> text = reader.read_run_relative_file(env.pip_freeze);
    if (text.ok()) {
      for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipWhitespace()))
        out.emplace_back(line.data(), line.size());
    } else if (!absl::IsNotFound(text.status())) {
      warn(std::string(text.status().message()));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// One environment per launcher (several hosts: each its own); a run written
// before launchers had their own records has the one, shared. A damaged one
// is said and left out (the comparison does not need it).
std::vector<EnvironmentRecord> environments_of(const RunReader& reader) {
  std::vector<EnvironmentRecord> out;
  auto take = [&out](absl::StatusOr<EnvironmentRecord> env) {
    if (env.ok()) {
      out.push_back(*std::move(env));
    } else if (!absl::IsNotFound(env.status())) {
      warn(std::string(env.status().message()));
    }
  };
  for (const LauncherState& launcher : reader.launchers())
    take(reader.environment_record(launcher));
  if (out.empty()) take(reader.environment_record());
  return out;
}

// Reads one run: its description and every series it has.
absl::StatusOr<RunData> read_run(const std::string& dir, const GatherOptions& options) {
  absl::StatusOr<RunReader> opened = RunReader::Open(dir);
  if (!opened.ok()) return opened.status();
  const RunReader& reader = *opened;
  // Lost region rows make the run unusable; a file cut short is said (run_check.hpp).
  absl::StatusOr<std::vector<RunProblem>> problems = check_run(reader);
  if (!problems.ok()) return problems.status();
  if (absl::Status lost = run_problems_error(*problems); !lost.ok()) return lost;
  for (const std::string& warning : run_problem_warnings(*problems)) warn(warning);
  RunData data;
  SideRun& run = data.run;
  run.dir = dir;
  run.id = reader.info().id;
  run.name = reader.info().name;
  run.status = reader.info().status;
  run.params = reader.info().params;
  constexpr std::string_view kCallers = "trainscope.auto.callers.";
  for (const auto& [tag, value] : reader.info().tags) {
    if (tag.rfind(kCallers, 0) == 0) run.key_callers[tag.substr(kCallers.size())] = value;
    if (tag == steps::kLayerBackwardEveryTag) {
      run.layer_backward_every = steps::sampled_every("layer/x/backward", value);
    }
  }

  const std::vector<EnvironmentRecord> envs = environments_of(reader);
  std::vector<std::string> hardware;  // each kind of host once, in launcher order
  for (const EnvironmentRecord& env : envs) {
    const std::string described = env.hardware();
    if (!described.empty() &&
        std::find(hardware.begin(), hardware.end(), described) == hardware.end())
      hardware.push_back(described);
    std::vector<std::string> packages = packages_of(reader, env);
    run.packages.insert(run.packages.end(), packages.begin(), packages.end());
  }
  run.hardware = absl::StrJoin(hardware, "; ");
  std::sort(run.packages.begin(), run.packages.end());
  run.packages.erase(std::unique(run.packages.begin(), run.packages.end()), run.packages.end());

  // The steps, their data wait, the keys' per-step sums and the host load:
  // the steps room's, as every view has them (docs/steps.md).
  absl::StatusOr<steps::RunSteps> stepped = steps::read_steps(reader);
  if (!stepped.ok()) return stepped.status();
  // Per key, per rank: the key's time per step (a key called twice a step is
  // one value), rows in no step each alone, in the order they ran.
  std::map<RegionKey, std::map<std::uint32_t, std::vector<std::pair<std::int64_t, double>>>>
      regions;
  std::map<std::uint32_t, std::vector<double>> rates, wait_shares, gpu_busy, less_wait;
  // comm, comm_exposed, sync: seconds per step, where the rank measured them.
  constexpr std::array<std::pair<steps::Phase, const char*>, 3> kTimedPhases = {
      {{steps::Phase::kComm, kComm},
       {steps::Phase::kCommExposed, kCommExposed},
       {steps::Phase::kSync, kSync}}};
  std::array<std::map<std::uint32_t, std::vector<double>>, 3> phase_times;
  std::int64_t first_ns = std::numeric_limits<std::int64_t>::max(), last_ns = 0;
  for (const steps::RankSteps& r : stepped->ranks) {
    auto add = [&](const steps::KeySum& k) {
      const auto& [name, device] = stepped->keys[k.key];
      regions[RegionKey{name, device}][r.rank].emplace_back(k.start_ns, k.seconds);
    };
    for (const steps::KeySum& k : r.unstepped) add(k);
    for (const std::vector<steps::KeySum>& sums : r.key_sums)
      for (const steps::KeySum& k : sums) add(k);
    if (r.step_key.empty() || r.history.empty()) continue;
    if (data.step_key.empty()) data.step_key = r.step_key;
    if (std::vector<double> busy = r.gpu_busy_shares(); !busy.empty())
      gpu_busy[r.rank] = std::move(busy);
    const bool waits = r.cpu_measured[static_cast<std::size_t>(steps::Phase::kDataWait)];
    // The step key's time per step less the step thread's run-queue wait (the
    // key sums are per step of history).
    if (r.cpu_wait_measured && r.key_sums.size() == r.history.size()) {
      for (std::size_t i = 0; i < r.history.size(); ++i) {
        const steps::Step& s = r.history[i];
        if (!(s.period_s > 0)) continue;
        for (const steps::KeySum& k : r.key_sums[i])
          if (stepped->keys[k.key].first == r.step_key &&
              stepped->keys[k.key].second == Device::kCPU)
            less_wait[r.rank].push_back(std::max(0.0, k.seconds - s.cpu_wait_s));
      }
    }
    for (const steps::Step& s : r.history) {
      if (!(s.period_s > 0)) continue;
      rates[r.rank].push_back(1 / s.period_s);
      if (waits) wait_shares[r.rank].push_back(std::min(1.0, s.data_wait_s() / s.period_s));
      for (std::size_t i = 0; i < kTimedPhases.size(); ++i) {
        const auto p = static_cast<std::size_t>(kTimedPhases[i].first);
        if (r.cpu_measured[p]) phase_times[i][r.rank].push_back(s.cpu_s[p] / s.steps);
      }
    }
    first_ns = std::min(first_ns, r.history.front().start_ns);
    last_ns = std::max(last_ns, r.history.back().start_ns +
                                    static_cast<std::int64_t>(r.history.back().period_s * 1e9));
  }
  for (auto& [key, by_rank] : regions) {
    std::map<std::uint32_t, std::vector<double>> values_by_rank;
    for (auto& [rank, values] : by_rank) {
      std::stable_sort(values.begin(), values.end(),
                       [](const auto& x, const auto& y) { return x.first < y.first; });
      std::vector<double>& out = values_by_rank[rank];
      for (const auto& v : values) out.push_back(v.second);
    }
    std::vector<double> values = combine_ranks(values_by_rank, options.rank);
    if (!values.empty())
      data.series[SeriesId{SeriesKind::kRegion, key.key, std::string(device_name(key.device))}] =
          std::move(values);
  }
  // The step: throughput (steps/s, the inverse of the period) and the data
  // wait over the period, per step.
  if (std::vector<double> rate = combine_ranks(rates, options.rank); !rate.empty())
    data.series[SeriesId{SeriesKind::kMetric, kThroughput, ""}] = std::move(rate);
  if (std::vector<double> wait = combine_ranks(wait_shares, options.rank); !wait.empty())
    data.series[SeriesId{SeriesKind::kMetric, kDataWait, ""}] = std::move(wait);
  if (std::vector<double> busy = combine_ranks(gpu_busy, options.rank); !busy.empty())
    data.series[SeriesId{SeriesKind::kMetric, kGpuBusy, ""}] = std::move(busy);
  if (std::vector<double> w = combine_ranks(less_wait, options.rank); !w.empty())
    data.series[SeriesId{SeriesKind::kMetric, kStepLessWait, ""}] = std::move(w);
  // Tokens per second of each step with work (the ledger's work/tokens, docs/ledger.md).
  // And the MFU of each step with work (the ledger's, less the counted step).
  std::map<std::uint32_t, std::vector<double>> token_rates, mfus;
  const steps::MfuBasis mfu_basis = steps::mfu_basis(stepped->info);
  for (const steps::RankSteps& r : stepped->ranks) {
    if (r.history.empty()) continue;
    absl::StatusOr<Chunk<MetricPoint>> points = reader.read_metrics(r.rank);
    if (!points.ok()) continue;
    std::map<std::int64_t, double> tokens;
    std::set<std::int64_t> worked;
    for (const MetricPoint& p : points->rows) {
      if (p.key == kStepTokensMetric) tokens[p.step] += p.value;
      if (p.key == kStepTokensMetric || p.key == kStepSamplesMetric) worked.insert(p.step);
    }
    for (const steps::Step& s : r.history) {
      auto it = tokens.find(s.step);
      if (it != tokens.end() && s.steps == 1 && s.period_s > 0)
        token_rates[r.rank].push_back(it->second / s.period_s);
      if (worked.count(s.step))
        if (const double mfu = mfu_basis.step_mfu(s); std::isfinite(mfu))
          mfus[r.rank].push_back(mfu);
    }
  }
  if (std::vector<double> rate = combine_ranks(token_rates, options.rank); !rate.empty())
    data.series[SeriesId{SeriesKind::kMetric, kTokensPerSecond, ""}] = std::move(rate);
  if (std::vector<double> mfu = combine_ranks(mfus, options.rank); !mfu.empty())
    data.series[SeriesId{SeriesKind::kMetric, kMfu, ""}] = std::move(mfu);
  for (std::size_t i = 0; i < kTimedPhases.size(); ++i) {
    if (std::vector<double> v = combine_ranks(phase_times[i], options.rank); !v.empty())
      data.series[SeriesId{SeriesKind::kMetric, kTimedPhases[i].second, ""}] = std::move(v);
  }

  // Metrics the user asked for: the ranks' own (the chosen rank's, else the
  // lowest rank's that has it), else the hosts'.
  std::set<std::string> wanted(options.metrics.begin(), options.metrics.end());
  wanted.erase(kThroughput);
  wanted.erase(kDataWait);
  wanted.erase(kGpuBusy);
  wanted.erase(kStepLessWait);
  wanted.erase(kTokensPerSecond);
  wanted.erase(kMfu);
  for (const auto& [phase, name] : kTimedPhases) wanted.erase(name);
  std::map<std::string, std::map<std::uint32_t, std::vector<MetricPoint>>> rank_points;
  if (!wanted.empty()) {
    for (const RankState& state : reader.ranks()) {
      absl::StatusOr<Chunk<MetricPoint>> points = reader.read_metrics(state.rank.rank);
      if (!points.ok()) {
        if (absl::IsNotFound(points.status())) continue;
        return points.status();
      }
      for (MetricPoint& p : points->rows)
        if (wanted.count(p.key)) rank_points[p.key][state.rank.rank].push_back(std::move(p));
    }
  }
  // The wanted host metrics.
  std::map<std::string, std::vector<MetricPoint>> host_points;
  if (!wanted.empty()) {
    for (const std::string& host : reader.hosts()) {
      absl::StatusOr<Chunk<MetricPoint>> points = reader.read_host_metrics(host);
      if (!points.ok()) {
        if (absl::IsNotFound(points.status())) continue;
        return points.status();
      }
      for (MetricPoint& p : points->rows)
        if (wanted.count(p.key)) host_points[p.key].push_back(std::move(p));
    }
  }
  // Other processes' CPU (the steps room's, per host), while the steps ran
  // (from the first step's start to the last one's end): the launcher's own
  // start (the environment it records: pip freeze, git) and the command's
  // start-up are not the host's load. All samples when none falls there.
  for (const bool in_steps : {true, false}) {
    double sum = 0;
    std::size_t n = 0;
    for (const steps::HostLoad& host : stepped->hosts)
      for (const steps::HostSample& x : host.samples) {
        const double other = x.other_cpu_pct();
        const std::int64_t ns = x.time_ms * 1'000'000;
        if (!std::isfinite(other) || !(x.cpu_util_pct > 0) ||
            (in_steps && (ns < first_ns - 999'999 || ns > last_ns)))
          continue;
        sum += other / 100.0;
        ++n;
      }
    if (n > 0) {
      run.other_cpu_share = sum / static_cast<double>(n);
      break;
    }
  }
  // The contention share of the run's ranks (the one --rank picks) while its
  // steps ran (a reading covers the second before it: the one after the last
  // step's end too); all readings when none falls there (steps shorter than a
  // sampling interval). And their step threads' step wait share.
  {
    std::vector<const steps::RankSteps*> ranks;
    for (const steps::RankSteps& r : stepped->ranks)
      if (!options.rank || r.rank == *options.rank) ranks.push_back(&r);
    steps::ContentionShare c;
    if (first_ns < last_ns)
      c = steps::contention_share(ranks, first_ns / 1'000'000, last_ns / 1'000'000 + 1000);
    if (!c.known()) c = steps::contention_share(ranks);
    run.contention_share = c.share;
    run.step_wait_share = steps::step_wait_share(ranks).share;
  }
  for (const std::string& name : wanted) {
    std::vector<MetricPoint> points;
    if (auto it = rank_points.find(name); it != rank_points.end()) {
      auto r = options.rank ? it->second.find(*options.rank) : it->second.begin();
      if (r != it->second.end()) points = r->second;
    } else if (auto h = host_points.find(name); h != host_points.end()) {
      points = h->second;
    }
    std::stable_sort(points.begin(), points.end(), [](const MetricPoint& x, const MetricPoint& y) {
      return std::tie(x.timestamp_ms, x.step) < std::tie(y.timestamp_ms, y.step);
    });
    std::vector<double> values;
    for (const MetricPoint& p : points)
      if (std::isfinite(p.value)) values.push_back(p.value);
    if (!values.empty()) data.series[SeriesId{SeriesKind::kMetric, name, ""}] = std::move(values);
  }
  return data;
}

bool has_glob(const std::string& spec) { return spec.find_first_of("*?[") != std::string::npos; }

// The run directories a spec names (a run, a glob of runs, a folder of runs).
absl::StatusOr<std::vector<std::string>> run_dirs(const std::string& spec) {
  std::vector<std::string> dirs;
  if (has_glob(spec)) {
    glob_t g{};
    const int rc = ::glob(spec.c_str(), GLOB_MARK, nullptr, &g);
    if (rc == 0)
      for (std::size_t i = 0; i < g.gl_pathc; ++i) {
        std::string path = g.gl_pathv[i];
        while (path.size() > 1 && path.back() == '/') path.pop_back();
        if (holds_run_files(path)) dirs.push_back(path);  // a damaged one is skipped by name
      }
    ::globfree(&g);
    if (dirs.empty())
      return absl::NotFoundError(fmt::format("{}: the glob matches no run directory", spec));
    return dirs;
  }
  if (exists(spec) && !is_directory(spec))
    return absl::InvalidArgumentError(
        fmt::format("{}: neither a run directory, a folder of runs nor a saved comparison", spec));
  // A run, a folder of runs, a sweep's or stalls analysis's runs/: the one resolver.
  return find_run_dirs({spec});
}

// FILE.json or FILE.json:a / FILE.json:b: a saved comparison's side.
std::optional<std::pair<std::string, bool>> saved_side(const std::string& spec) {
  for (const char* suffix : {":a", ":b"})
    if (absl::EndsWith(spec, suffix) && absl::EndsWith(spec.substr(0, spec.size() - 2), ".json"))
      return std::make_pair(spec.substr(0, spec.size() - 2), suffix[1] == 'a');
  if (absl::EndsWith(spec, ".json") && !is_directory(spec)) return std::make_pair(spec, false);
  return std::nullopt;
}

absl::Status add_runs(const std::vector<std::string>& dirs, const GatherOptions& options,
                      Side* side) {
  // A damaged run among several is skipped and named; a side of none is an error.
  absl::Status first_error;
  for (const std::string& dir : dirs) {
    absl::StatusOr<RunData> data = read_run(dir, options);
    if (!data.ok() && dirs.size() > 1) {
      warn(fmt::format("{}: skipped: {}", dir, std::string(data.status().message())));
      if (first_error.ok()) first_error = data.status();
      continue;
    }
    if (!data.ok()) return data.status();
    add_run_data(std::move(*data), side);
  }
  if (side->runs.empty() && !first_error.ok()) return first_error;
  return absl::OkStatus();
}

}  // namespace

void add_run_data(RunData data, Side* side) {
  const std::size_t index = side->runs.size();
  side->runs.push_back(std::move(data.run));
  for (auto& entry : data.series) {
    const SeriesId& id = entry.first;  // not a structured binding: lambdas capture it (C++17)
    std::vector<double>& values = entry.second;
    auto it = std::find_if(side->series.begin(), side->series.end(), [&](const Series& s) {
      return s.kind == id.kind && s.name == id.name && s.device == id.device;
    });
    if (it == side->series.end()) {
      side->series.push_back(Series{id.name, id.kind, id.device, {}});
      it = side->series.end() - 1;
    }
    it->runs.resize(index + 1);
    it->runs[index] = std::move(values);
  }
  for (Series& s : side->series) s.runs.resize(side->runs.size());
}

absl::StatusOr<Side> gather_side(const std::vector<std::string>& specs,
                                 const GatherOptions& options) {
  Side side;
  for (const std::string& spec : specs) {
    if (!side.label.empty()) side.label += " ";
    side.label += spec;
    if (std::optional<std::pair<std::string, bool>> saved = saved_side(spec)) {
      absl::StatusOr<Comparison> doc = read_comparison(saved->first);
      if (!doc.ok()) return doc.status();
      Side& from = saved->second ? doc->a : doc->b;
      if (from.runs.empty() || from.series.empty())
        return absl::InvalidArgumentError(fmt::format(
            "{}: the saved comparison holds no data of its {} side (save it with "
            "`trainscope compare ... --save FILE`, not --json, to use it as a baseline)",
            saved->first, saved->second ? "A" : "B"));
      for (std::size_t i = 0; i < from.runs.size(); ++i) {
        RunData data;
        data.run = from.runs[i];
        for (const Series& s : from.series)
          if (i < s.runs.size() && !s.runs[i].empty())
            data.series[SeriesId{s.kind, s.name, s.device}] = s.runs[i];
        add_run_data(std::move(data), &side);
      }
      continue;
    }
    absl::StatusOr<std::vector<std::string>> dirs = run_dirs(spec);
    if (!dirs.ok()) return dirs.status();
    if (absl::Status s = add_runs(*dirs, options, &side); !s.ok()) return s;
  }
  if (side.runs.empty()) return absl::InvalidArgumentError("no runs given");
  return side;
}

absl::StatusOr<Side> gather_filtered(const std::string& root, std::string_view filter,
                                     const GatherOptions& options) {
  absl::StatusOr<RunFilter> parsed = parse_run_filter(filter);
  if (!parsed.ok()) return parsed.status();
  if (!is_directory(root))
    return absl::NotFoundError(fmt::format("{}: no such directory of runs", root));
  absl::StatusOr<std::vector<std::string>> candidates = find_run_dirs({root});
  if (!candidates.ok()) return candidates.status();
  std::vector<std::string> dirs;
  for (const std::string& dir : *candidates) {
    absl::StatusOr<RunReader> reader = RunReader::Open(dir);
    if (!reader.ok()) {  // skipped and named, as a damaged run among many everywhere
      warn(fmt::format("{}: skipped: {}", dir, std::string(reader.status().message())));
      continue;
    }
    // The row search_runs filters (regions.* and metrics.* read when the filter names them;
    // ledger.* with metrics.*, for runs with work).
    RunFilterRowOptions row_options = row_options_for(*parsed);
    row_options.ledger_columns = steps::add_ledger_columns;
    absl::StatusOr<std::map<std::string, std::string>> row = run_filter_row(*reader, row_options);
    if (!row.ok()) {
      warn(fmt::format("{}: skipped: {}", dir, std::string(row.status().message())));
      continue;
    }
    if (run_filter_matches(*parsed, *row)) dirs.push_back(dir);
  }
  if (dirs.empty())
    return absl::NotFoundError(
        fmt::format("no run under {} matches the filter {}", root, std::string(filter)));
  Side side;
  side.label = std::string(filter);
  if (absl::Status s = add_runs(dirs, options, &side); !s.ok()) return s;
  return side;
}

namespace {

// Whether two paths name one file: the same inode when both exist, else the
// same absolute path.
bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0) {
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  }
  std::error_code error;
  const std::filesystem::path pa = std::filesystem::weakly_canonical(a, error);
  if (error) return a == b;
  const std::filesystem::path pb = std::filesystem::weakly_canonical(b, error);
  return !error && pa == pb;
}

}  // namespace

absl::Status check_save_path(const CompareRequest& request, const std::string& path,
                             bool overwrite) {
  for (const std::vector<std::string>* specs : {&request.a, &request.b}) {
    for (const std::string& spec : *specs) {
      const std::optional<std::pair<std::string, bool>> saved = saved_side(spec);
      if (saved && same_file(saved->first, path)) {
        return absl::InvalidArgumentError(fmt::format(
            "--save {}: that is an input of this comparison ({}): saving would replace the "
            "baseline it compares against; save to another file",
            path, spec));
      }
    }
  }
  struct stat st {};
  if (!overwrite && ::lstat(path.c_str(), &st) == 0) {
    return absl::AlreadyExistsError(
        fmt::format("--save {}: the file exists (--force replaces it)", path));
  }
  return absl::OkStatus();
}

}  // namespace trainscope::compare
