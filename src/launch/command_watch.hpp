// The thread that calls LaunchOptions::watch while the command runs, and
// what it asked for: a stop with its reason, said once (the room's own
// header; launch.cpp runs it).
#ifndef TRAINSCOPE_SRC_LAUNCH_COMMAND_WATCH_HPP_
#define TRAINSCOPE_SRC_LAUNCH_COMMAND_WATCH_HPP_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "common/fork_owner.hpp"
#include "trainscope/launch/launch.hpp"

namespace trainscope::launcher::detail {

class CommandWatch {
 public:
  // `say` gets each message (stderr and the command's stderr log), `log` each
  // verdict's metrics (none: left out). Nothing runs when `watch` is empty.
  CommandWatch(std::function<WatchVerdict(const std::string&)> watch, absl::Duration interval,
               std::string run_dir, std::function<void(const std::string&)> say,
               std::function<void(const std::vector<RunMetric>&)> log = {});
  ~CommandWatch();
  CommandWatch(const CommandWatch&) = delete;
  CommandWatch& operator=(const CommandWatch&) = delete;

  // SIGTERM once a verdict asked to stop, else 0.
  int requested() const noexcept { return stop_requested_.load() ? SIGTERM : 0; }
  // The stop's reason ("hang"); empty when none (valid after stop()).
  const std::string& reason() const noexcept { return reason_; }
  // Ends the thread (waits for a call in progress).
  void stop();

 private:
  void loop();

  std::function<WatchVerdict(const std::string&)> watch_;
  absl::Duration interval_;
  std::string run_dir_;
  std::function<void(const std::string&)> say_;
  std::function<void(const std::vector<RunMetric>&)> log_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::atomic<bool> stop_requested_{false};
  std::string reason_;
  std::thread thread_;
  const trainscope::detail::ForkOwner owner_;
};

}  // namespace trainscope::launcher::detail

#endif  // TRAINSCOPE_SRC_LAUNCH_COMMAND_WATCH_HPP_
