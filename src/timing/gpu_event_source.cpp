#include "trainscope/timing/gpu_event_source.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>

#include <fmt/format.h>

#include "common/no_gpu.hpp"

#if defined(TRAINSCOPE_HAVE_CUDA)
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#endif

namespace trainscope {
namespace {

// What every caller gets when there is no GPU to time on: available() is
// false and describe() says why, so CPUGPUTimer can degrade with one warning.
class UnavailableEventSource final : public GpuEventSource {
 public:
  explicit UnavailableEventSource(std::string reason) : reason_(std::move(reason)) {}
  bool available() const noexcept override { return false; }
  std::string describe() const override { return reason_; }
  int current_device() noexcept override { return 0; }
  absl::Status create_event(Event*) override { return unavailable(); }
  void destroy_event(Event) noexcept override {}
  absl::Status record(Event, StreamHandle) override { return unavailable(); }
  QueryResult query(Event) noexcept override { return QueryResult::kError; }
  absl::Status synchronize(Event) override { return unavailable(); }
  absl::Status elapsed_ns(Event, Event, std::int64_t*) override { return unavailable(); }
  std::uint64_t blocking_waits() const noexcept override { return 0; }
  absl::Status offset_ns(Event, Event, std::int64_t*) override { return unavailable(); }

 private:
  absl::Status unavailable() const { return absl::FailedPreconditionError(reason_); }
  std::string reason_;
};

#if defined(TRAINSCOPE_HAVE_CUDA)

absl::Status cuda_status(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return absl::OkStatus();
  const absl::StatusCode code =
      error == cudaErrorNotReady ? absl::StatusCode::kUnavailable : absl::StatusCode::kInternal;
  return absl::Status(
      code, fmt::format("{}: {} ({})", call, cudaGetErrorName(error), cudaGetErrorString(error)));
}

class CudaEventSource final : public GpuEventSource {
 public:
  explicit CudaEventSource(std::string description) : description_(std::move(description)) {}
  bool available() const noexcept override { return true; }
  std::string describe() const override { return description_; }
  int current_device() noexcept override {
    int device = 0;
    return cudaGetDevice(&device) == cudaSuccess ? device : 0;
  }
  absl::Status create_event(Event* out) override {
    cudaEvent_t event = nullptr;
    // Default flags: timing enabled, no blocking-sync (cudaEventSynchronize spins briefly).
    absl::Status status =
        cuda_status(cudaEventCreateWithFlags(&event, cudaEventDefault), "cudaEventCreateWithFlags");
    *out = event;
    return status;
  }
  void destroy_event(Event event) noexcept override {
    if (event != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event));
  }
  absl::Status record(Event event, StreamHandle stream) override {
    return cuda_status(
        cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)),
        "cudaEventRecord");
  }
  QueryResult query(Event event) noexcept override {
    const cudaError_t error = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (error == cudaSuccess) return QueryResult::kReady;
    if (error == cudaErrorNotReady) return QueryResult::kPending;
    return QueryResult::kError;
  }
  absl::Status synchronize(Event event) override {
    waits_.fetch_add(1, std::memory_order_relaxed);
    return cuda_status(cudaEventSynchronize(static_cast<cudaEvent_t>(event)),
                       "cudaEventSynchronize");
  }
  absl::Status elapsed_ns(Event start, Event end, std::int64_t* out) override {
    float ms = 0.0f;
    absl::Status status = cuda_status(
        cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)),
        "cudaEventElapsedTime");
    // Events on two streams can complete in either order: a start that ran
    // after its end is a region of no GPU time, never a negative one (readers
    // refuse negative durations).
    if (status.ok()) *out = std::max<std::int64_t>(0, std::llround(static_cast<double>(ms) * 1e6));
    return status;
  }
  std::uint64_t blocking_waits() const noexcept override {
    return waits_.load(std::memory_order_relaxed);
  }
  absl::Status offset_ns(Event from, Event to, std::int64_t* out) override {
    float ms = 0.0f;
    absl::Status status = cuda_status(
        cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(from), static_cast<cudaEvent_t>(to)),
        "cudaEventElapsedTime");
    if (status.ok()) *out = std::llround(static_cast<double>(ms) * 1e6);
    return status;
  }

 private:
  std::string description_;
  std::atomic<std::uint64_t> waits_{0};
};

bool driver_installed() {
  void* driver = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (driver == nullptr) return false;
  ::dlclose(driver);
  return true;
}

std::shared_ptr<GpuEventSource> make_default_source() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    // The static runtime says "driver version is insufficient" also where there is
    // no driver at all: in plain words then.
    if ((error == cudaErrorInsufficientDriver || error == cudaErrorNoDevice) &&
        !driver_installed()) {
      return std::make_shared<UnavailableEventSource>(std::string(detail::kNoGpuFound) +
                                                      " (libcuda.so.1 is not installed)");
    }
    return std::make_shared<UnavailableEventSource>(
        fmt::format("no usable CUDA device (cudaGetDeviceCount: {}: {})", cudaGetErrorName(error),
                    cudaGetErrorString(error)));
  }
  if (count == 0) return std::make_shared<UnavailableEventSource>("no CUDA device is visible");
  int device = 0;
  cudaGetDevice(&device);
  cudaDeviceProp props{};
  std::string name = "unknown";
  if (cudaGetDeviceProperties(&props, device) == cudaSuccess) name = props.name;
  return std::make_shared<CudaEventSource>(
      fmt::format("CUDA device {} of {}: {}", device, count, name));
}

#else

std::shared_ptr<GpuEventSource> make_default_source() {
  return std::make_shared<UnavailableEventSource>(
      "this trainscope build has no CUDA support (configured with TRAINSCOPE_WITH_CUDA=OFF or "
      "without a CUDA toolkit)");
}

#endif

}  // namespace

absl::Status GpuEventSource::reference(int device, Event candidate, Event* out, bool* adopted) {
  std::lock_guard<std::mutex> lock(reference_mu_);
  *adopted = false;
  if (reference_ == nullptr) {
    reference_ = candidate;
    reference_device_ = device;
    *adopted = true;
  }
  if (device != reference_device_) {
    return absl::FailedPreconditionError(
        fmt::format("the GPU reference event is on device {}, not {}", reference_device_, device));
  }
  *out = reference_;
  return absl::OkStatus();
}

std::shared_ptr<GpuEventSource> default_gpu_event_source() {
  // One probe per process: cudaGetDeviceCount initialises the driver.
  static const std::shared_ptr<GpuEventSource> source = make_default_source();
  return source;
}

bool built_with_cuda() noexcept {
#if defined(TRAINSCOPE_HAVE_CUDA)
  return true;
#else
  return false;
#endif
}

}  // namespace trainscope
