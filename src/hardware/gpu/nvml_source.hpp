// GPU metrics from NVML. The source talks to NVML through NvmlApi
// (nvml_api.hpp): DlopenNvml (nvml_library.hpp) in production, a simulated
// device in the tests.
#ifndef TRAINSCOPE_SRC_HARDWARE_GPU_NVML_SOURCE_HPP_
#define TRAINSCOPE_SRC_HARDWARE_GPU_NVML_SOURCE_HPP_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "trainscope/hardware/gpu/gpu_sources.hpp"
#include "trainscope/hardware/gpu/nvml_api.hpp"
#include "trainscope/hardware/hardware_source.hpp"
#include "trainscope/hardware/host/process_tree.hpp"

namespace trainscope::nvml {

// Samples the GPUs the job uses. Which ones: HardwareContext::gpu_devices
// (physical NVML indices) if set, else CUDA_VISIBLE_DEVICES if set, else all
// (select_devices() in visible_devices.hpp). A MIG-enabled GPU contributes its
// instances as host::kGpuMetricPrefix <i> ".mig<gi>.*". A metric a device does not support
// is left out with one warning at open(); one that starts failing later is
// dropped with one warning; a lost GPU or driver fails sample(), which
// disables the source. The per-process metrics sum over the monitored process
// tree (host::ProcessTree, rediscovered at most once a second; the root alone
// where `proc_root` cannot tell).
class NvmlSource final : public HardwareSource {
 public:
  // `cuda_visible_devices`: the job's CUDA_VISIBLE_DEVICES (nullopt: unset).
  NvmlSource(std::unique_ptr<NvmlApi> api, std::optional<std::string> cuda_visible_devices,
             std::string proc_root = "/proc");
  ~NvmlSource() override;
  NvmlSource(const NvmlSource&) = delete;
  NvmlSource& operator=(const NvmlSource&) = delete;

  std::string name() const override { return kNvmlSource; }
  absl::Status open(const HardwareContext& context) override;
  absl::Status sample(std::vector<HardwareReading>* out) override;

  struct Target;  // one sampled GPU or MIG instance; defined in nvml_source.cpp

 private:
  absl::Status select_targets(const HardwareContext& context);
  absl::Status probe(Target& target, std::vector<std::string>* unsupported);
  const std::vector<pid_t>& monitored_pids();
  absl::Status sample_target(Target& target, const std::vector<pid_t>& tree,
                             std::vector<HardwareReading>* out);

  std::unique_ptr<NvmlApi> api_;
  std::optional<std::string> cuda_visible_devices_;
  host::ProcessTree tree_;
  std::vector<pid_t> root_only_;  // {root}: the tree where /proc cannot tell
  bool initialised_ = false;
  std::vector<std::unique_ptr<Target>> targets_;
};

}  // namespace trainscope::nvml

#endif  // TRAINSCOPE_SRC_HARDWARE_GPU_NVML_SOURCE_HPP_
