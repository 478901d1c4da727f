// The real CUDA event path. Skips with a reason where no GPU is visible; on a
// machine with an NVIDIA GPU it times device-to-device copies of known size
// and compares with raw cudaEvent timings of the same work.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
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

// A stream that runs nothing until release(): a host function at its head
// waits for a flag, so every event recorded behind it stays outstanding.
class GatedStream {
 public:
  GatedStream() {
    ok_ = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) == cudaSuccess &&
          cudaLaunchHostFunc(stream_, &GatedStream::wait, this) == cudaSuccess;
  }
  ~GatedStream() {
    release();
    if (stream_ != nullptr) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
  }
  GatedStream(const GatedStream&) = delete;
  GatedStream& operator=(const GatedStream&) = delete;
  bool ok() const { return ok_; }
  cudaStream_t get() const { return stream_; }
  void release() { open_.store(true); }

 private:
  static void CUDART_CB wait(void* self) {
    auto* gate = static_cast<GatedStream*>(self);
    while (!gate->open_.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  cudaStream_t stream_ = nullptr;
  std::atomic<bool> open_{false};
  bool ok_ = false;
};

// 100,000 regions outstanding at once (none harvested until complete_all): no
// limit, no blocking wait, every region recorded, and a second round reuses the
// pooled events instead of creating more (no leak). The GPU itself runs freely:
// a stream held back cannot take 100,000 regions (next test).
TEST(GpuCudaTest, HundredThousandOutstandingRegionsNeedNoLimitAndLeakNoEvents) {
  SKIP_WITHOUT_GPU();
  constexpr int kRegions = 100000;
  CPUGPUTimerOptions options;
  options.warmup = 0;
  options.harvest_per_end = 0;  // every region stays outstanding until complete_all()
  std::uint64_t created_after_first_round = 0;
  CPUGPUTimer timer(options);
  ASSERT_TRUE(timer.gpu_available()) << timer.gpu_description();
  for (int round = 0; round < 2; ++round) {
    // complete_all() below waits (once): the loop itself must not.
    const std::uint64_t waits_before = timer.blocking_waits();
    for (int i = 0; i < kRegions; ++i) {
      timer.start(TimeType::BATCH, true);
      timer.end(TimeType::BATCH, true);
    }
    EXPECT_EQ(timer.outstanding(), static_cast<std::size_t>(kRegions)) << "round " << round;
    EXPECT_EQ(timer.blocking_waits(), waits_before) << "round " << round;
    if (round == 0) {
      created_after_first_round = timer.events_created();
      // Two events per region, created on demand: none wasted.
      EXPECT_EQ(created_after_first_round, 2u * kRegions);
      ::testing::Test::RecordProperty("events_created_for_100k_regions",
                                      std::to_string(created_after_first_round));
    } else {
      EXPECT_EQ(timer.events_created(), created_after_first_round)
          << "the second round created events instead of reusing the pool";
      ::testing::Test::RecordProperty("events_created_after_second_100k",
                                      std::to_string(timer.events_created()));
    }
    timer.complete_all();
    EXPECT_EQ(timer.outstanding(), 0u);
    EXPECT_EQ(timer.get_time_stats(TimeType::BATCH, true).count,
              static_cast<std::uint64_t>(kRegions) * (round + 1));
    EXPECT_EQ(timer.gpu_errors(), 0u);
  }
}

// A stream held back (a host function at its head that waits): CUDA takes only
// so many commands behind it before cudaEventRecord itself blocks (the driver's
// queue is full: as for any CUDA call, and the reason the 100,000-region test
// above lets the GPU run). The timer must neither wait nor fail on its own up
// to there: a watchdog opens the gate once the recording loop stops moving, and
// every region is then recorded. Records how many regions the driver took.
TEST(GpuCudaTest, RegionsBehindAStalledStreamWaitForItWithoutBlockingTheTimer) {
  SKIP_WITHOUT_GPU();
  constexpr int kRegions = 100000;
  CPUGPUTimerOptions options;
  options.warmup = 0;
  CPUGPUTimer timer(options);
  ASSERT_TRUE(timer.gpu_available()) << timer.gpu_description();
  GatedStream held;
  ASSERT_TRUE(held.ok()) << "could not hold a stream back";
  std::atomic<int> done{0};
  std::atomic<int> stalled_at{-1};
  std::atomic<bool> finished{false};
  std::thread watchdog([&] {
    int last = -1;
    while (!finished.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      const int now = done.load();
      if (now == last && stalled_at.load() < 0) {
        stalled_at.store(now);
        held.release();
      }
      last = now;
    }
  });
  for (int i = 0; i < kRegions; ++i) {
    timer.start(TimeType::BATCH, true, held.get());
    timer.end(TimeType::BATCH, true, held.get());
    done.store(i + 1, std::memory_order_relaxed);
  }
  const std::uint64_t waits_in_loop = timer.blocking_waits();
  held.release();
  finished.store(true);
  watchdog.join();
  timer.complete_all();
  const int stalled = stalled_at.load();
  ::testing::Test::RecordProperty(
      "regions_taken_before_the_driver_blocked",
      stalled < 0 ? std::string("all (never blocked)") : std::to_string(stalled));
  EXPECT_EQ(waits_in_loop, 0u);
  EXPECT_EQ(timer.outstanding(), 0u);
  EXPECT_EQ(timer.get_time_stats(TimeType::BATCH, true).count,
            static_cast<std::uint64_t>(kRegions));
  EXPECT_EQ(timer.gpu_errors(), 0u);
  EXPECT_LE(timer.events_created(), 2u * kRegions);
}

// Harvesting meets events not done yet (cudaEventQuery and cudaEventElapsedTime
// answer cudaErrorNotReady): that must not become the thread's last CUDA error,
// which PyTorch checks after every kernel launch (it would raise in the
// training).
TEST(GpuCudaTest, HarvestingLeavesTheThreadsLastCudaErrorAlone) {
  SKIP_WITHOUT_GPU();
  CPUGPUTimerOptions options;
  options.warmup = 0;
  options.harvest_per_end = 1;  // each end queries the oldest pair: still held back
  CPUGPUTimer timer(options);
  ASSERT_TRUE(timer.gpu_available()) << timer.gpu_description();
  cudaStream_t other = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  (void)cudaGetLastError();  // a clean slate
  {
    GatedStream held;
    ASSERT_TRUE(held.ok()) << "could not hold a stream back";
    for (int i = 0; i < 8; ++i) {
      timer.start(TimeType::BATCH, true, held.get());
      timer.end(TimeType::BATCH, true, held.get());
    }
    EXPECT_GE(timer.outstanding(), 7u) << "the held pairs were harvested";
    EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess)
        << "after cudaEventQuery of pending events: " << cudaGetErrorName(cudaPeekAtLastError());
    // A start held back and an end on a free stream: the end is done, the
    // elapsed time is not ready (another timer: its oldest pair is this one).
    CPUGPUTimer second(options);
    second.start(TimeType::FORWARD, true, held.get());
    second.end(TimeType::FORWARD, true, other);
    CUDA_OK(cudaStreamSynchronize(other));
    EXPECT_EQ(second.harvest(), 0u) << "a pair whose start is held back was harvested";
    EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess)
        << "after cudaEventElapsedTime of a pending start: "
        << cudaGetErrorName(cudaPeekAtLastError());
    EXPECT_EQ(timer.blocking_waits() + second.blocking_waits(), 0u);
    held.release();
    second.complete_all();
    EXPECT_EQ(second.get_time_stats(TimeType::FORWARD, true).count, 1u);
  }
  timer.complete_all();
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  EXPECT_EQ(timer.get_time_stats(TimeType::BATCH, true).count, 8u);
  EXPECT_EQ(timer.gpu_errors(), 0u);
  CUDA_OK(cudaStreamDestroy(other));
}

#endif  // TRAINSCOPE_HAVE_CUDA

}  // namespace
}  // namespace trainscope
