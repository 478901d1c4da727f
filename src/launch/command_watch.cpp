// LaunchOptions::watch on a thread of its own (src/launch/command_watch.hpp).
#include "launch/command_watch.hpp"

#include <csignal>
#include <exception>
#include <utility>

#include "fmt/format.h"
#include "trainscope/common/errors.hpp"

namespace trainscope::launcher::detail {

CommandWatch::CommandWatch(std::function<WatchVerdict(const std::string&)> watch,
                           absl::Duration interval, std::string run_dir,
                           std::function<void(const std::string&)> say,
                           std::function<void(const std::vector<RunMetric>&)> log)
    : watch_(std::move(watch)),
      interval_(interval),
      run_dir_(std::move(run_dir)),
      say_(std::move(say)),
      log_(std::move(log)) {
  if (watch_) thread_ = std::thread([this] { loop(); });
}

CommandWatch::~CommandWatch() {
  if (owner_.forked()) {
    trainscope::detail::abandon(thread_);
    return;
  }
  stop();
}

void CommandWatch::stop() {
  if (owner_.forked()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CommandWatch::loop() {
  const auto interval = absl::ToChronoMilliseconds(interval_);
  std::string last_message;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (wake_.wait_for(lock, interval, [this] { return stopping_; })) return;
    }
    WatchVerdict verdict;
    try {
      verdict = watch_(run_dir_);
    } catch (const std::exception& error) {
      warn(fmt::format("trainscope run: the watch of {} failed: {}", run_dir_, error.what()));
      return;
    } catch (...) {
      warn(fmt::format("trainscope run: the watch of {} failed (an unknown exception)", run_dir_));
      return;
    }
    // A message said once while it stays the same.
    if (!verdict.message.empty() && verdict.message != last_message && say_) say_(verdict.message);
    last_message = verdict.message;
    if (!verdict.metrics.empty() && log_) log_(verdict.metrics);
    if (verdict.action == WatchVerdict::Action::kStop) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        reason_ = verdict.reason;
      }
      stop_requested_.store(true);
      return;
    }
  }
}

}  // namespace trainscope::launcher::detail
