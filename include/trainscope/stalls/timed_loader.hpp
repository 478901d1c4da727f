// The timed loader for C++ loops: `for (auto&& batch : stalls::timed(tmr, loader, options))`
// times the wait for each batch (the time in the range's iterator increment,
// e.g. a LibTorch DataLoader's) as the IO region and hands on exactly what the
// range yields, as Python's `for batch in tmr.timed(loader):` does
// (bindings/python/trainscope/_stalls.py; docs/stalls.md).
//
// Besides the IO key it records, on the same timer, `loader_epoch` (one
// region per pass over the range) and `iteration` (from one batch handed out
// to the next), and at the end of each pass it logs the pass's `stalls/...`
// metrics into `options.run`. Under `trainscope stalls` the environment
// selects what Python's timed loader does:
//   TRAINSCOPE_STALLS_MODE=synthetic   the first batch, again and again
//   TRAINSCOPE_STALLS_MODE=loader      batches taken as soon as they are ready,
//                                      none handed out (the loader's own rate)
//   TRAINSCOPE_STALLS_ITERATIONS=N, TRAINSCOPE_STALLS_WARMUP=W
//                                      after W + N batches handed out (counted
//                                      over every pass of the process), the
//                                      run is ended FINISHED and the process
//                                      exits with status 0, whatever loop
//                                      surrounds the range.
#ifndef TRAINSCOPE_STALLS_TIMED_LOADER_HPP_
#define TRAINSCOPE_STALLS_TIMED_LOADER_HPP_

#include <cstdint>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "trainscope/common/clock.hpp"
#include "trainscope/timing/time_type.hpp"

namespace trainscope {
class Run;
}  // namespace trainscope

namespace trainscope::stalls {

inline constexpr char kModeEnv[] = "TRAINSCOPE_STALLS_MODE";
inline constexpr char kIterationsEnv[] = "TRAINSCOPE_STALLS_ITERATIONS";
inline constexpr char kWarmupEnv[] = "TRAINSCOPE_STALLS_WARMUP";
// The modes (the legs of `trainscope stalls --dataset`); "" outside it.
inline constexpr char kSyntheticMode[] = "synthetic";  // the first batch again and again
inline constexpr char kColdMode[] = "cold";            // as usual, the dataset evicted
inline constexpr char kWarmMode[] = "warm";            // as usual, the dataset read in
inline constexpr char kLoaderMode[] = "loader";        // the loader alone, no batch handed out

// What `trainscope stalls` asks of a loop, through the environment.
struct LoopControl {
  std::string mode;                   // "", "synthetic", "cold", "warm" or "loader" (the leg)
  std::optional<std::int64_t> limit;  // W + N batches, then stop
  bool synthetic() const noexcept { return mode == kSyntheticMode; }
  // The loader alone: batches taken as soon as they are ready, none handed out.
  bool loader_only() const noexcept { return mode == kLoaderMode; }

  // From TRAINSCOPE_STALLS_MODE, _ITERATIONS and _WARMUP. An error names the
  // variable and its value (another mode, a count that is not a whole
  // number >= 0).
  static absl::StatusOr<LoopControl> FromEnvironment();
};

struct TimedOptions {
  // Receives each pass's stalls/ metrics (step = pass number) and the params
  // the tags trainscope.stalls.batch_size and trainscope.stalls.mode; ended FINISHED at the limit.
  // Without a run nothing is logged, and the limit still ends the process.
  Run* run = nullptr;
  Key key = TimeType::IO;
  // Samples per batch (the B of the analysis's rates), logged as the param
  // stalls.batch_size; 0: not logged.
  int batch_size = 0;
  // Default: LoopControl::FromEnvironment() (read once per process; a bad
  // variable throws std::invalid_argument naming it).
  std::optional<LoopControl> control;
  // Called at the limit after the run was ended and the standard streams
  // flushed; std::_Exit(0) follows (no destructor can block on, or write to,
  // a run that is over). Tests pass one that throws.
  std::function<void()> exit;
};

namespace detail {

// A pass's bookkeeping, shared by every TimedRange instantiation.
class LoaderPass {
 public:
  LoaderPass(const void* timer, const TimedOptions& options);
  LoaderPass(const LoaderPass&) = delete;
  LoaderPass& operator=(const LoaderPass&) = delete;

  bool synthetic() const noexcept { return control_.synthetic(); }
  bool loader_only() const noexcept { return control_.loader_only(); }
  // A wait of `ns` ended with a batch.
  void waited(std::int64_t ns) { waits_ns_.push_back(ns); }
  // A batch arrived: counts it as handed out, or returns false when the
  // process's W + N batches were already handed out (then finish the pass
  // and call stop()).
  bool arrived();
  // The pass is over (its range ended, or its TimedRange went away): logs
  // its metrics once.
  void finish();
  // At the limit: logs stalls/handed_out, ends the run FINISHED, flushes the
  // standard streams and ends the process (options.exit).
  [[noreturn]] void stop();
  void reserve(std::int64_t batches);

 private:
  void log_pass();

  TimedOptions options_;
  LoopControl control_;
  int pass_ = 0;
  std::int64_t began_ns_ = 0;
  bool finished_ = false;
  bool params_checked_ = false;  // whether this pass looked for the run's first batch
  std::vector<std::int64_t> waits_ns_;
};

// Forgets the batches handed out, the passes counted and the environment
// read (tests only).
void reset_process_budget();

template <class T, class = void>
struct has_size : std::false_type {};
template <class T>
struct has_size<T, std::void_t<decltype(std::size(std::declval<T&>()))>> : std::true_type {};

}  // namespace detail

// One pass over `Range` per begin(): what stalls::timed() returns.
template <class TimerT, class Range>
class TimedRange {
  using Inner = decltype(std::begin(std::declval<Range&>()));
  using InnerEnd = decltype(std::end(std::declval<Range&>()));

 public:
  using value_type = std::decay_t<decltype(*std::declval<Inner&>())>;

  TimedRange(TimerT& timer, Range& range, TimedOptions options)
      : timer_(&timer), range_(&range), options_(std::move(options)) {}

  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = TimedRange::value_type;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = decltype(*std::declval<Inner&>());

    decltype(auto) operator*() const {
      if constexpr (std::is_reference_v<reference>) {
        return owner_->pass_->synthetic() ? static_cast<reference>(*owner_->first_) : **owner_->it_;
      } else {
        return owner_->pass_->synthetic() ? value_type(*owner_->first_) : value_type(**owner_->it_);
      }
    }
    iterator& operator++() {
      owner_->advance();
      return *this;
    }
    void operator++(int) { owner_->advance(); }
    friend bool operator==(const iterator& a, const iterator& b) {
      return a.at_end() == b.at_end();
    }
    friend bool operator!=(const iterator& a, const iterator& b) { return !(a == b); }

   private:
    friend class TimedRange;
    explicit iterator(TimedRange* owner) : owner_(owner) {}
    bool at_end() const { return owner_ == nullptr || owner_->done_; }
    TimedRange* owner_ = nullptr;
  };

  // Starts a pass: the loader_epoch region, then the wait for the first batch.
  iterator begin() {
    finish_pass();
    pass_.emplace(static_cast<const void*>(timer_), options_);
    done_ = false;
    iteration_open_ = false;
    handed_ = 0;
    if constexpr (detail::has_size<Range>::value) {
      count_ = static_cast<std::int64_t>(std::size(*range_));
      pass_->reserve(*count_ + 1);
    }
    timer_->start(kEpochKey());
    fetch(/*first=*/true);
    if (pass_->loader_only()) {
      while (!done_) fetch(/*first=*/false);  // the loop sees an empty pass
    }
    return iterator(this);
  }
  iterator end() { return iterator(nullptr); }

  ~TimedRange() { finish_pass(); }
  TimedRange(const TimedRange&) = delete;
  TimedRange& operator=(const TimedRange&) = delete;
  TimedRange(TimedRange&&) = default;

 private:
  static Key kEpochKey() {
    static const Key key("loader_epoch");
    return key;
  }
  static Key kIterationKey() {
    static const Key key("iteration");
    return key;
  }

  void advance() { fetch(/*first=*/false); }

  // Times the wait for the next batch (the first of a pass when `first`).
  void fetch(bool first) {
    timer_->start(options_.key);
    const std::int64_t t0 = ::trainscope::detail::now_ns();
    bool more = false;
    if (pass_->synthetic()) {
      if (!first_) {
        if (!it_) it_.emplace(std::begin(*range_));
        more = !(*it_ == std::end(*range_));
        if (more) first_.emplace(**it_);
      } else {
        more = true;
      }
      if (count_ && handed_ >= *count_) more = false;
    } else {
      if (first) {
        it_.emplace(std::begin(*range_));
      } else {
        ++*it_;
      }
      more = !(*it_ == std::end(*range_));
    }
    if (more) {
      timer_->end(options_.key);
      pass_->waited(::trainscope::detail::now_ns() - t0);
    } else {
      // Learning that the pass is over is no batch's wait: no IO region, so
      // a pass of N batches has N (its time is in the pass's wall time).
      timer_->cancel(options_.key);
    }
    if (iteration_open_) {
      timer_->end(kIterationKey());
      iteration_open_ = false;
    }
    if (!more) {
      finish_pass();
      return;
    }
    if (!pass_->arrived()) {  // W + N batches handed out: end the pass, the run, the process
      finish_pass();
      pass_->stop();
    }
    ++handed_;
    timer_->start(kIterationKey());
    iteration_open_ = true;
  }

  void finish_pass() {
    if (!pass_ || done_) return;
    done_ = true;
    if (iteration_open_) {
      timer_->end(kIterationKey());
      iteration_open_ = false;
    }
    timer_->end(kEpochKey());
    pass_->finish();
  }

  TimerT* timer_;
  Range* range_;
  TimedOptions options_;
  std::optional<detail::LoaderPass> pass_;
  std::optional<Inner> it_;
  std::optional<value_type> first_;  // synthetic mode's batch
  std::optional<std::int64_t> count_;
  std::int64_t handed_ = 0;
  bool done_ = true;
  bool iteration_open_ = false;
};

// `for (auto&& batch : stalls::timed(tmr, loader, {run.get()}))`: Timer or
// CPUGPUTimer (CPU regions), any range (std::begin/std::end), including
// LibTorch's `*data_loader`.
template <class TimerT, class Range>
TimedRange<TimerT, Range> timed(TimerT& timer, Range& range, TimedOptions options = {}) {
  return TimedRange<TimerT, Range>(timer, range, std::move(options));
}

}  // namespace trainscope::stalls

#endif  // TRAINSCOPE_STALLS_TIMED_LOADER_HPP_
