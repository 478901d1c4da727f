#include "hardware/gpu/nvml_source.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <bitset>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "hardware/gpu/visible_devices.hpp"
#include "trainscope/common/errors.hpp"
#include "trainscope/hardware/host/host_metrics.hpp"

namespace trainscope::nvml {
namespace {

enum Metric : unsigned {
  kUtilization,  // util_pct and mem_util_pct
  kMemory,       // mem_used_mb and mem_total_mb
  kPower,
  kEnergy,
  kTemperature,
  kSmClock,
  kMemClock,
  kPcieTx,
  kPcieRx,
  kThrottle,
  kProcMemory,
  kProcUtil,
  kMetricCount
};

// Each metric's name in messages: the quantities it writes (host_metrics.hpp).
const std::string kMetricNames[kMetricCount] = {
    absl::StrCat(host::kGpuUtilQuantity, "/", host::kGpuMemUtilQuantity),
    absl::StrCat(host::kGpuMemUsedQuantity, "/", host::kGpuMemTotalQuantity),
    host::kGpuPowerQuantity,
    host::kGpuEnergyQuantity,
    host::kGpuTempQuantity,
    host::kGpuSmClockQuantity,
    host::kGpuMemClockQuantity,
    host::kGpuPcieTxQuantity,
    host::kGpuPcieRxQuantity,
    host::kGpuThrottleQuantity,
    host::kGpuProcMemUsedQuantity,
    host::kGpuProcUtilQuantity};

constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

struct NvmlSource::Target {
  Device device = nullptr;
  unsigned index = 0;                    // physical NVML index
  std::optional<unsigned> gpu_instance;  // set for a MIG instance
  std::string prefix;  // host::kGpuMetricPrefix, the index, "." (MIG: ".mig<gi>.")
  std::bitset<kMetricCount> enabled;
  std::optional<std::uint64_t> energy_at_open_mj;
  std::uint64_t last_process_sample_us = 0;
};

namespace {

using Target = NvmlSource::Target;
using Readings = std::vector<HardwareReading>;

void put(Readings* out, const Target& t, const char* quantity, double value) {
  out->push_back({t.prefix + quantity, value});
}

// The value of `result`, appended as `quantity` scaled by `scale`.
template <typename T>
absl::Status put_scaled(const absl::StatusOr<T>& result, Readings* out, const Target& t,
                        const char* quantity, double scale) {
  if (!result.ok()) return result.status();
  put(out, t, quantity, static_cast<double>(*result) * scale);
  return absl::OkStatus();
}

absl::Status read_utilization(NvmlApi& api, const Target& t, Readings* out) {
  absl::StatusOr<Utilization> u = api.utilization(t.device);
  if (!u.ok()) return u.status();
  put(out, t, host::kGpuUtilQuantity, u->gpu_pct);
  put(out, t, host::kGpuMemUtilQuantity, u->memory_pct);
  return absl::OkStatus();
}

absl::Status read_memory(NvmlApi& api, const Target& t, Readings* out) {
  absl::StatusOr<MemoryInfo> m = api.memory(t.device);
  if (!m.ok()) return m.status();
  put(out, t, host::kGpuMemUsedQuantity, static_cast<double>(m->used_bytes) / kMiB);
  put(out, t, host::kGpuMemTotalQuantity, static_cast<double>(m->total_bytes) / kMiB);
  return absl::OkStatus();
}

// Energy since open(): NVML's counter starts at driver load, which says
// nothing about this job.
absl::Status read_energy(NvmlApi& api, Target& t, Readings* out) {
  absl::StatusOr<std::uint64_t> mj = api.energy_mj(t.device);
  if (!mj.ok()) return mj.status();
  if (!t.energy_at_open_mj) t.energy_at_open_mj = *mj;
  const std::uint64_t used = *mj >= *t.energy_at_open_mj ? *mj - *t.energy_at_open_mj : 0;
  put(out, t, host::kGpuEnergyQuantity, static_cast<double>(used) / 1000.0);
  return absl::OkStatus();
}

bool in_tree(const std::vector<pid_t>& tree, pid_t pid) {
  return std::find(tree.begin(), tree.end(), pid) != tree.end();
}

absl::Status read_proc_memory(NvmlApi& api, const Target& t, const std::vector<pid_t>& tree,
                              Readings* out) {
  absl::StatusOr<std::vector<ProcessMemory>> processes = api.compute_processes(t.device);
  if (!processes.ok()) return processes.status();
  std::uint64_t bytes = 0;
  for (const ProcessMemory& p : *processes) {
    if (p.used_bytes && in_tree(tree, p.pid)) bytes += *p.used_bytes;
  }
  put(out, t, host::kGpuProcMemUsedQuantity, static_cast<double>(bytes) / kMiB);
  return absl::OkStatus();
}

// The tree's SM utilisation: each process's newest sample since the last
// call, summed (capped at 100). No sample at all means the tree was idle.
absl::Status read_proc_util(NvmlApi& api, Target& t, const std::vector<pid_t>& tree,
                            Readings* out) {
  absl::StatusOr<std::vector<ProcessUtilization>> samples =
      api.process_utilization(t.device, t.last_process_sample_us);
  if (!samples.ok() && !absl::IsNotFound(samples.status())) return samples.status();
  std::map<pid_t, ProcessUtilization> newest;
  if (samples.ok()) {
    for (const ProcessUtilization& s : *samples) {
      t.last_process_sample_us = std::max(t.last_process_sample_us, s.timestamp_us);
      ProcessUtilization& slot = newest[s.pid];
      if (s.timestamp_us >= slot.timestamp_us) slot = s;
    }
  }
  unsigned pct = 0;
  for (const auto& [pid, s] : newest) {
    if (in_tree(tree, pid)) pct += s.sm_pct;
  }
  put(out, t, host::kGpuProcUtilQuantity, std::min(pct, 100u));
  return absl::OkStatus();
}

absl::Status read_metric(NvmlApi& api, Metric metric, Target& t, const std::vector<pid_t>& tree,
                         Readings* out) {
  switch (metric) {
    case kUtilization:
      return read_utilization(api, t, out);
    case kMemory:
      return read_memory(api, t, out);
    case kPower:
      return put_scaled(api.power_mw(t.device), out, t, host::kGpuPowerQuantity, 1e-3);
    case kEnergy:
      return read_energy(api, t, out);
    case kTemperature:
      return put_scaled(api.temperature_c(t.device), out, t, host::kGpuTempQuantity, 1.0);
    case kSmClock:
      return put_scaled(api.clock_mhz(t.device, Clock::kSm), out, t, host::kGpuSmClockQuantity,
                        1.0);
    case kMemClock:
      return put_scaled(api.clock_mhz(t.device, Clock::kMemory), out, t, host::kGpuMemClockQuantity,
                        1.0);
    case kPcieTx:  // NVML's KB/s are KiB/s; MB here are MiB, as for memory
      return put_scaled(api.pcie_kb_s(t.device, PcieDirection::kTx), out, t,
                        host::kGpuPcieTxQuantity, 1 / 1024.0);
    case kPcieRx:
      return put_scaled(api.pcie_kb_s(t.device, PcieDirection::kRx), out, t,
                        host::kGpuPcieRxQuantity, 1 / 1024.0);
    case kThrottle:
      return put_scaled(api.throttle_reasons(t.device), out, t, host::kGpuThrottleQuantity, 1.0);
    case kProcMemory:
      return read_proc_memory(api, t, tree, out);
    case kProcUtil:
      return read_proc_util(api, t, tree, out);
    case kMetricCount:
      break;
  }
  return absl::InternalError("unknown metric");
}

std::string label(const Target& t) {
  // The prefix without kSystemMetricPrefix and the trailing '.'.
  const std::size_t system = std::strlen(kSystemMetricPrefix);
  return t.prefix.substr(system, t.prefix.size() - system - 1);
}

// Whether any target samples a per-process metric, which needs the tree.
bool wants_tree(const std::vector<std::unique_ptr<Target>>& targets) {
  return std::any_of(targets.begin(), targets.end(), [](const auto& t) {
    return t->enabled.test(kProcMemory) || t->enabled.test(kProcUtil);
  });
}

}  // namespace

NvmlSource::NvmlSource(std::unique_ptr<NvmlApi> api,
                       std::optional<std::string> cuda_visible_devices, std::string proc_root)
    : api_(std::move(api)),
      cuda_visible_devices_(std::move(cuda_visible_devices)),
      tree_(std::move(proc_root), host::ProcessTree::Files::kNone) {}

NvmlSource::~NvmlSource() {
  targets_.clear();  // handles die with shutdown
  if (initialised_) api_->shutdown();
}

absl::Status NvmlSource::open(const HardwareContext& context) {
  const pid_t root = context.root_pid != 0 ? context.root_pid : ::getpid();
  root_only_.assign(1, root);
  if (absl::Status status = api_->init(); !status.ok()) return status;
  initialised_ = true;
  if (absl::Status status = select_targets(context); !status.ok()) return status;
  std::vector<std::string> unsupported;
  for (auto& target : targets_) {
    if (absl::Status status = probe(*target, &unsupported); !status.ok()) return status;
  }
  if (!unsupported.empty()) {
    std::string list;
    for (const std::string& u : unsupported) list += (list.empty() ? "" : "; ") + u;
    warn("nvml: not sampled where the GPU does not report them: " + list);
  }
  // Where /proc cannot tell yet, monitored_pids() tries again.
  if (wants_tree(targets_)) tree_.discover(root).IgnoreError();
  return absl::OkStatus();
}

absl::Status NvmlSource::select_targets(const HardwareContext& context) {
  absl::StatusOr<std::vector<SelectedDevice>> devices =
      select_devices(*api_, context, cuda_visible_devices_);
  if (!devices.ok()) return devices.status();
  for (const SelectedDevice& d : *devices) {
    auto target = std::make_unique<Target>();
    target->device = d.device;
    target->index = d.index;
    target->gpu_instance = d.gpu_instance;
    target->prefix = d.gpu_instance ? fmt::format("{}{}.mig{}.", host::kGpuMetricPrefix, d.index,
                                                  *d.gpu_instance)
                                    : fmt::format("{}{}.", host::kGpuMetricPrefix, d.index);
    target->enabled.set();
    targets_.push_back(std::move(target));
  }
  return absl::OkStatus();
}

// Reads every metric once, keeping those the device answers (a MIG instance,
// for one, reports memory but not utilisation or power).
absl::Status NvmlSource::probe(Target& target, std::vector<std::string>* unsupported) {
  Readings scratch;
  for (unsigned m = 0; m < kMetricCount; ++m) {
    absl::Status status = read_metric(*api_, static_cast<Metric>(m), target, root_only_, &scratch);
    if (absl::IsUnavailable(status)) return status;
    if (status.ok()) continue;
    target.enabled.reset(m);
    unsupported->push_back(
        fmt::format("{} {} ({})", label(target), kMetricNames[m], std::string(status.message())));
  }
  return absl::OkStatus();
}

// The monitored tree, rediscovered at most once a second; the root alone
// where /proc cannot tell (the root is gone, or no /proc at proc_root).
const std::vector<pid_t>& NvmlSource::monitored_pids() {
  if (tree_.refresh().ok()) return tree_.pids();
  return root_only_;
}

absl::Status NvmlSource::sample(std::vector<HardwareReading>* out) {
  const std::vector<pid_t> no_tree;
  const std::vector<pid_t>& tree = wants_tree(targets_) ? monitored_pids() : no_tree;
  for (auto& target : targets_) {
    if (absl::Status status = sample_target(*target, tree, out); !status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status NvmlSource::sample_target(Target& target, const std::vector<pid_t>& tree,
                                       Readings* out) {
  for (unsigned m = 0; m < kMetricCount; ++m) {
    if (!target.enabled.test(m)) continue;
    absl::Status status = read_metric(*api_, static_cast<Metric>(m), target, tree, out);
    if (absl::IsUnavailable(status)) return status;
    if (status.ok()) continue;
    target.enabled.reset(m);
    warn(fmt::format("nvml: {} {} failed and is no longer sampled: {}", label(target),
                     kMetricNames[m], std::string(status.message())));
  }
  return absl::OkStatus();
}

}  // namespace trainscope::nvml
