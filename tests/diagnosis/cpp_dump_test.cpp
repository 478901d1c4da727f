// A C++ rank's dump: a program that records (a Run handling signals) and hangs
// inside a region is asked (`trainscope dump`: request_dump); its signal-safe
// handler appends the regions open to dump-<rank>.txt, the program's own
// handler for the signal still runs first, the dump reader reads the file and
// the HANG evidence names the region. Every wait is bounded; the child is
// killed at the end whatever happened.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/temp_dir.hpp"
#include "trainscope/diagnosis/hang.hpp"
#include "trainscope/launch/dump.hpp"
#include "trainscope/run/run.hpp"
#include "trainscope/timing/timer.hpp"

namespace trainscope::diagnosis {
namespace {

using ::testing::HasSubstr;

int g_program_fd = -1;  // the child's own handler reports on it
extern "C" void program_handler(int) {
  const char byte = 'H';
  (void)!::write(g_program_fd, &byte, 1);
}

// Records into `dir`, opens OUTER then LOAD and waits there forever.
[[noreturn]] void hung_child(const std::string& dir, int ready_fd, int program_fd) {
  g_program_fd = program_fd;
  struct sigaction action = {};
  action.sa_handler = program_handler;
  sigemptyset(&action.sa_mask);
  ::sigaction(dump_signal(), &action, nullptr);  // the program's own handler
  RunOptions options;
  options.dir = dir;
  options.attach_from_environment = false;
  options.mlflow_from_environment = false;
  options.flush_interval = absl::Milliseconds(100);
  absl::StatusOr<std::unique_ptr<Run>> run = Run::Start(options);
  if (!run.ok()) ::_exit(3);
  Timer timer;
  (*run)->attach(timer);
  timer.start(Key("OUTER"));
  timer.start(Key("LOAD"));
  timer.start(Key("DONE"));
  timer.end(Key("DONE"));  // closed: not in the dump
  const char byte = 'R';
  if (::write(ready_fd, &byte, 1) != 1) ::_exit(4);
  for (;;) ::pause();
}

bool read_byte(int fd, int timeout_ms, char* byte) {
  pollfd p = {fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1 && ::read(fd, byte, 1) == 1;
}

TEST(CppDump, AHungCppRankDumpsItsOpenRegionsAndTheEvidenceNamesThem) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("run");
  int ready[2], program[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(program), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) hung_child(dir, ready[1], program[1]);
  ::close(ready[1]);
  ::close(program[1]);
  char byte = 0;
  const bool started = read_byte(ready[0], 60'000, &byte);
  std::string text;
  absl::StatusOr<DumpRequest> asked = absl::UnknownError("not asked");
  if (started) {
    asked = request_dump(dir);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      text = testing::read_file(dir + "/dump-0.txt");
      if (text.find("\nend\n") != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  const bool program_ran = started && read_byte(program[0], 10'000, &byte) && byte == 'H';
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ::close(ready[0]);
  ::close(program[0]);

  ASSERT_TRUE(started) << "the child did not start recording";
  ASSERT_TRUE(asked.ok()) << asked.status();
  EXPECT_EQ(asked->asked, std::vector<std::uint32_t>{0});
  EXPECT_TRUE(program_ran) << "the program's handler was replaced";
  ASSERT_THAT(text, HasSubstr("\nend\n"));
  EXPECT_THAT(text, HasSubstr("trainscope.regions-dump 1\nrank 0 pid "));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("DONE")));

  std::vector<std::string> notes;
  const std::vector<RankDump> dumps = read_dumps(dir, &notes);
  EXPECT_TRUE(notes.empty()) << notes[0];
  ASSERT_EQ(dumps.size(), 1u);
  EXPECT_EQ(dumps[0].pid, child);
  EXPECT_EQ(dumps[0].file, "dump-0.txt");
  ASSERT_EQ(dumps[0].regions.size(), 2u);
  EXPECT_THAT(dumps[0].regions[0], HasSubstr("OUTER (open "));
  EXPECT_THAT(dumps[0].regions[1], HasSubstr("LOAD (open "));
  std::vector<Label> hangs(1);
  hangs[0].name = LabelName::kHang;
  hangs[0].rank = 0;
  add_dump_evidence(&hangs, dumps);
  EXPECT_THAT(hangs[0].evidence, HasSubstr("dump-0.txt at "));
  EXPECT_THAT(hangs[0].evidence, HasSubstr("regions open: OUTER (open "));
  EXPECT_THAT(hangs[0].evidence, HasSubstr(" > LOAD (open "));
}

}  // namespace
}  // namespace trainscope::diagnosis
