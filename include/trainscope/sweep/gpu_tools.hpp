// The NVIDIA tools behind radT's Collocation (`mps`, MIG profiles) in a
// local sweep: nvidia-smi, nvidia-cuda-mps-control and NVML's MIG instance
// lookup, as one seam, so that the decisions (use, create, destroy; what is
// missing) run against a fake in the tests. system_gpu_tools() is the real
// thing (SweepOptions::gpu_tools defaults to it on GPU slots).
#ifndef TRAINSCOPE_SWEEP_GPU_TOOLS_HPP_
#define TRAINSCOPE_SWEEP_GPU_TOOLS_HPP_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace trainscope::sweep {

struct ToolResult {
  int exit_code = 0;
  std::string out;
  std::string err;
};

class GpuTools {
 public:
  virtual ~GpuTools() = default;
  // Runs argv (nvidia-smi, nvidia-cuda-mps-control, env, sh) to its end; an
  // error only when it could not run at all.
  virtual absl::StatusOr<ToolResult> run(const std::vector<std::string>& argv) = 0;
  virtual bool on_path(const std::string& tool) = 0;
  virtual bool is_root() = 0;
  // The UUIDs ("MIG-...") of GPU `gpu`'s MIG devices by GPU instance id (NVML).
  virtual absl::StatusOr<std::map<int, std::string>> mig_uuids(int gpu) = 0;
};

std::shared_ptr<GpuTools> system_gpu_tools();

}  // namespace trainscope::sweep

#endif  // TRAINSCOPE_SWEEP_GPU_TOOLS_HPP_
