#include "trainscope/stalls/timed_loader.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <stdexcept>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "fmt/format.h"
#include "trainscope/run/run.hpp"
#include "trainscope/stalls/analysis.hpp"

namespace trainscope::stalls {
namespace {

absl::StatusOr<std::optional<std::int64_t>> count_from(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::optional<std::int64_t>();
  std::int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < 0) {
    return absl::InvalidArgumentError(
        fmt::format("{}='{}': needs a whole number >= 0 (set by trainscope stalls)", name, text));
  }
  return std::optional<std::int64_t>(value);
}

// Batches handed out over every pass of the process (the stop rule), passes
// per timer (the metrics' steps), and the params already logged per run.
struct ProcessBudget {
  std::mutex mu;
  std::optional<LoopControl> control;
  std::atomic<std::int64_t> handed_out{0};  // read and counted without the lock
  std::map<const void*, int> passes;
  std::map<std::string, bool> logged;  // by run directory
};

ProcessBudget& budget() {
  static ProcessBudget* b = new ProcessBudget();  // never destroyed: usable at exit
  return *b;
}

}  // namespace

absl::StatusOr<LoopControl> LoopControl::FromEnvironment() {
  LoopControl control;
  if (const char* mode = std::getenv(kModeEnv); mode != nullptr && *mode != '\0') {
    control.mode = mode;
    if (control.mode != kSyntheticMode && control.mode != kColdMode && control.mode != kWarmMode &&
        control.mode != kLoaderMode) {
      return absl::InvalidArgumentError(fmt::format(
          "{}='{}': the modes are synthetic, cold, warm and loader (set by trainscope stalls)",
          kModeEnv, mode));
    }
  }
  absl::StatusOr<std::optional<std::int64_t>> iterations = count_from(kIterationsEnv);
  if (!iterations.ok()) return iterations.status();
  absl::StatusOr<std::optional<std::int64_t>> warmup = count_from(kWarmupEnv);
  if (!warmup.ok()) return warmup.status();
  if (*iterations) control.limit = **iterations + warmup->value_or(0);
  return control;
}

namespace detail {

void reset_process_budget() {
  ProcessBudget& b = budget();
  std::lock_guard<std::mutex> lock(b.mu);
  b.control.reset();
  b.handed_out = 0;
  b.passes.clear();
  b.logged.clear();
}

LoaderPass::LoaderPass(const void* timer, const TimedOptions& options) : options_(options) {
  ProcessBudget& b = budget();
  std::lock_guard<std::mutex> lock(b.mu);
  if (options_.control) {
    control_ = *options_.control;
  } else {
    if (!b.control) {
      absl::StatusOr<LoopControl> control = LoopControl::FromEnvironment();
      if (!control.ok()) throw std::invalid_argument(std::string(control.status().message()));
      b.control = *control;
    }
    control_ = *b.control;
  }
  pass_ = ++b.passes[timer];
  began_ns_ = ::trainscope::detail::now_ns();
}

void LoaderPass::reserve(std::int64_t batches) {
  if (batches > 0) waits_ns_.reserve(static_cast<std::size_t>(batches));
}

bool LoaderPass::arrived() {
  ProcessBudget& b = budget();
  // Per batch: one atomic step, no lock.
  std::int64_t handed = b.handed_out.load(std::memory_order_relaxed);
  do {
    if (control_.limit && handed >= *control_.limit) return false;
  } while (!b.handed_out.compare_exchange_weak(handed, handed + 1, std::memory_order_relaxed));
  if (params_checked_ || options_.run == nullptr) return true;
  params_checked_ = true;  // once per pass: is this the run's first batch?
  bool first_in_run = false;
  {
    std::lock_guard<std::mutex> lock(b.mu);
    bool& logged = b.logged[options_.run->dir()];
    first_in_run = !logged;
    logged = true;
  }
  if (first_in_run) {
    // Tags, not params: the loader's facts stay out of the user's params. A
    // refused tag is the run's business (it names the key), not a reason to
    // stop training.
    if (options_.batch_size > 0) {
      (void)options_.run->set_tag(kBatchSizeParam, std::to_string(options_.batch_size));
    }
    if (!control_.mode.empty()) (void)options_.run->set_tag(kModeParam, control_.mode);
  }
  return true;
}

void LoaderPass::finish() {
  if (finished_) return;
  finished_ = true;
  log_pass();
}

void LoaderPass::log_pass() {
  if (options_.run == nullptr || waits_ns_.empty()) return;
  std::vector<double> waits;
  waits.reserve(waits_ns_.size());
  for (std::int64_t ns : waits_ns_) waits.push_back(static_cast<double>(ns) * 1e-9);
  const double wall = static_cast<double>(::trainscope::detail::now_ns() - began_ns_) * 1e-9;
  for (const auto& [name, value] : pass_metrics(pass_stalls(waits, wall))) {
    (void)options_.run->log_metric(name, value, pass_);
  }
}

void LoaderPass::stop() {
  const std::int64_t handed_out = budget().handed_out.load(std::memory_order_relaxed);
  if (options_.run != nullptr) {
    (void)options_.run->log_metric(kHandedOutMetric, static_cast<double>(handed_out), pass_);
    if (absl::Status ended = options_.run->end(RunStatus::kFinished); !ended.ok()) {
      std::cerr << "trainscope: ending the run at the stalls limit: " << ended << "\n";
    }
  }
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  if (options_.exit) options_.exit();
  std::_Exit(0);
}

}  // namespace detail
}  // namespace trainscope::stalls
