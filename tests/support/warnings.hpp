// Captures trainscope's warnings for one scope: while a CapturedWarnings
// lives, every warn() (from any thread) is recorded in it instead of being
// printed; its destructor puts back the handler that was installed before.
//
//   CapturedWarnings warnings;  // a local, or a fixture member
//   ...code that warns...
//   ASSERT_EQ(warnings.count(), 1u);
//   EXPECT_THAT(warnings.messages()[0], HasSubstr("meminfo"));
//
// The handler is a plain function pointer, so the active capture is a global;
// captures nest (the innermost one records). Works in a forked child too.
#ifndef TRAINSCOPE_TESTS_SUPPORT_WARNINGS_HPP_
#define TRAINSCOPE_TESTS_SUPPORT_WARNINGS_HPP_

#include <cstddef>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "trainscope/common/errors.hpp"

namespace trainscope::testing {

class CapturedWarnings {
 public:
  CapturedWarnings() {
    std::lock_guard<std::mutex> lock(mutex());
    outer_ = active();
    active() = this;
    previous_handler_ = set_warning_handler(&record);
  }
  ~CapturedWarnings() {
    std::lock_guard<std::mutex> lock(mutex());
    set_warning_handler(previous_handler_);
    active() = outer_;
  }
  CapturedWarnings(const CapturedWarnings&) = delete;
  CapturedWarnings& operator=(const CapturedWarnings&) = delete;

  // Every warning so far, oldest first (a copy: other threads may still warn).
  std::vector<std::string> messages() const {
    std::lock_guard<std::mutex> lock(mutex());
    return messages_;
  }
  std::size_t count() const {
    std::lock_guard<std::mutex> lock(mutex());
    return messages_.size();
  }
  bool empty() const { return count() == 0; }
  // Whether some warning contains `text`.
  bool contains(std::string_view text) const {
    std::lock_guard<std::mutex> lock(mutex());
    for (const std::string& message : messages_) {
      if (message.find(text) != std::string::npos) return true;
    }
    return false;
  }
  // Every warning, one per line: for failure messages.
  std::string joined() const {
    std::string out;
    for (const std::string& message : messages()) out += message + "\n";
    return out;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex());
    messages_.clear();
  }

 private:
  static std::mutex& mutex() {
    static std::mutex* mu = new std::mutex;  // never destroyed: threads may warn at exit
    return *mu;
  }
  static CapturedWarnings*& active() {
    static CapturedWarnings* capture = nullptr;
    return capture;
  }
  static void record(const std::string& message) {
    std::lock_guard<std::mutex> lock(mutex());
    if (active() != nullptr) {
      active()->messages_.push_back(message);
    } else {  // a thread that read the handler just before the capture ended
      std::fprintf(stderr, "trainscope: warning: %s\n", message.c_str());
    }
  }

  CapturedWarnings* outer_ = nullptr;
  WarningHandler previous_handler_ = nullptr;
  std::vector<std::string> messages_;
};

}  // namespace trainscope::testing

#endif  // TRAINSCOPE_TESTS_SUPPORT_WARNINGS_HPP_
