#include "trainscope/common/closest_name.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace trainscope {
namespace {

TEST(ClosestName, ALikelyMisspellingFindsItsName) {
  const std::vector<std::string> commands = {"sync", "run", "model", "sweep", "report"};
  EXPECT_EQ(closest_name("rnu", commands), "run");        // a swap
  EXPECT_EQ(closest_name("modle", commands), "model");    // a swap
  EXPECT_EQ(closest_name("reprot", commands), "report");  // a swap
  EXPECT_EQ(closest_name("swep", commands), "sweep");     // a letter left out
  const std::vector<std::string> options = {"--interval", "--root", "--name"};
  EXPECT_EQ(closest_name("--intervall", options), "--interval");
}

TEST(ClosestName, NothingCloseIsNoGuess) {
  const std::vector<std::string> commands = {"sync", "run", "model"};
  EXPECT_EQ(closest_name("frobnicate", commands), "");
  EXPECT_EQ(closest_name("xy", commands), "");  // 2 edits of 2 letters: no likely misspelling
  EXPECT_EQ(closest_name("run", {}), "");
  EXPECT_EQ(closest_name("", commands), "");
}

}  // namespace
}  // namespace trainscope
