#ifndef TRAINSCOPE_TIMING_SCOPED_REGION_HPP_
#define TRAINSCOPE_TIMING_SCOPED_REGION_HPP_

#include <string>

#include "absl/status/status.h"
#include "trainscope/common/errors.hpp"
#include "trainscope/timing/time_type.hpp"

namespace trainscope {

// RAII region: starts in the constructor (throwing TimerError on misuse) and
// ends in the destructor. An end that fails in the destructor cannot throw;
// it goes to warn() (possible only if the key was ended by hand meanwhile).
template <typename TimerT>
class ScopedRegion {
 public:
  ScopedRegion(TimerT& timer, Key key, bool gpu = false) : timer_(&timer), key_(key), gpu_(gpu) {
    detail::throw_if_error(start());
  }
  ScopedRegion(ScopedRegion&& other) noexcept
      : timer_(other.timer_), key_(other.key_), gpu_(other.gpu_) {
    other.timer_ = nullptr;
  }
  ScopedRegion(const ScopedRegion&) = delete;
  ScopedRegion& operator=(const ScopedRegion&) = delete;
  ScopedRegion& operator=(ScopedRegion&&) = delete;
  ~ScopedRegion() {
    if (timer_ == nullptr) return;
    absl::Status status = finish();
    if (!status.ok()) warn(std::string(status.message()));
  }

 private:
  absl::Status start() {
    if constexpr (TimerT::kTimesGpu) {
      return timer_->try_start(key_, gpu_);
    } else {
      return timer_->try_start(key_);
    }
  }
  absl::Status finish() {
    if constexpr (TimerT::kTimesGpu) {
      return timer_->try_end(key_, gpu_);
    } else {
      return timer_->try_end(key_);
    }
  }

  TimerT* timer_;
  Key key_;
  bool gpu_;
};

}  // namespace trainscope

#endif  // TRAINSCOPE_TIMING_SCOPED_REGION_HPP_
