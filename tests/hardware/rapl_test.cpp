// The RAPL reader (hardware/host/rapl.hpp) on a powercap tree laid out as the
// kernel's (TRAINSCOPE_POWERCAP_ROOT points at it): the zones, the energy
// counted across a counter's wrap-around, and one line saying why when
// nothing can be read; on this machine, what it reads or why not.
#include "trainscope/hardware/host/rapl.hpp"

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/temp_dir.hpp"
#include "trainscope/hardware/host/host_metrics.hpp"

namespace trainscope::host {
namespace {

using ::testing::HasSubstr;

void zone(trainscope::testing::TempDir& tmp, const std::string& id, const std::string& name,
          const std::string& energy, const std::string& range = "262143328850\n") {
  tmp.write(id + "/name", name + "\n");
  tmp.write(id + "/energy_uj", energy);
  tmp.write(id + "/max_energy_range_uj", range);
}

TEST(RaplTest, CountersParseAsTheKernelWritesThem) {
  EXPECT_EQ(parse_counter("123456\n"), 123456u);
  EXPECT_EQ(parse_counter("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(parse_counter("18446744073709551616"), std::nullopt);  // past 64 bits
  EXPECT_EQ(parse_counter(""), std::nullopt);
  EXPECT_EQ(parse_counter("-5\n"), std::nullopt);
  EXPECT_EQ(parse_counter("12 34\n"), std::nullopt);
}

TEST(RaplTest, AWrappedCounterAddsWhatItCountedPastItsRange) {
  EXPECT_EQ(energy_delta_uj(100, 250, 1000), 150u);
  EXPECT_EQ(energy_delta_uj(900, 50, 999), 150u);  // 900 -> 999, 0 -> 50
  EXPECT_EQ(energy_delta_uj(900, 50, 0), 0u);      // no range known: no wrap to trust
}

TEST(RaplTest, ReadsPackagesAndDramAcrossAWrapFromAFakeTree) {
  trainscope::testing::TempDir tmp("rapl");
  zone(tmp, "intel-rapl:0", "package-0", "999000000\n", "999999999\n");
  zone(tmp, "intel-rapl:0:0", "core", "5000000\n");
  zone(tmp, "intel-rapl:0:1", "dram", "1000000\n");
  zone(tmp, "intel-rapl:1", "package-1", "0\n");
  tmp.write("intel-rapl/enabled", "1\n");  // the control type: no zone
  setenv(std::string(kPowercapRootEnv).c_str(), tmp.path().c_str(), 1);
  absl::StatusOr<RaplReader> reader = RaplReader::Open();
  unsetenv(std::string(kPowercapRootEnv).c_str());
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_EQ(reader->zones().size(), 4u);
  EXPECT_EQ(reader->zones()[0].name, "package-0");
  EXPECT_TRUE(reader->zones()[0].in_total);
  EXPECT_FALSE(reader->zones()[1].in_total);  // core: inside package-0's
  EXPECT_TRUE(reader->zones()[2].in_total);   // dram: measured apart

  // package-0 wraps: 999 J -> 999.999999 J, 0 -> 1 J: 2 J (1 uJ for the wrap itself).
  tmp.write("intel-rapl:0/energy_uj", "1000000\n");
  tmp.write("intel-rapl:0:0/energy_uj", "6000000\n");
  tmp.write("intel-rapl:0:1/energy_uj", "1500000\n");
  tmp.write("intel-rapl:1/energy_uj", "3000000\n");
  std::size_t unread = 9;
  std::vector<double> joules = reader->read_joules(&unread);
  EXPECT_EQ(unread, 0u);
  ASSERT_EQ(joules.size(), 4u);
  EXPECT_NEAR(joules[0], 2.0, 1e-6);
  EXPECT_NEAR(joules[1], 1.0, 1e-9);
  EXPECT_NEAR(joules[2], 0.5, 1e-9);
  EXPECT_NEAR(joules[3], 3.0, 1e-9);
  EXPECT_NEAR(RaplReader::total_joules(reader->zones(), joules), 2.0 + 0.5 + 3.0, 1e-6);

  // A zone that cannot be read keeps its total, counted as unread.
  tmp.write("intel-rapl:1/energy_uj", "garbage\n");
  joules = reader->read_joules(&unread);
  EXPECT_EQ(unread, 1u);
  EXPECT_NEAR(joules[3], 3.0, 1e-9);
}

TEST(RaplTest, TheSourceRecordsTheCpusEnergySinceItOpened) {
  trainscope::testing::TempDir tmp("rapl-source");
  zone(tmp, "intel-rapl:0", "package-0", "1000000\n");
  zone(tmp, "intel-rapl:0:0", "dram", "0\n");
  std::unique_ptr<HardwareSource> source = make_rapl_source(tmp.path().string());
  ASSERT_TRUE(source->open({}).ok());
  tmp.write("intel-rapl:0/energy_uj", "4000000\n");
  tmp.write("intel-rapl:0:0/energy_uj", "500000\n");
  std::vector<HardwareReading> out;
  ASSERT_TRUE(source->sample(&out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].name, kRaplEnergyMetric);
  EXPECT_NEAR(out[0].value, 3.5, 1e-9);
  std::unique_ptr<HardwareSource> none = make_rapl_source((tmp.path() / "absent").string());
  EXPECT_FALSE(none->open({}).ok());
}

TEST(RaplTest, NothingReadableSaysWhyInOneLine) {
  trainscope::testing::TempDir tmp("rapl-none");
  absl::StatusOr<RaplReader> empty = RaplReader::Open(tmp.path().string());
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(std::string(empty.status().message()),
              HasSubstr("holds no intel-rapl:* or amd-rapl:* zone"));
  absl::StatusOr<RaplReader> missing = RaplReader::Open((tmp.path() / "absent").string());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("does not exist"));
  tmp.write("amd-rapl:0/name", "package-0\n");  // no energy_uj
  absl::StatusOr<RaplReader> unreadable = RaplReader::Open(tmp.path().string());
  ASSERT_FALSE(unreadable.ok());
  EXPECT_THAT(std::string(unreadable.status().message()), HasSubstr("energy_uj"));
}

TEST(RaplTest, ThisMachineReadsItsCpuEnergyOrSaysWhyNot) {
  absl::StatusOr<RaplReader> reader = RaplReader::Open(std::string(kPowercapRoot));
  if (!reader.ok()) {
    const std::string why(reader.status().message());
    EXPECT_EQ(why.find('\n'), std::string::npos) << why;  // one line
    EXPECT_THAT(why, HasSubstr("no RAPL energy: "));
    GTEST_SKIP() << why;
  }
  std::vector<double> joules = reader->read_joules();
  EXPECT_EQ(joules.size(), reader->zones().size());
  for (double j : joules) EXPECT_GE(j, 0.0);
}

}  // namespace
}  // namespace trainscope::host
