// The file writers and readers of src/common/files.hpp and the CSV field of
// src/common/csv.hpp, which every room's documents go through.
//
// The crash tests kill a forked child at a chosen system call with a seccomp
// filter (SECCOMP_RET_KILL: the kernel ends the process with SIGSYS when it
// makes that call, as a crash or a power loss would stop it there), so the
// writers run unchanged, without a test seam.
#include "common/files.hpp"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/csv.hpp"
#include "gtest/gtest.h"
#include "support/temp_dir.hpp"

namespace trainscope::detail {
namespace {

namespace fs = std::filesystem;
using ::trainscope::testing::read_file;
using ::trainscope::testing::TempDir;

// The names in `dir`, sorted.
std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Contents larger than one write() of a pipe and than the copy buffer, with
// every byte value, so a partial or altered file shows.
std::string big_contents(char seed) {
  std::string out(300 * 1024 + 17, '\0');
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(seed + i * 31);
  return out;
}

// The system calls a crash stops at.
enum class Stage {
  kSync,    // fsync: the temporary file is written, not yet durable
  kRename,  // rename/renameat/renameat2: written and synced, not yet in place
};

std::vector<long> syscalls_of(Stage stage) {
  switch (stage) {
    case Stage::kSync:
      return {SYS_fsync, SYS_fdatasync};
    case Stage::kRename:
      return {
#ifdef SYS_rename
          SYS_rename,
#endif
#ifdef SYS_renameat
          SYS_renameat,
#endif
#ifdef SYS_renameat2
          SYS_renameat2,
#endif
      };
  }
  return {};
}

// In the child: from here on, any of `numbers` kills the process. False when
// this kernel or container allows no seccomp filter.
bool die_at_syscalls(const std::vector<long>& numbers) {
  std::vector<sock_filter> program;
  program.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
  for (std::size_t i = 0; i < numbers.size(); ++i) {
    // Equal: jump to the kill at the end (numbers.size() - i instructions on).
    program.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<__u32>(numbers[i]),
                               static_cast<__u8>(numbers.size() - i), 0));
  }
  program.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
#ifdef SECCOMP_RET_KILL_PROCESS
  program.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
#else
  program.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL));
#endif
  sock_fprog fprog{static_cast<unsigned short>(program.size()), program.data()};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  return ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog) == 0;
}

constexpr int kNoSeccomp = 77;
constexpr int kReturned = 0;
constexpr int kFailed = 1;

struct Crash {
  bool skipped = false;  // no seccomp here
  bool killed = false;   // died with SIGSYS at the stage
  int exit_code = -1;    // otherwise
  pid_t pid = 0;
};

// Runs `write` in a child that dies at `stage`'s system calls.
template <typename Write>
Crash crash_during(Stage stage, Write write) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (!die_at_syscalls(syscalls_of(stage))) ::_exit(kNoSeccomp);
    const absl::Status status = write();
    ::_exit(status.ok() ? kReturned : kFailed);
  }
  Crash crash;
  crash.pid = pid;
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(wstatus)) {
    crash.exit_code = WEXITSTATUS(wstatus);
    crash.skipped = crash.exit_code == kNoSeccomp;
  } else {
    crash.killed = WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGSYS;
  }
  return crash;
}

// The temporary files a child `pid` left in `dir` ("<name>.tmp-<pid>-<n>" or
// "<prefix><pid>-<n>-<name>").
std::vector<std::string> leftovers_of(pid_t pid, const fs::path& dir, const std::string& name) {
  std::vector<std::string> out;
  const std::string pid_text = std::to_string(pid);
  for (const std::string& entry : names_in(dir)) {
    if (entry != name && entry.find(pid_text) != std::string::npos) out.push_back(entry);
  }
  return out;
}

class CrashTest : public ::testing::TestWithParam<Stage> {};

TEST_P(CrashTest, AtomicReplaceKeepsTheOldContentsWhenTheWriterDies) {
  TempDir tmp;
  const std::string old_contents = big_contents('a');
  const std::string path = tmp.write("doc.json", old_contents);
  const std::string new_contents = big_contents('n');

  const Crash crash =
      crash_during(GetParam(), [&] { return write_file_atomically(path, new_contents); });
  if (crash.skipped) GTEST_SKIP() << "no seccomp filter allowed here (prctl failed)";
  ASSERT_TRUE(crash.killed) << "the writer did not die at the system call (exit code "
                            << crash.exit_code << ")";

  // The real name still holds every byte of the old file.
  EXPECT_EQ(read_file(path), old_contents);
  absl::StatusOr<std::string> read = read_whole_file(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, old_contents);
  // The new contents went only to the temporary file next to it.
  const std::vector<std::string> left = leftovers_of(crash.pid, tmp.path(), "doc.json");
  ASSERT_EQ(left.size(), 1u) << "expected the child's temporary file";
  EXPECT_EQ(left[0].rfind("doc.json.tmp-", 0), 0u) << left[0];
  EXPECT_EQ(read_file(tmp.path() / left[0]), new_contents);

  // A later writer replaces the file as usual.
  ASSERT_TRUE(write_file_atomically(path, new_contents).ok());
  EXPECT_EQ(read_file(path), new_contents);
}

TEST_P(CrashTest, AtomicReplaceOfANewFileLeavesNoFileUnderTheName) {
  TempDir tmp;
  const std::string path = tmp.file("new.json");
  const Crash crash =
      crash_during(GetParam(), [&] { return write_file_atomically(path, big_contents('x')); });
  if (crash.skipped) GTEST_SKIP() << "no seccomp filter allowed here (prctl failed)";
  ASSERT_TRUE(crash.killed) << "exit code " << crash.exit_code;
  EXPECT_FALSE(fs::exists(path));
  absl::StatusOr<std::string> read = read_whole_file(path);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
}

TEST_P(CrashTest, AtomicCopyKeepsTheOldTargetWhenTheCopierDies) {
  TempDir tmp;
  const std::string source = tmp.write("source.bin", big_contents('s'));
  const std::string target = tmp.write("target.bin", big_contents('t'));
  const Crash crash =
      crash_during(GetParam(), [&] { return copy_file_atomically(source, target, ".copy-"); });
  if (crash.skipped) GTEST_SKIP() << "no seccomp filter allowed here (prctl failed)";
  ASSERT_TRUE(crash.killed) << "exit code " << crash.exit_code;
  EXPECT_EQ(read_file(target), big_contents('t'));
  EXPECT_EQ(read_file(source), big_contents('s'));
  const std::vector<std::string> left = leftovers_of(crash.pid, tmp.path(), "target.bin");
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].rfind(".copy-", 0), 0u) << left[0];
}

INSTANTIATE_TEST_SUITE_P(Files, CrashTest, ::testing::Values(Stage::kSync, Stage::kRename),
                         [](const ::testing::TestParamInfo<Stage>& info) {
                           return info.param == Stage::kSync ? "BeforeSync" : "BeforeRename";
                         });

TEST(FilesTest, AtomicReplaceWritesTheContentsAndLeavesNothingElse) {
  TempDir tmp;
  const std::string path = tmp.write("doc.json", "old\n");
  ASSERT_TRUE(write_file_atomically(path, big_contents('n')).ok());
  EXPECT_EQ(read_file(path), big_contents('n'));
  ASSERT_TRUE(write_file_atomically(path, "", ".doc-").ok());
  EXPECT_EQ(read_file(path), "");
  EXPECT_EQ(names_in(tmp.path()), std::vector<std::string>{"doc.json"});
}

TEST(FilesTest, AtomicReplaceIntoAMissingDirectoryNamesThePathAndCreatesNothing) {
  TempDir tmp;
  const std::string path = tmp.file("no-such-dir/doc.json");
  const absl::Status status = write_file_atomically(path, "x");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(status.message().find("cannot replace \"" + path + "\": "), std::string::npos)
      << status;
  EXPECT_TRUE(names_in(tmp.path()).empty());
}

TEST(FilesTest, WriteNewFileRefusesAnExistingFileAndKeepsIt) {
  TempDir tmp;
  const std::string path = tmp.write("stats.txt", "recorded\n");
  const absl::Status status = write_new_file(path, "other\n");
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(status.message().find(path), std::string::npos) << status;
  EXPECT_EQ(read_file(path), "recorded\n");

  const std::string fresh = tmp.file("fresh.txt");
  ASSERT_TRUE(write_new_file(fresh, big_contents('f')).ok());
  EXPECT_EQ(read_file(fresh), big_contents('f'));
}

TEST(FilesTest, CreateExclusivelyHasOneWinnerAndNeverTruncates) {
  TempDir tmp;
  const std::string path = tmp.file("run.json");
  bool created = false;
  ASSERT_TRUE(create_file_exclusively(path, "first\n", &created).ok());
  EXPECT_TRUE(created);
  ASSERT_TRUE(create_file_exclusively(path, "second, longer\n", &created).ok());
  EXPECT_FALSE(created);
  ASSERT_TRUE(create_file_exclusively(path, "", &created).ok());
  EXPECT_FALSE(created);
  EXPECT_EQ(read_file(path), "first\n");
  EXPECT_EQ(names_in(tmp.path()), std::vector<std::string>{"run.json"});
}

TEST(FilesTest, CreateExclusivelyInAMissingDirectoryIsAnErrorNamingThePath) {
  TempDir tmp;
  bool created = true;
  const absl::Status status = create_file_exclusively(tmp.file("missing/run.json"), "x", &created);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(status.message().find("missing/run.json"), std::string::npos) << status;
}

TEST(FilesTest, AtomicCopyCopiesEveryByteAndReplacesTheTarget) {
  TempDir tmp;
  const std::string source = tmp.write("source.bin", big_contents('s'));
  const std::string target = tmp.write("artifacts/model.bin", "old target");
  ASSERT_TRUE(copy_file_atomically(source, target, ".trainscope-tmp-").ok());
  EXPECT_EQ(read_file(target), big_contents('s'));
  EXPECT_EQ(read_file(source), big_contents('s'));
  EXPECT_EQ(names_in(tmp.path() / "artifacts"), std::vector<std::string>{"model.bin"});

  const std::string empty = tmp.write("empty", "");
  ASSERT_TRUE(copy_file_atomically(empty, tmp.file("artifacts/empty"), ".trainscope-tmp-").ok());
  EXPECT_EQ(read_file(tmp.file("artifacts/empty")), "");
}

TEST(FilesTest, AtomicCopyErrorsNameTheSourceAndLeaveTheTargetAlone) {
  TempDir tmp;
  const std::string target = tmp.write("target.bin", "kept");
  absl::Status status = copy_file_atomically(tmp.file("missing.bin"), target, ".tmp-");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(status.message().find("missing.bin"), std::string::npos) << status;

  status = copy_file_atomically(tmp.subdir("a-directory").string(), target, ".tmp-");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("a-directory\": not a regular file"), std::string::npos)
      << status;

  EXPECT_EQ(read_file(target), "kept");
  EXPECT_EQ(names_in(tmp.path()), (std::vector<std::string>{"a-directory", "target.bin"}));
}

TEST(FilesTest, ReadWholeFileReadsEveryByteAndErrorsNameThePath) {
  TempDir tmp;
  EXPECT_EQ(*read_whole_file(tmp.write("empty", "")), "");
  const std::string big = tmp.write("big.bin", big_contents('r'));
  absl::StatusOr<std::string> read = read_whole_file(big);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, big_contents('r'));

  const std::string missing = tmp.file("summary-0.json");
  read = read_whole_file(missing);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(read.status().message().find("cannot open \"" + missing + "\""), std::string::npos)
      << read.status();

  const std::string dir = tmp.subdir("a-dir").string();
  read = read_whole_file(dir);
  EXPECT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find(dir), std::string::npos) << read.status();
}

TEST(FilesTest, ReadWholeFdRereadsFromTheStartReusingTheBuffer) {
  TempDir tmp;
  const std::string path = tmp.write("stat", "first contents");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::string buffer;
  ASSERT_TRUE(read_whole_fd(fd, path, &buffer).ok());
  EXPECT_EQ(buffer, "first contents");
  ASSERT_TRUE(read_small_fd(fd, path, &buffer).ok());
  EXPECT_EQ(buffer, "first contents");
  ::close(fd);
  // A closed descriptor: the error names the path.
  const absl::Status status = read_small_fd(fd, path, &buffer);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find(path), std::string::npos) << status;
}

TEST(FilesTest, FileErrorEscapesThePathAndMapsErrno) {
  const absl::Status status = file_error(ENOSPC, "write", "out/\x01name\n.csv");
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(status.message().find("cannot write \"out/\\x01name\\n.csv\""), std::string::npos)
      << status;
  EXPECT_EQ(file_error(EACCES, "open", "x").code(), absl::StatusCode::kPermissionDenied);
}

TEST(FilesTest, TemporaryPathsAreUniqueAndNextToThePath) {
  const std::string a = temporary_path("/runs/r/rank-0.json");
  const std::string b = temporary_path("/runs/r/rank-0.json");
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind("/runs/r/rank-0.json.tmp-" + std::to_string(::getpid()) + "-", 0), 0u) << a;
  const std::string c = temporary_path("/runs/r/artifacts/model.bin", ".trainscope-tmp-");
  EXPECT_EQ(c.rfind("/runs/r/artifacts/.trainscope-tmp-" + std::to_string(::getpid()) + "-", 0), 0u)
      << c;
  EXPECT_EQ(c.substr(c.size() - std::string("-model.bin").size()), "-model.bin");
  EXPECT_EQ(temporary_path("plain", ".p-").rfind(".p-", 0), 0u);
}

TEST(CsvTest, FieldsAreQuotedOnlyWhenRfc4180NeedsIt) {
  EXPECT_EQ(csv_field(""), "");
  EXPECT_EQ(csv_field("BATCH"), "BATCH");
  EXPECT_EQ(csv_field("with space and 'single'"), "with space and 'single'");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("line\nbreak"), "\"line\nbreak\"");
  EXPECT_EQ(csv_field("cr\r"), "\"cr\r\"");
  EXPECT_EQ(csv_field("\""), "\"\"\"\"");
  std::string row = "k,";
  append_csv_field("x,y", &row);
  row.push_back(',');
  append_csv_field("z", &row);
  EXPECT_EQ(row, "k,\"x,y\",z");
}

}  // namespace
}  // namespace trainscope::detail
