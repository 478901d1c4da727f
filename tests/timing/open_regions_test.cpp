// The table of open regions a dump reads (trainscope/timing/detail/open_regions.hpp):
// regions leave their place in any order, a stack past its depth counts what it
// cannot name, a released stack is claimed again empty, and key names are
// published as keys are interned.
#include "trainscope/timing/detail/open_regions.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "trainscope/timing/time_type.hpp"

namespace trainscope::timing::detail {
namespace {

std::vector<KeyId> keys_of(const OpenStack& s) {
  std::vector<KeyId> out;
  const std::uint32_t depth = s.depth.load();
  for (std::uint32_t i = 0; i < depth && i < kOpenStackDepth; ++i) out.push_back(s.keys[i].load());
  return out;
}

TEST(OpenRegions, RegionsLeaveInAnyOrderAndDeepOnesAreCounted) {
  OpenStackHandle handle = OpenStackHandle::claim();
  ASSERT_NE(handle.get(), nullptr);
  OpenStack& s = *handle.get();
  s.push(1, 10);
  s.push(2, 20);
  s.push(3, 30);
  s.pop(2);  // not the innermost
  EXPECT_EQ(keys_of(s), (std::vector<KeyId>{1, 3}));
  EXPECT_EQ(s.starts_ns[1].load(), 30);
  for (KeyId k = 100; k < 120; ++k) s.push(k, k);
  EXPECT_EQ(s.depth.load(), 22u);
  EXPECT_EQ(keys_of(s).size(), kOpenStackDepth);
  for (KeyId k = 120; k-- > 100;) s.pop(k);
  EXPECT_EQ(keys_of(s), (std::vector<KeyId>{1, 3}));
  s.pop(3);
  s.pop(1);
  EXPECT_EQ(s.depth.load(), 0u);
  s.pop(1);  // nothing open: nothing changes
  EXPECT_EQ(s.depth.load(), 0u);
}

TEST(OpenRegions, AReleasedStackIsClaimedAgainEmpty) {
  OpenStackHandle a = OpenStackHandle::claim();
  ASSERT_NE(a.get(), nullptr);
  OpenStack* stack = a.get();
  stack->push(7, 1);
  OpenStackHandle moved = std::move(a);
  EXPECT_EQ(a.get(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_TRUE(stack->claimed.load());
  moved.release();
  EXPECT_FALSE(stack->claimed.load());
  EXPECT_EQ(stack->depth.load(), 0u);
}

TEST(OpenRegions, KeyNamesArePublishedAsInterned) {
  const Key key("OPEN_REGIONS_TEST_KEY");
  ASSERT_NE(signal_safe_key_name(key.id()), nullptr);
  EXPECT_EQ(std::string(signal_safe_key_name(key.id())), "OPEN_REGIONS_TEST_KEY");
  EXPECT_EQ(std::string(signal_safe_key_name(Key(TimeType::BATCH).id())), "BATCH");
  EXPECT_EQ(signal_safe_key_name(kSignalSafeKeys), nullptr);
}

}  // namespace
}  // namespace trainscope::timing::detail
