// The step thread's run-queue wait per step (trainscope/timing/thread_wait.hpp):
// a timer attached to a sink gives each BATCH region its wait
// (RegionSample::cpu_wait_ns), and the wait matches a known contention: a step that always wants
// its core, pinned beside one spinning thread, waits about half of it (within 10 points) where the
// test's threads had the core to themselves; whatever else ran there, the step waits whenever it
// does not run (its wait is its time less its run time, within 10 points).
#include "trainscope/timing/thread_wait.hpp"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "support/pin_thread.hpp"
#include "trainscope/timing/detail/sample_ring.hpp"
#include "trainscope/timing/timer.hpp"

namespace trainscope::timing {
namespace {

class RingSink : public RegionSink {
 public:
  std::shared_ptr<detail::SampleRing> open_ring() override {
    ring_ = std::make_shared<detail::SampleRing>(std::size_t{1024});
    return ring_;
  }
  void submit_summary(Summary) override {}
  std::vector<RegionSample> drain() {
    std::vector<RegionSample> out;
    if (ring_ != nullptr) ring_->pop_all(&out);
    return out;
  }

 private:
  std::shared_ptr<detail::SampleRing> ring_;
};

std::vector<RegionSample> of_key(const std::vector<RegionSample>& samples, KeyId key) {
  std::vector<RegionSample> out;
  for (const RegionSample& s : samples)
    if (s.key == key) out.push_back(s);
  return out;
}

void spin_for(double seconds) {
  const auto start = std::chrono::steady_clock::now();
  volatile std::uint64_t x = 0;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds)
    x = x + 1;
}

TEST(ThreadWait, ReadsAGrowingWaitPerThread) {
  const std::int64_t first = thread_wait_ns();
  if (first < 0) GTEST_SKIP() << "no /proc/thread-self/schedstat on this kernel";
  spin_for(0.01);
  EXPECT_GE(thread_wait_ns(), first);
  std::int64_t other = -2;
  std::thread([&] { other = thread_wait_ns(); }).join();
  EXPECT_GE(other, 0);  // the new thread's own file, opened on its first call
}

TEST(ThreadWait, AnAttachedTimerGivesEachStepItsWait) {
  if (thread_wait_ns() < 0) GTEST_SKIP() << "no /proc/thread-self/schedstat on this kernel";
  RingSink sink;
  Timer timer;
  timer.attach(sink);
  for (int i = 0; i < 3; ++i) {
    timer.start(TimeType::BATCH);
    timer.start(TimeType::FORWARD);
    spin_for(0.001);
    timer.end(TimeType::FORWARD);
    timer.end(TimeType::BATCH);
  }
  timer.start(TimeType::BATCH);
  timer.cancel(TimeType::BATCH);  // a cancelled step: no row
  timer.detach();
  const std::vector<RegionSample> all = sink.drain();
  ASSERT_EQ(all.size(), 6u);  // no row of its own
  const std::vector<RegionSample> steps = of_key(all, static_cast<KeyId>(TimeType::BATCH));
  ASSERT_EQ(steps.size(), 3u);
  for (const RegionSample& s : steps) {
    EXPECT_GE(s.cpu_wait_ns, 0);
    EXPECT_LE(s.cpu_wait_ns, s.duration_ns + 100'000);  // read inside the step's clock reads
  }
  for (const RegionSample& s : of_key(all, static_cast<KeyId>(TimeType::FORWARD)))
    EXPECT_EQ(s.cpu_wait_ns, kNoCpuWait);  // only the step's
}

TEST(ThreadWait, NoWaitWithTheOptionOff) {
  RingSink sink;
  TimerOptions off;
  off.step_wait = false;
  Timer timer(off);
  timer.attach(sink);
  timer.start(TimeType::BATCH);
  timer.end(TimeType::BATCH);
  timer.detach();
  const std::vector<RegionSample> all = sink.drain();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].cpu_wait_ns, kNoCpuWait);
}

using testing::pin_this_thread;

struct StepWaits {
  double share = NAN;  // the wait rows' sum over the steps' sum
  double self = NAN;   // the step thread's run time over the steps' sum
  double ours = NAN;   // the test's threads' run time over the wall time
  bool pinned = true;
};

std::uint64_t run_ns_now() {
  char buffer[96];
  FILE* f = std::fopen("/proc/thread-self/schedstat", "r");
  if (f == nullptr) return 0;
  const std::size_t n = std::fread(buffer, 1, sizeof buffer, f);
  std::fclose(f);
  SchedStat s;
  return parse_schedstat(std::string_view(buffer, n), &s) ? s.run_ns : 0;
}

// `steps` steps of 25 ms of spinning beside one spinner, both on `core`.
StepWaits measure(int core, bool round_robin, int steps = 20) {
  std::atomic<bool> stop{false}, ready{false};
  std::atomic<bool> pinned{true};
  std::uint64_t spinner_run = 0;
  std::thread spinner([&] {
    if (!pin_this_thread(core, round_robin)) pinned = false;
    const std::uint64_t start = run_ns_now();
    ready = true;
    volatile std::uint64_t x = 0;
    while (!stop.load(std::memory_order_relaxed)) x = x + 1;
    spinner_run = run_ns_now() - start;
  });
  StepWaits result;
  std::thread stepper([&] {
    if (!pin_this_thread(core, round_robin)) pinned = false;
    while (!ready.load()) std::this_thread::yield();
    RingSink sink;
    Timer timer;
    timer.attach(sink);
    const std::uint64_t run_before = run_ns_now();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) {
      timer.start(TimeType::BATCH);
      spin_for(0.025);
      timer.end(TimeType::BATCH);
    }
    const std::uint64_t run = run_ns_now() - run_before;
    const double wall_ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    stop = true;
    spinner.join();
    timer.detach();
    const std::vector<RegionSample> all = sink.drain();
    double steps_ns = 0, waits_ns = 0;
    for (const RegionSample& s : of_key(all, static_cast<KeyId>(TimeType::BATCH))) {
      steps_ns += static_cast<double>(s.duration_ns);
      waits_ns += static_cast<double>(s.cpu_wait_ns);
    }
    result.share = waits_ns / steps_ns;
    result.self = static_cast<double>(run) / steps_ns;
    result.ours = static_cast<double>(run + spinner_run) / wall_ns;
  });
  stepper.join();
  result.pinned = pinned;
  return result;
}

TEST(ThreadWaitContention, AStepBesideASpinnerWaitsHalfOfIt) {
  if (thread_wait_ns() < 0) GTEST_SKIP() << "no /proc/thread-self/schedstat on this kernel";
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0)
    GTEST_SKIP() << "sched_getaffinity failed: CPU affinity unavailable";
  std::string tried;
  for (int core = CPU_SETSIZE - 1; core >= 0; --core) {
    if (!CPU_ISSET(core, &allowed)) continue;
    const StepWaits w = measure(core, false);
    if (!w.pinned) GTEST_SKIP() << "pthread_setaffinity_np failed: CPU affinity unavailable";
    tried += " core " + std::to_string(core) + ": ours " + std::to_string(w.ours) + " share " +
             std::to_string(w.share) + ";";
    // Whoever else ran there, the step waited whenever it did not run.
    EXPECT_NEAR(w.share, 1.0 - w.self, 0.10) << "core " << core;
    if (w.ours < 0.9) continue;  // another process took the core from the test's threads
    EXPECT_NEAR(w.share, 0.5, 0.10) << "core " << core;
    return;
  }
  // Every core shared with other processes: the test's threads take turns
  // ahead of them where SCHED_RR is allowed.
  const int core = [&] {
    for (int c = CPU_SETSIZE - 1; c >= 0; --c)
      if (CPU_ISSET(c, &allowed)) return c;
    return 0;
  }();
  const StepWaits w = measure(core, true, 80);  // 100-ms turns: 2 s of steps hold 20
  if (!w.pinned || w.ours < 0.9)
    GTEST_SKIP() << "no core was left to the test's threads, and SCHED_RR is not allowed:" << tried;
  EXPECT_NEAR(w.share, 0.5, 0.10) << "SCHED_RR on core " << core << ";" << tried;
}

}  // namespace
}  // namespace trainscope::timing
