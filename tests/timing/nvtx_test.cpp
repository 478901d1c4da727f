// NVTX ranges as a profiler sees them: the NVTX runtime loads
// tests/nvtx_recorder.cpp as its tool (NVTX_INJECTION64_PATH, as Nsight
// Systems does) and this test reads the recorded ranges back.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "trainscope/timing/cpu_gpu_timer.hpp"
#include "trainscope/timing/detail/nvtx.hpp"
#include "trainscope/timing/testing/simulated_event_source.hpp"
#include "trainscope/timing/timer.hpp"

namespace trainscope {
namespace {

// Before main(), so before the first NVTX call initialises the runtime.
#if defined(TRAINSCOPE_NVTX_RECORDER)
const bool kInjected = setenv("NVTX_INJECTION64_PATH", TRAINSCOPE_NVTX_RECORDER, 1) == 0;
#endif

class NvtxTest : public ::testing::Test {
 protected:
  void SetUp() override {
#if !defined(TRAINSCOPE_NVTX_RECORDER)
    GTEST_SKIP() << "this build has no NVTX3 headers";
#else
    ASSERT_TRUE(kInjected);
    ASSERT_TRUE(timing::detail::nvtx_compiled_in());
    Timer warm_up;  // the first NVTX call loads the recorder
    warm_up.start(TimeType::OTHER);
    warm_up.end(TimeType::OTHER);
    library_ = dlopen(TRAINSCOPE_NVTX_RECORDER, RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(library_, nullptr) << "the NVTX runtime did not load the recorder";
    events_ =
        reinterpret_cast<std::vector<std::string> (*)()>(dlsym(library_, "nvtx_recorder_events"));
    clear_ = reinterpret_cast<void (*)()>(dlsym(library_, "nvtx_recorder_clear"));
    ASSERT_NE(events_, nullptr);
    ASSERT_NE(clear_, nullptr);
    clear_();
#endif
  }
  void TearDown() override {
    if (library_ != nullptr) dlclose(library_);
  }

  std::vector<std::string> events() { return events_(); }

  // "start trainscope BATCH 7" -> ranges by id, with their end seen or not.
  struct Range {
    std::string domain;
    std::string name;
    bool ended = false;
  };
  std::map<std::string, Range> ranges() {
    std::map<std::string, Range> out;
    for (const std::string& e : events()) {
      std::istringstream in(e);
      std::string kind, domain, name, id;
      in >> kind >> domain;
      if (kind == "start") {
        in >> name >> id;
        out[id] = Range{domain, name, false};
      } else {
        in >> id;
        EXPECT_EQ(out.count(id), 1u) << "end of an unknown range: " << e;
        EXPECT_EQ(out[id].domain, domain);
        out[id].ended = true;
      }
    }
    return out;
  }

  void* library_ = nullptr;
  std::vector<std::string> (*events_)() = nullptr;
  void (*clear_)() = nullptr;
};

TEST_F(NvtxTest, EveryRegionIsARangeNamedAfterItsKeyInTheTrainscopeDomain) {
  Timer timer;
  timer.start(TimeType::EPOCH);
  timer.start(TimeType::BATCH);
  timer.start(TimeType::IO);
  timer.end(TimeType::BATCH);  // overlapping, not nested: start/end ranges allow it
  timer.start("data_aug");
  timer.end("data_aug");
  timer.end(TimeType::IO);
  timer.end(TimeType::EPOCH);
  const auto r = ranges();
  ASSERT_EQ(r.size(), 4u);
  std::multiset<std::string> names;
  for (const auto& [id, range] : r) {
    EXPECT_EQ(range.domain, "trainscope");
    EXPECT_TRUE(range.ended) << range.name;
    names.insert(range.name);
  }
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("EPOCH", "BATCH", "IO", "data_aug"));
}

TEST_F(NvtxTest, OpenRegionsStayOpenRangesAndFailedCallsEmitNothing) {
  Timer timer;
  timer.start(TimeType::FORWARD);
  EXPECT_FALSE(timer.try_start(TimeType::FORWARD).ok());
  EXPECT_FALSE(timer.try_end(TimeType::BACKWARD).ok());
  const auto r = ranges();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r.begin()->second.name, "FORWARD");
  EXPECT_FALSE(r.begin()->second.ended);
  timer.end(TimeType::FORWARD);
  EXPECT_TRUE(ranges().begin()->second.ended);
}

TEST_F(NvtxTest, CanBeSwitchedOff) {
  TimerOptions options;
  options.nvtx = false;
  Timer timer(options);
  timer.start(TimeType::BATCH);
  timer.end(TimeType::BATCH);
  EXPECT_TRUE(events().empty());
  EXPECT_EQ(timer.get_time_stats(TimeType::BATCH).count, 1u);
}

TEST_F(NvtxTest, GpuRegionsOpenOneRangeEach) {
  CPUGPUTimer timer(std::make_shared<testing::SimulatedEventSource>());
  timer.start(TimeType::BACKWARD, true);
  timer.end(TimeType::BACKWARD, true);
  const auto r = ranges();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r.begin()->second.name, "BACKWARD");
  EXPECT_TRUE(r.begin()->second.ended);
}

}  // namespace
}  // namespace trainscope
