// Hardware metrics, sampled in-process (radT spawns nvidia-smi, top, iostat,
// free and dcgmi and parses their text instead). A source reads one family
// of metrics; the Sampler polls every source from one thread.
#ifndef TRAINSCOPE_HARDWARE_HARDWARE_SOURCE_HPP_
#define TRAINSCOPE_HARDWARE_HARDWARE_SOURCE_HPP_

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace trainscope {

// One value, named by the scheme of docs/hardware-metrics.md:
// "system/<family>.<instance>.<quantity>_<unit>", e.g. "system/cpu.util_pct",
// "system/cpu.3.util_pct", "system/disk.nvme0n1.read_mb_s",
// "system/proc.rss_mb", "system/gpu.0.util_pct".
struct HardwareReading {
  std::string name;
  double value = 0.0;
};

// Whether a reading measures the monitored process tree rather than the host
// or a device as a whole: its name starts with "system/proc." or has a
// ".proc." part ("system/gpu.0.proc.mem_used_mb").
inline bool is_process_metric(std::string_view name) {
  return name.rfind("system/proc.", 0) == 0 || name.find(".proc.") != std::string_view::npos;
}

// What the sources need to know about the job.
struct HardwareContext {
  pid_t root_pid = 0;            // monitored process tree (0: this process)
  std::vector<int> gpu_devices;  // physical GPU indices to sample (empty: all visible)
};

class HardwareSource {
 public:
  virtual ~HardwareSource() = default;
  // "host.cpu", "nvml", ... for messages.
  virtual std::string name() const = 0;
  // Called once before the first sample. An error disables the source (the
  // sampler warns once and goes on without it).
  virtual absl::Status open(const HardwareContext& context) = 0;
  // Appends this tick's readings. Rates (CPU %, MB/s) are over the time since
  // the previous call; the first call may append none of them. An error
  // disables the source (one warning).
  virtual absl::Status sample(std::vector<HardwareReading>* out) = 0;
};

}  // namespace trainscope

#endif  // TRAINSCOPE_HARDWARE_HARDWARE_SOURCE_HPP_
