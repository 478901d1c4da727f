#include "trainscope/hardware/gpu/gpu_sources.hpp"

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "hardware/gpu/dcgm_source.hpp"
#include "hardware/gpu/nvml_library.hpp"
#include "hardware/gpu/nvml_source.hpp"

namespace trainscope {

std::vector<std::unique_ptr<HardwareSource>> gpu_sources() {
  std::vector<std::unique_ptr<HardwareSource>> sources;
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::optional<std::string> visible =
      env != nullptr ? std::optional<std::string>(env) : std::nullopt;
  sources.push_back(
      std::make_unique<nvml::NvmlSource>(std::make_unique<nvml::DlopenNvml>(), visible));
  if (std::unique_ptr<HardwareSource> dcgm = dcgm::make_dcgm_source(visible)) {
    sources.push_back(std::move(dcgm));
  }
  return sources;
}

}  // namespace trainscope
