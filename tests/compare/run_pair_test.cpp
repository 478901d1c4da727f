// compare --run's library call without launching anything: the order A B B A
// A B B A, and bad requests named (the end-to-end runs are in
// tests/python/test_compare_run.py).
#include "trainscope/compare/run_pair.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "support/temp_dir.hpp"

namespace trainscope::compare {
namespace {

using ::testing::HasSubstr;

TEST(RunPair, AlternatesABBA) {
  std::string order;
  for (std::size_t i = 0; i < 10; ++i) order += run_pair_side(i);
  EXPECT_EQ(order, "ABBAABBAAB");
}

TEST(RunPair, BadRequestsAreNamedBeforeAnythingRuns) {
  trainscope::testing::TempDir tmp;
  RunPairRequest request;
  request.command_a = "true";
  request.command_b = "true";
  request.dir = tmp.file("runs");
  request.repeat = 1;
  absl::StatusOr<RunPairResult> r = run_and_compare(request);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("--repeat 1"));
  request.repeat = 2;
  request.command_b = "";
  EXPECT_THAT(run_and_compare(request).status().message(), HasSubstr("two commands"));
  request.command_b = "true";
  tmp.subdir("runs/a-1");  // an earlier comparison's runs: never joined
  r = run_and_compare(request);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(r.status().message(), HasSubstr("already holds the runs"));
}

}  // namespace
}  // namespace trainscope::compare
