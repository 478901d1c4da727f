// TimerOptions are checked where a timer is built, in C++: a bad option is an
// error naming it at construction, never an exception from inside end() once
// a key passes its exact-sample cap.
#include <cmath>
#include <limits>
#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainscope/common/errors.hpp"
#include "trainscope/timing/cpu_gpu_timer.hpp"
#include "trainscope/timing/testing/simulated_event_source.hpp"
#include "trainscope/timing/timer.hpp"
#include "trainscope/timing/timer_options.hpp"

namespace trainscope {
namespace {

using ::testing::HasSubstr;

TEST(ValidateOptions, AcceptsDefaultsAndUsualValues) {
  EXPECT_TRUE(validate_options(TimerOptions{}).ok());
  EXPECT_TRUE(validate_options(CPUGPUTimerOptions{}).ok());
  for (double e : {0.5, 0.05, 0.001, 1e-6}) {
    TimerOptions options;
    options.sketch_relative_error = e;
    EXPECT_TRUE(validate_options(options).ok()) << e;
  }
}

TEST(ValidateOptions, RejectsBadSketchErrorNamingTheOption) {
  for (double bad : {0.0, -0.1, 1.0, 1.5, 1e-12, std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity()}) {
    TimerOptions options;
    options.sketch_relative_error = bad;
    const absl::Status status = validate_options(options);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(status.message()), HasSubstr("sketch_relative_error")) << bad;
    CPUGPUTimerOptions gpu_options;
    gpu_options.sketch_relative_error = bad;
    EXPECT_EQ(validate_options(gpu_options).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ValidateOptions, TimerConstructorThrowsNamingTheOption) {
  TimerOptions options;
  options.exact_sample_cap = 2;  // the sketch would be built at the third sample
  options.sketch_relative_error = 2.0;
  try {
    Timer timer(options);
    FAIL() << "a Timer was built with sketch_relative_error = 2";
  } catch (const TimerError& error) {
    EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(error.what(), HasSubstr("sketch_relative_error = 2"));
  }
}

TEST(ValidateOptions, CPUGPUTimerConstructorThrowsNamingTheOption) {
  CPUGPUTimerOptions options;
  options.exact_sample_cap = 2;
  options.sketch_relative_error = -1.0;
  auto source = std::make_shared<testing::SimulatedEventSource>();
  EXPECT_THROW(
      {
        try {
          CPUGPUTimer timer(source, options);
        } catch (const TimerError& error) {
          EXPECT_THAT(error.what(), HasSubstr("sketch_relative_error"));
          throw;
        }
      },
      TimerError);
}

TEST(ValidateOptions, ValidOptionsPastTheCapKeepTiming) {
  TimerOptions options;
  options.exact_sample_cap = 2;
  options.sketch_relative_error = 0.05;
  Timer timer(options);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(timer.try_start(TimeType::BATCH).ok());
    ASSERT_TRUE(timer.try_end(TimeType::BATCH).ok());
  }
  const TimeStats stats = timer.get_time_stats(TimeType::BATCH);
  EXPECT_EQ(stats.count, 10u);
  EXPECT_TRUE(stats.approximate);
}

}  // namespace
}  // namespace trainscope
