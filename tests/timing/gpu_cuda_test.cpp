// The real CUDA event path. Skips with a reason where no GPU is visible; on a
// machine with an NVIDIA GPU it times device-to-device copies of known size
// and compares with raw cudaEvent timings of the same work.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "trainscope/timing/cpu_gpu_timer.hpp"
#include "trainscope/timing/gpu_event_source.hpp"

#if defined(TRAINSCOPE_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace trainscope {
namespace {

#define SKIP_WITHOUT_GPU()                                                       \
  do {                                                                           \
    if (!built_with_cuda()) GTEST_SKIP() << "trainscope was built without CUDA"; \
    if (!default_gpu_event_source()->available())                                \
      GTEST_SKIP() << "no GPU: " << default_gpu_event_source()->describe();      \
  } while (0)

TEST(GpuCudaTest, WithoutAGpuTheDefaultTimerDegradesToCpu) {
  if (default_gpu_event_source()->available()) GTEST_SKIP() << "a GPU is visible";
  CPUGPUTimer timer;
  EXPECT_FALSE(timer.gpu_available());
  timer.start(TimeType::BATCH, true);
  timer.end(TimeType::BATCH, true);
  EXPECT_EQ(timer.get_time_stats(TimeType::BATCH, false).count, 1u);
  EXPECT_EQ(timer.get_time_stats(TimeType::BATCH, true).count, 0u);
  CPUGPUTimerOptions strict;
  strict.require_gpu = true;
  EXPECT_THROW(CPUGPUTimer{strict}, TimerError);
}

#if defined(TRAINSCOPE_HAVE_CUDA)

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

TEST(GpuCudaTest, CopyTimeMatchesRawCudaEvents) {
  SKIP_WITHOUT_GPU();
  constexpr std::size_t kBytes = std::size_t{1} << 30;  // 1 GiB: milliseconds of work
  void* src = nullptr;
  void* dst = nullptr;
  CUDA_OK(cudaMalloc(&src, kBytes));
  CUDA_OK(cudaMalloc(&dst, kBytes));
  CUDA_OK(cudaMemset(src, 1, kBytes));
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreate(&stream));
  cudaEvent_t a = nullptr, b = nullptr;
  CUDA_OK(cudaEventCreate(&a));
  CUDA_OK(cudaEventCreate(&b));

  CPUGPUTimerOptions options;
  options.stream = stream;
  CPUGPUTimer timer(options);
  ASSERT_TRUE(timer.gpu_available()) << timer.gpu_description();
  constexpr int kReps = 20;
  std::vector<double> raw;
  for (int i = 0; i < kReps; ++i) {
    // Raw events and trainscope's around the same copy, nested tightly.
    CUDA_OK(cudaEventRecord(a, stream));
    timer.start(TimeType::FORWARD, true);
    CUDA_OK(cudaMemcpyAsync(dst, src, kBytes, cudaMemcpyDeviceToDevice, stream));
    timer.end(TimeType::FORWARD, true);
    CUDA_OK(cudaEventRecord(b, stream));
    CUDA_OK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, a, b));
    raw.push_back(ms * 1e-3);
  }
  const std::vector<double> ours = timer.get_time(TimeType::FORWARD, true);
  ASSERT_EQ(ours.size(), static_cast<std::size_t>(kReps));
  for (int i = 0; i < kReps; ++i) {
    // Ours is inside raw's window: within 1% or 2 us of it, never longer.
    EXPECT_LE(ours[i], raw[i] + 1e-6);
    EXPECT_NEAR(ours[i], raw[i], std::max(0.01 * raw[i], 2e-6)) << "rep " << i;
  }
  CUDA_OK(cudaEventDestroy(a));
  CUDA_OK(cudaEventDestroy(b));
  CUDA_OK(cudaStreamDestroy(stream));
  CUDA_OK(cudaFree(src));
  CUDA_OK(cudaFree(dst));
}

TEST(GpuCudaTest, ManyBatchesMakeNoBlockingWaitUntilRead) {
  SKIP_WITHOUT_GPU();
  constexpr std::size_t kBytes = std::size_t{16} << 20;
  void* src = nullptr;
  void* dst = nullptr;
  CUDA_OK(cudaMalloc(&src, kBytes));
  CUDA_OK(cudaMalloc(&dst, kBytes));
  CPUGPUTimer timer;
  constexpr int kBatches = 10000;
  for (int i = 0; i < kBatches; ++i) {
    timer.start(TimeType::BATCH, true);
    CUDA_OK(cudaMemcpyAsync(dst, src, kBytes, cudaMemcpyDeviceToDevice, nullptr));
    timer.end(TimeType::BATCH, true);
  }
  EXPECT_EQ(timer.blocking_waits(), 0u);
  const TimeStats stats = timer.get_time_stats(TimeType::BATCH, true);
  EXPECT_EQ(stats.count, static_cast<std::uint64_t>(kBatches));
  EXPECT_GT(stats.min, 0.0);
  EXPECT_EQ(timer.gpu_errors(), 0u);
  CUDA_OK(cudaFree(src));
  CUDA_OK(cudaFree(dst));
}

#endif  // TRAINSCOPE_HAVE_CUDA

}  // namespace
}  // namespace trainscope
