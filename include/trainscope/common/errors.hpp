// Errors. Every operation has a Status-returning form (try_start, ...) for
// code without exceptions, and a throwing form with Deep500's names. Either
// way a failed call leaves the timer exactly as it was.
#ifndef TRAINSCOPE_COMMON_ERRORS_HPP_
#define TRAINSCOPE_COMMON_ERRORS_HPP_

#include <stdexcept>
#include <string>

#include "absl/status/status.h"

namespace trainscope {

// Thrown by the throwing API. kInvalidArgument marks what Deep500 reports as
// ValueError (e.g. TimeType::ALL in start/end); the rest are RuntimeError.
class TimerError : public std::runtime_error {
 public:
  explicit TimerError(const absl::Status& status)
      : std::runtime_error(std::string(status.message())), code_(status.code()) {}
  absl::StatusCode code() const noexcept { return code_; }

 private:
  absl::StatusCode code_;
};

namespace detail {
[[noreturn]] void throw_timer_error(const absl::Status& status);
inline void throw_if_error(const absl::Status& status) {
  if (!status.ok()) throw_timer_error(status);
}
}  // namespace detail

// Receives every warning (no GPU, dropped stream samples, exporter failures).
// Default: one line on stderr prefixed "trainscope: warning: ". Thread-safe.
using WarningHandler = void (*)(const std::string& message);
WarningHandler set_warning_handler(WarningHandler handler);
void warn(const std::string& message);

}  // namespace trainscope

#endif  // TRAINSCOPE_COMMON_ERRORS_HPP_
