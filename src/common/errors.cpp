#include "trainscope/common/errors.hpp"

#include <atomic>
#include <cstdio>

namespace trainscope {
namespace {

void print_to_stderr(const std::string& message) {
  std::fprintf(stderr, "trainscope: warning: %s\n", message.c_str());
}

std::atomic<WarningHandler> g_handler{&print_to_stderr};

}  // namespace

namespace detail {
void throw_timer_error(const absl::Status& status) { throw TimerError(status); }
}  // namespace detail

WarningHandler set_warning_handler(WarningHandler handler) {
  return g_handler.exchange(handler != nullptr ? handler : &print_to_stderr);
}

void warn(const std::string& message) { g_handler.load()(message); }

}  // namespace trainscope
