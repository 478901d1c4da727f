// environment.json: one writer and one reader, typed; what older runs wrote still reads.
#include "trainscope/run/environment_record.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/run_dir_test.hpp"
#include "trainscope/run/run_reader.hpp"

namespace trainscope {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using EnvironmentRecordTest = trainscope::testing::RunDirTest;

EnvironmentRecord full_record() {
  EnvironmentRecord r;
  r.hostname = "node17";
  r.os = EnvironmentRecord::OperatingSystem{"Linux", "6.1.0", "#1 SMP", "x86_64"};
  r.cpu_model = "Xeon \"Gold\"";
  r.cores = 32;
  r.memory_mb = 257000;
  r.launcher = "node17-4200";
  r.command_line = {"python", "train.py", "--lr", "0.1"};
  r.cwd = "/home/u/job";
  r.git = EnvironmentRecord::Git{"0123abcd", true};
  r.python = EnvironmentRecord::Python{"/venv/bin/python", "the command", true};
  r.pip_freeze = "artifacts/pip-freeze-node17-4200.txt";
  r.nvidia_smi = "artifacts/nvidia-smi-node17-4200.txt";
  r.driver_version = "550.54";
  r.cuda_version = "12.4";
  return r;
}

TEST(EnvironmentRecordFormat, WhatTheWriterWritesTheReaderReads) {
  const EnvironmentRecord written = full_record();
  absl::StatusOr<EnvironmentRecord> read =
      parse_environment_record(format_environment_record(written), "environment.json");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->hostname, "node17");
  ASSERT_TRUE(read->os.has_value());
  EXPECT_EQ(read->os->release, "6.1.0");
  EXPECT_EQ(read->cpu_model, "Xeon \"Gold\"");
  EXPECT_EQ(read->cores, 32);
  EXPECT_EQ(read->memory_mb, 257000);
  EXPECT_EQ(read->launcher, "node17-4200");
  EXPECT_THAT(read->command_line, ElementsAre("python", "train.py", "--lr", "0.1"));
  ASSERT_TRUE(read->git.has_value());
  EXPECT_EQ(read->git->commit, "0123abcd");
  EXPECT_TRUE(read->git->dirty);
  ASSERT_TRUE(read->python.has_value());
  EXPECT_EQ(read->python->from, "the command");
  EXPECT_TRUE(read->python->pip_freeze_cached);
  EXPECT_EQ(read->pip_freeze, written.pip_freeze);
  EXPECT_EQ(read->conda_list, "");
  EXPECT_EQ(read->driver_version, "550.54");
  EXPECT_EQ(read->hardware(), "Xeon \"Gold\", 32 cores, 257000 MB");
}

TEST(EnvironmentRecordFormat, AnOlderRunsDocumentReadsWithWhatItHas) {
  // Written before the python member and per-launcher records; memory as a float.
  absl::StatusOr<EnvironmentRecord> read = parse_environment_record(
      R"({"hostname":"h","cores":2,"memory_mb":24003.0,"command_line":["true"],)"
      R"("pip_freeze":"artifacts/pip-freeze.txt","future_field":{"x":1}})",
      "run/environment.json");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_FALSE(read->python.has_value());
  EXPECT_FALSE(read->git.has_value());
  EXPECT_EQ(read->memory_mb, 24003);
  EXPECT_EQ(read->hardware(), "2 cores, 24003 MB");
}

TEST(EnvironmentRecordFormat, AWrongFieldIsNamedWithTheFile) {
  for (const auto& [text, field] :
       {std::pair{R"({"cores":"many"})", "cores"}, std::pair{R"({"git":{"dirty":true}})", "commit"},
        std::pair{R"({"memory_mb":-5})", "memory_mb"}, std::pair{R"([1,2])", "object"},
        std::pair{R"({"command_line":"python x.py"})", "command_line"}}) {
    absl::StatusOr<EnvironmentRecord> read = parse_environment_record(text, "r/environment.json");
    ASSERT_FALSE(read.ok()) << text;
    EXPECT_THAT(read.status().message(), HasSubstr("r/environment.json")) << text;
    EXPECT_THAT(read.status().message(), HasSubstr(field)) << read.status();
  }
  EXPECT_FALSE(parse_environment_record("{\"cores\": 2", "e.json").ok());  // not JSON
}

TEST_F(EnvironmentRecordTest, TheReaderGivesTheRecordAndTheArtifactsItNames) {
  const std::filesystem::path dir = write_run_dir("run");
  std::filesystem::create_directories(dir / "artifacts");
  trainscope::testing::write_file(dir / "artifacts" / "pip-freeze.txt", "numpy==1.26.4\n");
  EnvironmentRecord env = full_record();
  env.pip_freeze = "artifacts/pip-freeze.txt";
  trainscope::testing::write_file(dir / "environment.json", format_environment_record(env));
  RunReader reader = open_run(dir.string());
  absl::StatusOr<EnvironmentRecord> read = reader.environment_record();
  ASSERT_TRUE(read.ok()) << read.status();
  absl::StatusOr<std::string> pins = reader.read_run_relative_file(read->pip_freeze);
  ASSERT_TRUE(pins.ok()) << pins.status();
  EXPECT_EQ(*pins, "numpy==1.26.4\n");
  // Nothing outside the run directory, whatever a damaged document names.
  for (const char* outside : {"../other/run.json", "/etc/passwd", "artifacts/../../x", ""}) {
    absl::StatusOr<std::string> text = reader.read_run_relative_file(outside);
    ASSERT_FALSE(text.ok()) << outside;
    EXPECT_TRUE(absl::IsInvalidArgument(text.status())) << text.status();
  }
  EXPECT_TRUE(absl::IsNotFound(reader.read_run_relative_file("artifacts/none.txt").status()));
}

TEST_F(EnvironmentRecordTest, ARunWithoutOneIsNotFound) {
  RunReader reader = open_run(write_run_dir("bare").string());
  EXPECT_TRUE(absl::IsNotFound(reader.environment_record().status()));
}

}  // namespace
}  // namespace trainscope
