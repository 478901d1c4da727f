// Running A and B alternately and comparing them as they come
// (trainscope/compare/run_pair.hpp, docs/compare-statistics.md).
#include "trainscope/compare/run_pair.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "fmt/format.h"
#include "trainscope/launch/launch.hpp"

namespace trainscope::compare {
namespace {

bool decided(stats::Verdict v) {
  return v == stats::Verdict::kSame || v == stats::Verdict::kSlower || v == stats::Verdict::kFaster;
}

}  // namespace

LookLevels look_levels(double confidence, std::size_t looks) {
  const double alpha = 1 - confidence;
  if (looks <= 1) return {confidence, confidence};
  const double interim = std::min(0.001, alpha / (2 * static_cast<double>(looks - 1)));
  return {1 - interim, 1 - (alpha - static_cast<double>(looks - 1) * interim)};
}

char run_pair_side(std::size_t i) { return ((i + 1) / 2) % 2 == 0 ? 'A' : 'B'; }

absl::StatusOr<RunPairResult> run_and_compare(const RunPairRequest& request) {
  if (request.command_a.empty() || request.command_b.empty())
    return absl::InvalidArgumentError("--run needs two commands, A's and B's");
  if (request.repeat < 2)
    return absl::InvalidArgumentError(
        fmt::format("--repeat {}: at least 2 runs a side (the run is the unit)", request.repeat));
  if (request.dir.empty()) return absl::InvalidArgumentError("no directory for the runs");
  std::error_code ec;
  for (const char* first : {"a-1", "warmup-a-1"})
    if (std::filesystem::exists(std::filesystem::path(request.dir) / first, ec))
      return absl::AlreadyExistsError(fmt::format(
          "{} already holds the runs of a comparison: give another directory", request.dir));
  std::filesystem::create_directories(request.dir, ec);
  if (ec) return absl::InvalidArgumentError(fmt::format("{}: {}", request.dir, ec.message()));

  const auto start = std::chrono::steady_clock::now();
  const auto out_of_time = [&] {
    return request.max_time_s > 0 &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >=
               request.max_time_s;
  };
  const auto run_one = [&](char side, const std::string& name) -> absl::Status {
    const std::string dir = (std::filesystem::path(request.dir) / name).string();
    if (request.progress) request.progress(name, dir);
    LaunchOptions launch_options;
    launch_options.command = {"/bin/sh", "-c", side == 'A' ? request.command_a : request.command_b};
    launch_options.run.dir = dir;
    launch_options.run.name = name;
    launch_options.tee = request.tee;
    absl::StatusOr<LaunchResult> result = launch(std::move(launch_options));
    if (!result.ok()) return result.status();
    if (result->exit_code != 0)
      return absl::AbortedError(
          fmt::format("{}'s command exited with {} (run {})", side, result->exit_code, dir));
    return absl::OkStatus();
  };

  for (std::size_t i = 0; i < 2 * request.warmup_runs && !out_of_time(); ++i) {
    const char side = run_pair_side(i);
    if (absl::Status s = run_one(side, fmt::format("warmup-{}-{}", char(side + 32), i / 2 + 1));
        !s.ok())
      return s;
  }

  // The looks: after every run from the fourth on (two a side), at most
  // 2 * repeat - 3 of them; at the levels of look_levels, so the chance of
  // any false verdict over all looks stays within alpha.
  RunPairResult out;
  const LookLevels levels = look_levels(request.options.stats.confidence, 2 * request.repeat - 3);
  CompareOptions options = request.options;
  out.look_confidence = levels.interim_confidence;
  out.final_confidence = levels.final_confidence;
  std::vector<std::string> a, b;
  for (std::size_t i = 0; i < 2 * request.repeat; ++i) {
    if (out_of_time()) {
      out.stop = fmt::format("time: --max-time {:g} s reached", request.max_time_s);
      break;
    }
    const char side = run_pair_side(i);
    std::vector<std::string>& dirs = side == 'A' ? a : b;
    const std::string name = fmt::format("{}-{}", char(side + 32), dirs.size() + 1);
    if (absl::Status s = run_one(side, name); !s.ok()) return s;
    dirs.push_back((std::filesystem::path(request.dir) / name).string());
    out.order.push_back(std::string(1, side));
    if (a.size() < 2 || b.size() < 2) continue;
    CompareRequest compare_request;
    compare_request.a = a;
    compare_request.b = b;
    compare_request.options = options;
    compare_request.options.stats.confidence =
        i + 1 == 2 * request.repeat ? levels.final_confidence : levels.interim_confidence;
    absl::StatusOr<Comparison> c = compare(compare_request);
    if (!c.ok()) return c.status();
    ++out.looks;
    out.comparison = std::move(*c);
    const bool all = std::all_of(out.comparison.pairs.begin(), out.comparison.pairs.end(),
                                 [](const Pair& p) { return decided(p.overall.stats.verdict); });
    if (all && !out.comparison.pairs.empty()) {
      out.stop = fmt::format("decided after {} runs of A and {} of B", a.size(), b.size());
      break;
    }
  }
  if (out.looks == 0)
    return absl::DeadlineExceededError(
        fmt::format("--max-time {:g} s: too short for two runs a side ({} of A, {} of B ran)",
                    request.max_time_s, a.size(), b.size()));
  if (out.stop.empty()) out.stop = fmt::format("all {} runs a side", request.repeat);
  return out;
}

}  // namespace trainscope::compare
