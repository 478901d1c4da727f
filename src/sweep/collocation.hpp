// radT's Collocation for the local scheduler on GPU slots (internal): the
// jobs of one workload (a group) share their GPUs
//   "mps":       under one MPS control daemon that trainscope starts for the
//                workload (`nvidia-cuda-mps-control -d` with its own
//                CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY under the
//                sweep directory, given to each job too) and stops after it
//                (`echo quit | nvidia-cuda-mps-control`);
//   a MIG profile ("3g.20gb"): each job on its own MIG instance of that
//                profile on its GPU (CUDA_VISIBLE_DEVICES=<MIG UUID>): free
//                existing instances first, the rest created
//                (`nvidia-smi mig -i N -cgi <profile> -C`, root and MIG mode
//                on) and destroyed after the workload (-dci, -dgi), which
//                radT never does.
// Anything missing (the MPS binary, root, MIG mode) is an error naming the
// job's row and what is missing. Every nvidia-smi / MPS invocation and the
// MIG instance lookup go through GpuTools (trainscope/sweep/gpu_tools.hpp),
// so the decisions are unit-tested with a fake; the real tools need an
// NVIDIA GPU with MIG (A100/H100).
#ifndef TRAINSCOPE_SRC_SWEEP_COLLOCATION_HPP_
#define TRAINSCOPE_SRC_SWEEP_COLLOCATION_HPP_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainscope/sweep/gpu_tools.hpp"
#include "trainscope/sweep/plan.hpp"

namespace trainscope::sweep::detail {

// A GPU instance as `nvidia-smi mig -lgi` lists it.
struct MigInstance {
  int gpu_instance = -1;  // "Instance ID"
  std::string profile;    // "3g.20gb"
};

// `nvidia-smi mig -i N -lgi` -> the GPU instances it lists.
std::vector<MigInstance> parse_mig_instances(std::string_view text);
// The GPU instance id in `nvidia-smi mig ... -cgi <profile> -C` output; -1: none.
int parse_created_instance(std::string_view text);

class Collocation {
 public:
  Collocation(std::string sweep_dir, std::shared_ptr<GpuTools> tools);
  ~Collocation();  // ends every group still set up (best effort)

  // Sets up group `group` (once; a later call, for a retried job, reuses it)
  // for `jobs` placed on `devices` (the physical GPUs of each job's slots):
  // the variables (NAME -> value, LaunchOptions::environment) each job gets,
  // in the order of `jobs`. Jobs with Collocation "-" get none. On an error
  // nothing stays set up.
  absl::StatusOr<std::vector<std::map<std::string, std::string>>> begin(
      int group, const std::vector<const Job*>& jobs, const std::vector<std::vector<int>>& devices);
  // A job of the group ended: its MIG instance is free again.
  void release(int group, const Job& job);
  // The group ended: stops its daemon, destroys what was created for it.
  // Errors are returned (for a warning); the group is forgotten either way.
  absl::Status end(int group);
  absl::Status end_all();
  bool active(int group) const { return groups_.count(group) != 0; }

 private:
  struct Group {
    std::string mode;  // "mps" or the MIG profile
    std::string mps_pipe;
    std::string mps_log;
    std::map<std::string, std::pair<int, int>> job_instance;  // job id -> (gpu, gi)
    std::set<std::pair<int, int>> created;                    // (gpu, gi)
    std::map<std::pair<int, int>, std::string> uuids;         // (gpu, gi) -> MIG UUID
  };
  absl::StatusOr<ToolResult> run(const std::vector<std::string>& argv);
  absl::Status start_mps(Group* group, int index, const Job& first, const std::vector<int>& gpus);
  absl::StatusOr<std::string> mig_instance(Group* group, const Job& job, int gpu);

  std::string sweep_dir_;
  std::shared_ptr<GpuTools> tools_;
  std::map<int, Group> groups_;
  std::set<std::pair<int, int>> in_use_;  // (gpu, gi) of every job of every group
};

}  // namespace trainscope::sweep::detail

#endif  // TRAINSCOPE_SRC_SWEEP_COLLOCATION_HPP_
