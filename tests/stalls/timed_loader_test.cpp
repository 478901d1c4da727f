// The C++ timed loader: what the loop receives, the regions and metrics it
// records, synthetic mode, and the W + N stop rule (in-process with a
// throwing exit hook, and for real in a child process that must exit 0 with
// its run FINISHED).
#include "trainscope/stalls/timed_loader.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <list>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "support/run_dir_test.hpp"
#include "trainscope/run/run.hpp"
#include "trainscope/run/run_reader.hpp"
#include "trainscope/stalls/analysis.hpp"
#include "trainscope/timing/cpu_gpu_timer.hpp"
#include "trainscope/timing/timer.hpp"

namespace trainscope::stalls {
namespace {

struct LimitReached : std::runtime_error {
  LimitReached() : std::runtime_error("limit") {}
};

class TimedLoaderTest : public trainscope::testing::RunDirTest {
 protected:
  void SetUp() override {
    RunDirTest::SetUp();
    for (const char* name : {kModeEnv, kIterationsEnv, kWarmupEnv}) ::unsetenv(name);
    detail::reset_process_budget();
  }
  void TearDown() override {
    for (const char* name : {kModeEnv, kIterationsEnv, kWarmupEnv}) ::unsetenv(name);
    detail::reset_process_budget();
    RunDirTest::TearDown();
  }

  static std::map<std::string, std::vector<MetricPoint>> metrics(const std::string& dir) {
    absl::StatusOr<RunReader> reader = RunReader::Open(dir);
    EXPECT_TRUE(reader.ok()) << reader.status();
    std::map<std::string, std::vector<MetricPoint>> out;
    if (!reader.ok()) return out;
    absl::StatusOr<Chunk<MetricPoint>> points = reader->read_metrics(0);
    EXPECT_TRUE(points.ok()) << points.status();
    if (points.ok()) {
      for (const MetricPoint& p : points->rows) out[p.key].push_back(p);
    }
    return out;
  }

  static std::map<std::string, int> region_counts(const std::string& dir) {
    absl::StatusOr<RunReader> reader = RunReader::Open(dir);
    EXPECT_TRUE(reader.ok()) << reader.status();
    std::map<std::string, int> out;
    if (!reader.ok()) return out;
    absl::StatusOr<Chunk<RegionRow>> rows = reader->read_regions(0);
    EXPECT_TRUE(rows.ok()) << rows.status();
    if (rows.ok()) {
      for (const RegionRow& r : rows->rows) ++out[r.key];
    }
    return out;
  }
};

TEST_F(TimedLoaderTest, TheLoopReceivesExactlyWhatTheRangeYields) {
  Timer tmr;
  const std::vector<int> data = {3, 1, 4, 1, 5};
  std::vector<int> seen;
  for (const int& v : timed(tmr, data)) seen.push_back(v);
  EXPECT_EQ(seen, data);
  // One IO region per batch (learning that the pass is over is none); 5
  // iterations; 1 pass.
  EXPECT_EQ(tmr.get_time_stats(TimeType::IO).count, 5u);
  EXPECT_EQ(tmr.get_time_stats("iteration").count, 5u);
  EXPECT_EQ(tmr.get_time_stats("loader_epoch").count, 1u);

  // A range without size() (a list), mutable references, another key, a
  // CPUGPUTimer; an empty range is no wait and one pass.
  std::list<std::string> words = {"a", "b"};
  CPUGPUTimer both;
  TimedOptions options;
  options.key = "fetch";
  for (std::string& w : timed(both, words, options)) w += "!";
  EXPECT_EQ(words, (std::list<std::string>{"a!", "b!"}));
  EXPECT_EQ(both.get_time_stats("fetch").count, 2u);
  std::vector<int> none;
  for (int v : timed(tmr, none)) ADD_FAILURE() << v;
  EXPECT_EQ(tmr.get_time_stats("loader_epoch").count, 2u);
  EXPECT_EQ(tmr.get_time_stats(TimeType::IO).count, 5u);
}

TEST_F(TimedLoaderTest, EachPassLogsTheMetricsPythonLogs) {
  std::string dir;
  {
    testing::RunPtr run = start(options());
    ASSERT_NE(run, nullptr);
    dir = run->dir();
    Timer tmr;
    run->attach(tmr);
    const std::vector<int> data(12, 7);
    auto loader = timed(tmr, data, {run.get(), TimeType::IO, /*batch_size=*/12});
    for (int pass = 0; pass < 3; ++pass) {
      int n = 0;
      for (int v : loader) n += v;
      EXPECT_EQ(n, 84);
    }
    ASSERT_TRUE(run->end().ok());
  }
  const auto m = metrics(dir);
  ASSERT_EQ(m.count("stalls/loader_wait_share"), 1u);
  std::vector<std::int64_t> steps;
  for (const MetricPoint& p : m.at("stalls/loader_wait_share")) {
    steps.push_back(p.step);
    EXPECT_GE(p.value, 0.0);
    EXPECT_LE(p.value, 1.0);
  }
  EXPECT_EQ(steps, (std::vector<std::int64_t>{1, 2, 3}));
  for (const char* key : {"stalls/input_bound_class", "stalls/wait_p50_ms", "stalls/wait_p95_ms",
                          "stalls/wait_max_ms", "stalls/startup_wait_share"}) {
    EXPECT_EQ(m.count(key), 1u) << key;
  }
  ASSERT_EQ(m.count("stalls/batches"), 1u);
  EXPECT_EQ(m.at("stalls/batches")[0].value, 12.0);  // a pass of 12 batches says 12
  absl::StatusOr<RunReader> reader = RunReader::Open(dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->info().tags.at("trainscope.stalls.batch_size"), "12");  // a tag
  EXPECT_EQ(reader->info().params.count("stalls.batch_size"), 0u);
  // The live analysis of the rows finds the same three passes.
  absl::StatusOr<RunStalls> analysed = analyze_run(dir);
  ASSERT_TRUE(analysed.ok()) << analysed.status();
  ASSERT_EQ(analysed->passes.size(), 3u);
  EXPECT_EQ(analysed->passes[0].batches, 12u);
  EXPECT_EQ(analysed->wait_s.size(), 36u);  // one IO row per batch
  EXPECT_EQ(analysed->iteration_s.size(), 36u);
  EXPECT_EQ(*analysed->batch_size, 12);
}

TEST_F(TimedLoaderTest, SyntheticModeHandsOutTheFirstBatchAgain) {
  Timer tmr;
  std::vector<int> data = {10, 20, 30, 40};
  TimedOptions o;
  o.control = LoopControl{"synthetic", std::nullopt};
  std::vector<int> seen;
  for (int v : timed(tmr, data, o)) seen.push_back(v);
  EXPECT_EQ(seen, (std::vector<int>{10, 10, 10, 10}));
  EXPECT_EQ(tmr.get_time_stats("iteration").count, 4u);
}

TEST_F(TimedLoaderTest, LoaderModeTakesEveryBatchAndHandsOutNone) {
  Timer tmr;
  const std::vector<int> data = {1, 2, 3, 4};
  TimedOptions o;
  o.control = LoopControl{"loader", std::nullopt};
  for (int v : timed(tmr, data, o)) ADD_FAILURE() << "handed out " << v;
  // Every batch was taken (4 waits), each an iteration of the loader alone.
  EXPECT_EQ(tmr.get_time_stats(TimeType::IO).count, 4u);
  EXPECT_EQ(tmr.get_time_stats("iteration").count, 4u);
  EXPECT_EQ(tmr.get_time_stats("loader_epoch").count, 1u);
}

TEST_F(TimedLoaderTest, TheLimitCountsBatchesOverEveryPass) {
  // W + N = 2 + 5 = 7 batches, over passes of 3: the 8th batch is not handed
  // out; the exit hook runs after the last pass was finished.
  ::setenv(kIterationsEnv, "5", 1);
  ::setenv(kWarmupEnv, "2", 1);
  Timer tmr;
  const std::vector<int> data = {1, 2, 3};
  TimedOptions o;
  o.exit = [] { throw LimitReached(); };
  int handed = 0;
  bool stopped = false;
  try {
    for (int epoch = 0; epoch < 10; ++epoch) {
      for (int v : timed(tmr, data, o)) handed += v > 0 ? 1 : 0;
    }
  } catch (const LimitReached&) {
    stopped = true;
  }
  EXPECT_TRUE(stopped);
  EXPECT_EQ(handed, 7);
  EXPECT_EQ(tmr.get_time_stats("iteration").count, 7u);
  EXPECT_EQ(tmr.get_time_stats("loader_epoch").count, 3u);
}

TEST_F(TimedLoaderTest, BadEnvironmentIsAnErrorNamingTheVariable) {
  ::setenv(kIterationsEnv, "ten", 1);
  absl::StatusOr<LoopControl> control = LoopControl::FromEnvironment();
  ASSERT_FALSE(control.ok());
  EXPECT_NE(control.status().message().find("TRAINSCOPE_STALLS_ITERATIONS='ten'"),
            std::string::npos)
      << control.status();
  Timer tmr;
  const std::vector<int> data = {1};
  EXPECT_THROW(
      {
        for (int v : timed(tmr, data)) (void)v;
      },
      std::invalid_argument);
  ::unsetenv(kIterationsEnv);
  ::setenv(kModeEnv, "fast", 1);
  control = LoopControl::FromEnvironment();
  ASSERT_FALSE(control.ok());
  EXPECT_NE(control.status().message().find("the modes are synthetic, cold, warm and loader"),
            std::string::npos);
}

TEST_F(TimedLoaderTest, AtTheLimitTheProcessExitsZeroWithItsRunFinished) {
  // The real exit path, in a child: the run ends FINISHED with exactly W + N
  // iteration regions, and the process exits with status 0 inside the loop.
  const std::string dir = (root_ / "child-run").string();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setenv(kIterationsEnv, "6", 1);
    ::setenv(kWarmupEnv, "2", 1);
    ::setenv("TRAINSCOPE_RUN_DIR", dir.c_str(), 1);
    RunOptions o = options();
    absl::StatusOr<testing::RunPtr> run = trainscope::Run::Start(o);
    if (!run.ok()) ::_exit(3);
    Timer tmr;
    (*run)->attach(tmr);
    const std::vector<int> data(5, 1);
    TimedOptions t;
    t.run = run->get();
    t.batch_size = 5;
    for (int epoch = 0; epoch < 100; ++epoch) {
      for (int v : timed(tmr, data, t)) (void)v;
    }
    ::_exit(4);  // never reached: the loader ends the process at W + N
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  absl::StatusOr<RunReader> reader = RunReader::Open(dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->info().status, RunStatus::kFinished);
  const auto counts = region_counts(dir);
  EXPECT_EQ(counts.at("iteration"), 8);
  EXPECT_EQ(counts.at("loader_epoch"), 2);
  const auto m = metrics(dir);
  ASSERT_EQ(m.count("stalls/handed_out"), 1u);
  EXPECT_EQ(m.at("stalls/handed_out")[0].value, 8.0);
}

}  // namespace
}  // namespace trainscope::stalls
