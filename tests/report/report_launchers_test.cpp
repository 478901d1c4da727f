// The report of a run with several launchers shows each one's environment and
// output (one record per launcher), and a lost launcher as LOST data.
#include <unistd.h>

#include <filesystem>
#include <string>

#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "report/run_data.hpp"
#include "run/run_format.hpp"
#include "support/run_dir_test.hpp"

namespace trainscope::report {
namespace {

using nlohmann::json;

class ReportLaunchersTest : public trainscope::testing::RunDirTest {};

TEST_F(ReportLaunchersTest, EachLaunchersEnvironmentAndOutput) {
  const std::filesystem::path dir = write_run_dir("run");
  const auto write = [&](const std::string& name, const std::string& text) {
    trainscope::testing::write_file(dir / name, text);
  };
  for (const char* host : {"a", "b"}) {
    LauncherState l;
    l.host = host;
    l.pid = 1;
    l.status = RunStatus::kFinished;
    l.exit_code = 0;
    write(run::detail::launcher_file_name(l.host, l.pid), run::detail::format_launcher_file(l));
    write(fmt::format("environment-{}-1.json", host), fmt::format(R"({{"hostname": "{}"}})", host));
    write(fmt::format("stdout-{}-1.log", host), fmt::format("out of {}\n", host));
    write(fmt::format("stderr-{}-1.log", host), fmt::format("err of {}\n", host));
  }
  write("environment.json", R"({"hostname": "a"})");  // the first's, linked
  write("stdout.log", "out of a\n");

  absl::StatusOr<detail::RunData> run = detail::read_run_data(dir.string(), {}, nullptr);
  ASSERT_TRUE(run.ok()) << run.status();
  const json meta = detail::run_page_json(*run, 100)["run"];
  ASSERT_EQ(meta["outputs"].size(), 2u);
  EXPECT_EQ(meta["outputs"][0]["launcher"], "a:1");
  EXPECT_EQ(meta["outputs"][0]["environment"]["hostname"], "a");
  EXPECT_EQ(meta["outputs"][0]["stdout_tail"], "out of a\n");
  EXPECT_EQ(meta["outputs"][1]["launcher"], "b:1");
  EXPECT_EQ(meta["outputs"][1]["environment"]["hostname"], "b");
  EXPECT_EQ(meta["outputs"][1]["stderr_tail"], "err of b\n");
  EXPECT_EQ(meta["stdout_tail"], "out of a\n");
  EXPECT_FALSE(meta["launchers"][0]["lost"].get<bool>());
}

TEST_F(ReportLaunchersTest, OneLauncherOrAnOlderRunKeepsThePlainRecords) {
  const std::filesystem::path dir = write_run_dir("run");
  LauncherState l;
  l.host = "a";
  l.pid = 1;
  l.status = RunStatus::kFinished;
  trainscope::testing::write_file(dir / run::detail::launcher_file_name(l.host, l.pid),
                                  run::detail::format_launcher_file(l));
  trainscope::testing::write_file(dir / "stdout.log", "shared\n");
  trainscope::testing::write_file(dir / "environment.json", R"({"hostname": "a"})");
  absl::StatusOr<detail::RunData> run = detail::read_run_data(dir.string(), {}, nullptr);
  ASSERT_TRUE(run.ok()) << run.status();
  const json meta = detail::run_page_json(*run, 100)["run"];
  EXPECT_FALSE(meta.contains("outputs"));
  EXPECT_EQ(meta["stdout_tail"], "shared\n");
  EXPECT_EQ(meta["environment"]["hostname"], "a");
}

}  // namespace
}  // namespace trainscope::report
