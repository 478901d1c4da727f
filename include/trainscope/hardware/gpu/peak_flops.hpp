// The peak dense FLOP/s of NVIDIA GPUs per data type, by the device name NVML
// (and torch.cuda.get_device_name) gives: the denominator of MFU (the steps
// room's ledger, docs/ledger.md). Each figure is the vendor's datasheet figure
// without structured sparsity; the source of each row is cited in
// docs/ledger.md and in the table (src/hardware/gpu/peak_flops.cpp).
#ifndef TRAINSCOPE_HARDWARE_GPU_PEAK_FLOPS_HPP_
#define TRAINSCOPE_HARDWARE_GPU_PEAK_FLOPS_HPP_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainscope::nvml {

// The data type of the matrix products: fp32 (CUDA cores), tf32 (fp32 on
// tensor cores), bf16 and fp16 (tensor cores; equal peaks), fp8.
enum class PeakDtype { kFp32, kTf32, kBf16, kFp16, kFp8 };
inline constexpr int kPeakDtypeCount = 5;
std::string_view peak_dtype_name(PeakDtype dtype) noexcept;  // "fp32", "tf32", ...
// By name ("fp32", "float32", "tf32", "bf16", "bfloat16", "fp16", "float16", "half", "fp8");
// nullopt for any other.
std::optional<PeakDtype> parse_peak_dtype(std::string_view name);

struct GpuPeak {
  std::string_view model;  // "H100 SXM", ...
  // Dense FLOP/s per PeakDtype (0: the device has no such unit).
  double flops[kPeakDtypeCount] = {};
  std::string_view source;  // the datasheet
};

// The table, most specific names first.
const std::vector<GpuPeak>& gpu_peaks();
// The row for a device name ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB",
// "Tesla T4"): nullptr when none matches.
const GpuPeak* find_gpu_peak(std::string_view device_name);
// The peak for a device name and type: nullopt when unknown (or 0 in the table).
std::optional<double> gpu_peak_flops(std::string_view device_name, PeakDtype dtype);

}  // namespace trainscope::nvml

#endif  // TRAINSCOPE_HARDWARE_GPU_PEAK_FLOPS_HPP_
