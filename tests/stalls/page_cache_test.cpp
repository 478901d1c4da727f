// Eviction and warm-up of a dataset's pages, without root: posix_fadvise and
// mincore on real files (the test directory must be on a filesystem with a
// page cache, as ext4 or xfs; tmpfs keeps every page and is skipped).
#include "trainscope/stalls/page_cache.hpp"

#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "support/temp_dir.hpp"

namespace trainscope::stalls {
namespace {

constexpr long kTmpfsMagic = 0x01021994;

std::string dataset(const testing::TempDir& tmp, int files, std::size_t bytes) {
  const std::string dir = tmp.file("data");
  for (int i = 0; i < files; ++i) {
    testing::write_file(dir + "/class" + std::to_string(i % 3) + "/sample" + std::to_string(i),
                        std::string(bytes, static_cast<char>('a' + i % 26)));
  }
  return dir;
}

bool on_tmpfs(const std::string& path) {
  struct statfs fs {};
  return ::statfs(path.c_str(), &fs) == 0 && fs.f_type == kTmpfsMagic;
}

TEST(PageCache, DatasetFilesAreEveryRegularFileSorted) {
  testing::TempDir tmp;
  const std::string dir = dataset(tmp, 7, 1000);
  absl::StatusOr<std::vector<std::string>> files = dataset_files(dir);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->size(), 7u);
  EXPECT_TRUE(std::is_sorted(files->begin(), files->end()));
  absl::StatusOr<std::vector<std::string>> one = dataset_files(files->front());
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->size(), 1u);
}

TEST(PageCache, BadDatasetsAreClearErrorsNamingThePath) {
  testing::TempDir tmp;
  absl::StatusOr<std::vector<std::string>> missing = dataset_files(tmp.file("nothere"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nothere: no such file"), std::string::npos)
      << missing.status();
  absl::StatusOr<std::vector<std::string>> empty = dataset_files(tmp.subdir("empty").string());
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("holds no file"), std::string::npos);
  testing::write_file(tmp.file("zeros/a"), "");
  absl::StatusOr<std::vector<std::string>> zeros = dataset_files(tmp.file("zeros"));
  ASSERT_FALSE(zeros.ok());
  EXPECT_NE(zeros.status().message().find("every file is empty"), std::string::npos);
}

// Evicts, checks non-resident, warms, checks resident; 0 when all held.
int evict_then_warm(const std::vector<std::string>& files, std::string* why) {
  const Residency evicted = evict(files);
  if (!evicted.unreadable.empty()) {
    *why = "unreadable: " + evicted.unreadable.front();
    return 1;
  }
  if (evicted.share() > 0.01) {
    *why = "after eviction " + std::to_string(evicted.share()) + " resident";
    return 2;
  }
  const Residency warmed = warm(files);
  if (warmed.share() < 0.99) {
    *why = "after warm-up " + std::to_string(warmed.share()) + " resident";
    return 3;
  }
  if (residency(files).resident_bytes != warmed.resident_bytes) {
    *why = "residency changed without a read";
    return 4;
  }
  return 0;
}

TEST(PageCache, EvictionLeavesNothingResidentAndWarmUpEverything) {
  testing::TempDir tmp;
  if (on_tmpfs(tmp.str())) GTEST_SKIP() << tmp.str() << " is on tmpfs: its pages cannot be evicted";
  const std::string dir = dataset(tmp, 12, 256 * 1024 + 17);
  absl::StatusOr<std::vector<std::string>> files = dataset_files(dir);
  ASSERT_TRUE(files.ok());
  const Residency before = residency(*files);
  EXPECT_EQ(before.files, 12u);
  EXPECT_EQ(before.bytes, 12u * (256 * 1024 + 17));
  std::string why;
  EXPECT_EQ(evict_then_warm(*files, &why), 0) << why;
  // A warm-up bounded to a third reads about a third.
  evict(*files);
  const Residency partial = warm(*files, before.bytes / 3);
  EXPECT_GT(partial.share(), 0.2);
  EXPECT_LT(partial.share(), 0.5);
}

TEST(PageCache, WorksAsAUserWithoutRoot) {
  if (::geteuid() != 0) {
    // Not root already: the test above ran without root.
    GTEST_SKIP() << "running as uid " << ::geteuid() << ": the other tests are the non-root test";
  }
  testing::TempDir tmp;
  if (on_tmpfs(tmp.str())) GTEST_SKIP() << tmp.str() << " is on tmpfs";
  const std::string dir = dataset(tmp, 4, 128 * 1024);
  absl::StatusOr<std::vector<std::string>> files = dataset_files(dir);
  ASSERT_TRUE(files.ok());
  std::filesystem::permissions(tmp.path(), std::filesystem::perms::all,
                               std::filesystem::perm_options::add);
  for (const auto& entry : std::filesystem::recursive_directory_iterator(tmp.path())) {
    std::filesystem::permissions(entry.path(), std::filesystem::perms::all,
                                 std::filesystem::perm_options::add);
  }
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // nobody:nogroup
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(10);
    std::string why;
    ::_exit(evict_then_warm(*files, &why));
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1 unreadable, 2 not evicted, 3 not warmed, 4 changed, "
                                       "10 could not become nobody";
}

TEST(PageCache, MemoryFacts) {
  EXPECT_GT(available_memory_bytes(), 0u);
  EXPECT_GT(memory_bandwidth_mb_s(), 100.0);  // any machine copies faster than a disk
}

}  // namespace
}  // namespace trainscope::stalls
