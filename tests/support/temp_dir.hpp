// A fresh, empty directory for one test, removed again when it goes out of
// scope unless the test failed (then it is kept, and its path printed, so the
// files can be looked at).
//
//   TempDir tmp;                                // <base>/<Suite>.<Test>-XXXXXX
//   const std::string path = tmp.file("out.json");  // a path in it; nothing created
//   tmp.write("in.txt", "PARAMETER p\n");            // a file in it, written whole
//
// <base> is TRAINSCOPE_TEST_TMPDIR (the GoogleTest executables get it from
// tests/CMakeLists.txt), so ctest's parallel processes, and the tests of one
// process, never share a directory: mkdtemp makes the name unique. Without
// TRAINSCOPE_TEST_TMPDIR (e.g. a libFuzzer target) the header needs no
// GoogleTest: <base> is std::filesystem::temp_directory_path(), a label must
// be given, and the directory is always removed.
#ifndef TRAINSCOPE_TESTS_SUPPORT_TEMP_DIR_HPP_
#define TRAINSCOPE_TESTS_SUPPORT_TEMP_DIR_HPP_

#include <stdlib.h>  // mkdtemp

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#ifdef TRAINSCOPE_TEST_TMPDIR
#include "gtest/gtest.h"
#endif

namespace trainscope::testing {

// Writes `contents` to `path` whole (parent directories created, an existing
// file replaced; binary, so "\r\n" stays); `append` adds to its end instead.
inline void write_file(const std::filesystem::path& path, std::string_view contents,
                       bool append = false) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | (append ? std::ios::app : std::ios::trunc));
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

// The whole file ("" when it cannot be read: tests assert on the contents).
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// `text` split at '\n' (no trailing empty line).
inline std::vector<std::string> lines_of(std::string_view text) {
  std::vector<std::string> lines;
  std::size_t begin = 0;
  while (begin < text.size()) {
    const std::size_t end = std::min(text.find('\n', begin), text.size());
    lines.emplace_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return lines;
}

class TempDir {
 public:
  // `label` starts the directory's name; empty: "<Suite>.<Test>" of the
  // running test ("/" of parameterized names replaced).
  explicit TempDir(std::string_view label = {}) {
    std::string name(label);
#ifdef TRAINSCOPE_TEST_TMPDIR
    const std::filesystem::path base = TRAINSCOPE_TEST_TMPDIR;
    if (name.empty()) {
      const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
      name =
          info == nullptr ? "no-test" : std::string(info->test_suite_name()) + "." + info->name();
    }
#else
    const std::filesystem::path base = std::filesystem::temp_directory_path();
    if (name.empty()) name = "trainscope";
#endif
    for (char& c : name) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) {
        c = '_';
      }
    }
    std::filesystem::create_directories(base);
    std::string pattern = (base / (name + "-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
    }
    path_ = pattern;
  }
  ~TempDir() {
#ifdef TRAINSCOPE_TEST_TMPDIR
    if (::testing::Test::HasFailure()) {
      std::fprintf(stderr, "test failed: kept %s\n", path_.c_str());
      return;
    }
#endif
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  // path()/name as a string (name may contain "/"); nothing is created.
  std::string file(std::string_view name) const { return (path_ / name).string(); }
  // path()/name as a new directory (parents too).
  std::filesystem::path subdir(std::string_view name) const {
    std::filesystem::create_directories(path_ / name);
    return path_ / name;
  }
  // path()/name written whole with `contents` (see write_file); returns its path.
  std::string write(std::string_view name, std::string_view contents) const {
    write_file(path_ / name, contents);
    return file(name);
  }

 private:
  std::filesystem::path path_;
};

}  // namespace trainscope::testing

#endif  // TRAINSCOPE_TESTS_SUPPORT_TEMP_DIR_HPP_
