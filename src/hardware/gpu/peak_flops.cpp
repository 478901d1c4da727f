// The GPU peak table (trainscope/hardware/gpu/peak_flops.hpp). Dense figures
// (the datasheets give "with sparsity" figures twice these for tensor cores).
#include "trainscope/hardware/gpu/peak_flops.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#include "absl/strings/ascii.h"

namespace trainscope::nvml {
namespace {

constexpr double T = 1e12;

// A row matches a device name that holds every one of its words (case-insensitive).
struct Row {
  std::vector<std::string_view> words;
  GpuPeak peak;
};

const std::vector<Row>& rows() {
  static const std::vector<Row> table = {
      // NVIDIA H200 Tensor Core GPU datasheet (H200 SXM; H200 NVL).
      {{"h200", "nvl"},
       {"H200 NVL",
        {60 * T, 417.5 * T, 835.5 * T, 835.5 * T, 1670.5 * T},
        "NVIDIA H200 datasheet (nvidia.com/en-us/data-center/h200), H200 NVL column"}},
      {{"h200"},
       {"H200 SXM",
        {67 * T, 494.5 * T, 989.5 * T, 989.5 * T, 1979 * T},
        "NVIDIA H200 datasheet (nvidia.com/en-us/data-center/h200), H200 SXM column"}},
      // NVIDIA H100 Tensor Core GPU datasheet (SXM, PCIe, NVL).
      {{"h100", "pcie"},
       {"H100 PCIe",
        {51 * T, 378 * T, 756.5 * T, 756.5 * T, 1513 * T},
        "NVIDIA H100 datasheet (nvidia.com/en-us/data-center/h100), H100 PCIe column"}},
      {{"h100", "nvl"},
       {"H100 NVL",
        {60 * T, 417.5 * T, 835.5 * T, 835.5 * T, 1670.5 * T},
        "NVIDIA H100 datasheet (nvidia.com/en-us/data-center/h100), H100 NVL column"}},
      {{"h100"},
       {"H100 SXM",
        {67 * T, 494.5 * T, 989.5 * T, 989.5 * T, 1979 * T},
        "NVIDIA H100 datasheet (nvidia.com/en-us/data-center/h100), H100 SXM column"}},
      // NVIDIA A100 Tensor Core GPU datasheet (PCIe and SXM alike; no fp8).
      {{"a100"},
       {"A100",
        {19.5 * T, 156 * T, 312 * T, 312 * T, 0},
        "NVIDIA A100 datasheet (nvidia.com/en-us/data-center/a100)"}},
      // NVIDIA L40S datasheet.
      {{"l40s"},
       {"L40S",
        {91.6 * T, 183 * T, 362.05 * T, 362.05 * T, 733 * T},
        "NVIDIA L40S datasheet (nvidia.com/en-us/data-center/l40s)"}},
      // NVIDIA L4 Tensor Core GPU datasheet.
      {{"l4"},
       {"L4",
        {30.3 * T, 60 * T, 121 * T, 121 * T, 242.5 * T},
        "NVIDIA L4 datasheet (nvidia.com/en-us/data-center/l4)"}},
      // NVIDIA A10 Tensor Core GPU datasheet.
      {{"a10"},
       {"A10",
        {31.2 * T, 62.5 * T, 125 * T, 125 * T, 0},
        "NVIDIA A10 datasheet (nvidia.com/en-us/data-center/products/a10-gpu)"}},
      // NVIDIA V100 datasheet (SXM2; tensor cores fp16 only).
      {{"v100"},
       {"V100",
        {15.7 * T, 0, 0, 125 * T, 0},
        "NVIDIA V100 datasheet (nvidia.com/en-us/data-center/v100), V100 SXM2 column"}},
      // NVIDIA T4 datasheet (tensor cores fp16 only).
      {{"t4"},
       {"T4",
        {8.1 * T, 0, 0, 65 * T, 0},
        "NVIDIA T4 datasheet (nvidia.com/en-us/data-center/tesla-t4)"}},
  };
  return table;
}

// `word` in `name` as a whole token (bounded by non-alphanumerics): "l4" is
// not in "l40s", "a10" not in "a100".
bool has_word(const std::string& name, std::string_view word) {
  for (std::size_t at = name.find(word); at != std::string::npos; at = name.find(word, at + 1)) {
    const bool left = at == 0 || !std::isalnum(static_cast<unsigned char>(name[at - 1]));
    const std::size_t end = at + word.size();
    const bool right = end == name.size() || !std::isalnum(static_cast<unsigned char>(name[end]));
    if (left && right) return true;
  }
  return false;
}

}  // namespace

std::string_view peak_dtype_name(PeakDtype dtype) noexcept {
  switch (dtype) {
    case PeakDtype::kFp32:
      return "fp32";
    case PeakDtype::kTf32:
      return "tf32";
    case PeakDtype::kBf16:
      return "bf16";
    case PeakDtype::kFp16:
      return "fp16";
    case PeakDtype::kFp8:
      return "fp8";
  }
  return "fp32";
}

std::optional<PeakDtype> parse_peak_dtype(std::string_view name) {
  const std::string text = absl::AsciiStrToLower(std::string(name));
  if (text == "fp32" || text == "float32" || text == "float") return PeakDtype::kFp32;
  if (text == "tf32") return PeakDtype::kTf32;
  if (text == "bf16" || text == "bfloat16") return PeakDtype::kBf16;
  if (text == "fp16" || text == "float16" || text == "half") return PeakDtype::kFp16;
  if (text == "fp8" || text.rfind("float8", 0) == 0) return PeakDtype::kFp8;
  return std::nullopt;
}

const std::vector<GpuPeak>& gpu_peaks() {
  static const std::vector<GpuPeak> peaks = [] {
    std::vector<GpuPeak> out;
    for (const Row& row : rows()) out.push_back(row.peak);
    return out;
  }();
  return peaks;
}

const GpuPeak* find_gpu_peak(std::string_view device_name) {
  const std::string name = absl::AsciiStrToLower(std::string(device_name));
  for (const Row& row : rows()) {
    if (std::all_of(row.words.begin(), row.words.end(),
                    [&](std::string_view word) { return has_word(name, word); })) {
      return &row.peak;
    }
  }
  return nullptr;
}

std::optional<double> gpu_peak_flops(std::string_view device_name, PeakDtype dtype) {
  const GpuPeak* peak = find_gpu_peak(device_name);
  if (peak == nullptr) return std::nullopt;
  const double flops = peak->flops[static_cast<int>(dtype)];
  if (flops <= 0) return std::nullopt;
  return flops;
}

}  // namespace trainscope::nvml
