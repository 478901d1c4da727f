#include "sweep/collocation.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "fmt/format.h"
#include "trainscope/hardware/gpu/nvml_api.hpp"
#include "trainscope/launch/run_tool.hpp"

namespace trainscope::sweep {
namespace {

constexpr absl::Duration kToolTimeout = absl::Seconds(120);
constexpr char kMpsControl[] = "nvidia-cuda-mps-control";

std::string join(const std::vector<int>& values) {
  std::string out;
  for (int value : values) out += (out.empty() ? "" : ",") + std::to_string(value);
  return out;
}

std::string trimmed(const std::string& text) {
  return std::string(absl::StripAsciiWhitespace(text));
}

class SystemGpuTools : public GpuTools {
 public:
  absl::StatusOr<ToolResult> run(const std::vector<std::string>& argv) override {
    absl::StatusOr<trainscope::ToolOutput> done = trainscope::run_tool(argv, kToolTimeout);
    if (!done.ok()) return done.status();
    return ToolResult{done->exit_code, std::move(done->out), std::move(done->err)};
  }

  bool on_path(const std::string& tool) override {
    const char* path = std::getenv("PATH");
    for (absl::string_view dir : absl::StrSplit(path == nullptr ? "" : path, ':')) {
      const std::string candidate =
          fmt::format("{}/{}", dir.empty() ? "." : std::string(dir), tool);
      if (::access(candidate.c_str(), X_OK) == 0) return true;
    }
    return false;
  }

  bool is_root() override { return ::geteuid() == 0; }

  absl::StatusOr<std::map<int, std::string>> mig_uuids(int gpu) override {
    std::unique_ptr<nvml::NvmlApi> library = nvml::load_nvml();
    nvml::NvmlApi& api = *library;
    if (absl::Status status = api.init(); !status.ok()) return status;
    std::map<int, std::string> uuids;
    absl::Status error;
    absl::StatusOr<nvml::Device> device = api.device_by_index(static_cast<unsigned>(gpu));
    absl::StatusOr<unsigned> count =
        device.ok() ? api.max_mig_devices(*device) : absl::StatusOr<unsigned>(device.status());
    if (!count.ok()) error = count.status();
    for (unsigned i = 0; error.ok() && i < *count; ++i) {
      absl::StatusOr<nvml::Device> mig = api.mig_device(*device, i);
      if (!mig.ok()) continue;  // an empty slot
      absl::StatusOr<unsigned> instance = api.gpu_instance_id(*mig);
      absl::StatusOr<std::string> uuid = api.uuid(*mig);
      if (instance.ok() && uuid.ok()) uuids[static_cast<int>(*instance)] = *uuid;
    }
    api.shutdown();
    if (!error.ok()) return error;
    return uuids;
  }
};

}  // namespace

std::shared_ptr<GpuTools> system_gpu_tools() { return std::make_shared<SystemGpuTools>(); }

namespace detail {

std::vector<MigInstance> parse_mig_instances(std::string_view text) {
  // |   0  MIG 3g.20gb          9        1          4:4     |
  std::vector<MigInstance> out;
  const absl::string_view all(text.data(), text.size());
  for (absl::string_view line : absl::StrSplit(all, '\n')) {
    std::vector<absl::string_view> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t|"), absl::SkipEmpty());
    if (words.size() < 5 || words[1] != "MIG") continue;
    int gpu = 0;
    int profile_id = 0;
    int instance = 0;
    if (!absl::SimpleAtoi(words[0], &gpu) || !absl::SimpleAtoi(words[3], &profile_id) ||
        !absl::SimpleAtoi(words[4], &instance)) {
      continue;
    }
    out.push_back(MigInstance{instance, std::string(words[2])});
  }
  return out;
}

int parse_created_instance(std::string_view text) {
  // "Successfully created GPU instance ID  1 on GPU  0 using profile MIG 3g.20gb (ID  9)"
  constexpr absl::string_view kMark = "created GPU instance ID";
  const absl::string_view all(text.data(), text.size());
  const std::size_t at = all.find(kMark);
  if (at == absl::string_view::npos) return -1;
  std::vector<absl::string_view> words =
      absl::StrSplit(all.substr(at + kMark.size()), ' ', absl::SkipEmpty());
  int id = -1;
  if (words.empty() || !absl::SimpleAtoi(words[0], &id)) return -1;
  return id;
}

Collocation::Collocation(std::string sweep_dir, std::shared_ptr<GpuTools> tools)
    : sweep_dir_(std::move(sweep_dir)), tools_(std::move(tools)) {}

Collocation::~Collocation() { (void)end_all(); }

absl::StatusOr<ToolResult> Collocation::run(const std::vector<std::string>& argv) {
  absl::StatusOr<ToolResult> done = tools_->run(argv);
  if (!done.ok()) return done.status();
  if (done->exit_code != 0) {
    std::string line;
    for (const std::string& word : argv) line += (line.empty() ? "" : " ") + word;
    return absl::FailedPreconditionError(
        fmt::format("`{}` failed (exit code {}): {}", line, done->exit_code,
                    trimmed(done->err.empty() ? done->out : done->err)));
  }
  return done;
}

absl::Status Collocation::start_mps(Group* group, int index, const Job& first,
                                    const std::vector<int>& gpus) {
  if (!tools_->on_path(kMpsControl)) {
    return absl::FailedPreconditionError(fmt::format(
        "{}: Collocation 'mps' needs {}, which is not on PATH (it comes with the NVIDIA driver)",
        first.source, kMpsControl));
  }
  const std::string base = fmt::format("{}/mps/group-{}", sweep_dir_, index);
  group->mps_pipe = base + "/pipe";
  group->mps_log = base + "/log";
  std::error_code error;
  for (const std::string& dir : {group->mps_pipe, group->mps_log}) {
    std::filesystem::create_directories(dir, error);
    if (error) {
      return absl::FailedPreconditionError(
          fmt::format("{}: cannot create {}: {}", first.source, dir, error.message()));
    }
  }
  absl::StatusOr<ToolResult> started =
      run({"env", "CUDA_MPS_PIPE_DIRECTORY=" + group->mps_pipe,
           "CUDA_MPS_LOG_DIRECTORY=" + group->mps_log, "CUDA_VISIBLE_DEVICES=" + join(gpus),
           kMpsControl, "-d"});
  if (!started.ok()) {
    return absl::FailedPreconditionError(fmt::format("{}: Collocation 'mps': {}", first.source,
                                                     std::string(started.status().message())));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Collocation::mig_instance(Group* group, const Job& job, int gpu) {
  const std::string& profile = group->mode;
  const std::string index = std::to_string(gpu);
  absl::StatusOr<ToolResult> mode =
      run({"nvidia-smi", "-i", index, "--query-gpu=mig.mode.current", "--format=csv,noheader"});
  if (!mode.ok()) {
    return absl::FailedPreconditionError(fmt::format(
        "{}: Collocation '{}': {}", job.source, profile, std::string(mode.status().message())));
  }
  if (trimmed(mode->out) != "Enabled") {
    return absl::FailedPreconditionError(fmt::format(
        "{}: Collocation '{}' needs MIG mode on GPU {}, which is '{}' (enable it as root: "
        "nvidia-smi -i {} -mig 1)",
        job.source, profile, gpu, trimmed(mode->out), gpu));
  }
  absl::StatusOr<ToolResult> listed = run({"nvidia-smi", "mig", "-i", index, "-lgi"});
  // "No GPU instances found" exits non-zero on some drivers: no instance.
  const std::vector<MigInstance> instances =
      listed.ok() ? parse_mig_instances(listed->out) : std::vector<MigInstance>{};
  absl::StatusOr<std::map<int, std::string>> uuids = tools_->mig_uuids(gpu);
  if (!uuids.ok()) {
    return absl::FailedPreconditionError(fmt::format("{}: Collocation '{}': NVML: {}", job.source,
                                                     profile,
                                                     std::string(uuids.status().message())));
  }
  for (const MigInstance& instance : instances) {
    const std::pair<int, int> key{gpu, instance.gpu_instance};
    const auto uuid = uuids->find(instance.gpu_instance);
    if (instance.profile != profile || uuid == uuids->end() || in_use_.count(key) != 0) continue;
    in_use_.insert(key);
    group->job_instance[job.id] = key;
    group->uuids[key] = uuid->second;
    return uuid->second;  // an existing instance, free
  }
  if (!tools_->is_root()) {
    return absl::FailedPreconditionError(
        fmt::format("{}: Collocation '{}': no free MIG instance of {} on GPU {}, and creating one "
                    "needs root (run the sweep as root, or create it first: nvidia-smi mig -i {} "
                    "-cgi {} -C)",
                    job.source, profile, profile, gpu, gpu, profile));
  }
  absl::StatusOr<ToolResult> created =
      run({"nvidia-smi", "mig", "-i", index, "-cgi", profile, "-C"});
  if (!created.ok()) {
    return absl::FailedPreconditionError(fmt::format(
        "{}: Collocation '{}': {}", job.source, profile, std::string(created.status().message())));
  }
  const int gi = parse_created_instance(created->out);
  if (gi < 0) {
    return absl::FailedPreconditionError(
        fmt::format("{}: Collocation '{}': nvidia-smi created no GPU instance: {}", job.source,
                    profile, trimmed(created->out)));
  }
  const std::pair<int, int> key{gpu, gi};
  group->created.insert(key);  // destroyed at the end even when what follows fails
  in_use_.insert(key);
  group->job_instance[job.id] = key;
  uuids = tools_->mig_uuids(gpu);
  const auto uuid = uuids.ok() ? uuids->find(gi) : std::map<int, std::string>::const_iterator();
  if (!uuids.ok() || uuid == uuids->end()) {
    return absl::FailedPreconditionError(fmt::format(
        "{}: Collocation '{}': the new GPU instance {} on GPU {} has no MIG device in NVML",
        job.source, profile, gi, gpu));
  }
  group->uuids[key] = uuid->second;
  return uuid->second;
}

absl::StatusOr<std::vector<std::map<std::string, std::string>>> Collocation::begin(
    int group_index, const std::vector<const Job*>& jobs,
    const std::vector<std::vector<int>>& devices) {
  std::vector<std::map<std::string, std::string>> env(jobs.size());
  const Job* first = nullptr;
  for (const Job* job : jobs) {
    if (job->collocation.empty() || job->collocation == "-") continue;
    if (first == nullptr) first = job;
    if (job->collocation != first->collocation) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: Collocation '{}' differs from '{}' of its workload ({}): one scheme per workload",
          job->source, job->collocation, first->collocation, first->source));
    }
  }
  if (first == nullptr) return env;
  const bool fresh = groups_.count(group_index) == 0;
  Group& group = groups_[group_index];
  if (fresh) group.mode = first->collocation;
  absl::Status status;
  if (group.mode == "mps") {
    if (fresh) {
      std::vector<int> gpus;
      for (const std::vector<int>& on : devices) {
        for (int gpu : on) {
          if (std::find(gpus.begin(), gpus.end(), gpu) == gpus.end()) gpus.push_back(gpu);
        }
      }
      status = start_mps(&group, group_index, *first, gpus);
      if (!status.ok()) group.mps_pipe.clear();  // nothing to stop
    }
    for (std::size_t i = 0; status.ok() && i < jobs.size(); ++i) {
      env[i] = {{"CUDA_MPS_PIPE_DIRECTORY", group.mps_pipe},
                {"CUDA_MPS_LOG_DIRECTORY", group.mps_log}};
    }
  } else {
    for (std::size_t i = 0; status.ok() && i < jobs.size(); ++i) {
      if (devices[i].size() != 1) {
        status = absl::InvalidArgumentError(
            fmt::format("{}: Collocation '{}' puts a job on one MIG instance of one GPU, not on "
                        "GPUs {}",
                        jobs[i]->source, group.mode, join(devices[i])));
        break;
      }
      absl::StatusOr<std::string> uuid = mig_instance(&group, *jobs[i], devices[i][0]);
      if (!uuid.ok()) {
        status = uuid.status();
      } else {
        env[i] = {{"CUDA_VISIBLE_DEVICES", *uuid}};
      }
    }
  }
  if (!status.ok()) {
    if (fresh) (void)end(group_index);
    return status;
  }
  return env;
}

void Collocation::release(int group_index, const Job& job) {
  const auto group = groups_.find(group_index);
  if (group == groups_.end()) return;
  const auto it = group->second.job_instance.find(job.id);
  if (it == group->second.job_instance.end()) return;
  in_use_.erase(it->second);  // free for a retried job of the group (created ones die at end)
  group->second.job_instance.erase(it);
}

absl::Status Collocation::end(int group_index) {
  const auto it = groups_.find(group_index);
  if (it == groups_.end()) return absl::OkStatus();
  Group group = std::move(it->second);
  groups_.erase(it);
  absl::Status status;
  const auto keep_first = [&status](const absl::StatusOr<ToolResult>& done) {
    if (!done.ok() && status.ok()) status = done.status();
  };
  if (group.mode == "mps" && !group.mps_pipe.empty()) {
    keep_first(run({"env", "CUDA_MPS_PIPE_DIRECTORY=" + group.mps_pipe,
                    "CUDA_MPS_LOG_DIRECTORY=" + group.mps_log, "sh", "-c",
                    fmt::format("echo quit | {}", kMpsControl)}));
  }
  for (const auto& [job, key] : group.job_instance) in_use_.erase(key);
  for (const auto& [gpu, gi] : group.created) {
    const std::string index = std::to_string(gpu);
    const std::string instance = std::to_string(gi);
    keep_first(run({"nvidia-smi", "mig", "-i", index, "-gi", instance, "-dci"}));
    keep_first(run({"nvidia-smi", "mig", "-i", index, "-gi", instance, "-dgi"}));
    in_use_.erase({gpu, gi});
  }
  return status;
}

absl::Status Collocation::end_all() {
  absl::Status status;
  while (!groups_.empty()) {
    absl::Status one = end(groups_.begin()->first);
    if (status.ok()) status = one;
  }
  return status;
}

}  // namespace detail
}  // namespace trainscope::sweep
