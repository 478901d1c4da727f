// One sampling thread that polls every HardwareSource at a fixed interval and
// submits each reading as a MetricPoint (key = reading name, with a wall
// timestamp and the current step) to an ExportPipeline, so hardware metrics
// line up with timer regions in the run store, MLflow and W&B.
#ifndef TRAINSCOPE_HARDWARE_SAMPLER_HPP_
#define TRAINSCOPE_HARDWARE_SAMPLER_HPP_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "trainscope/export/export_pipeline.hpp"
#include "trainscope/hardware/hardware_source.hpp"

namespace trainscope {

struct SamplerOptions {
  absl::Duration interval = absl::Seconds(1);
  HardwareContext context;
  // The rank column of every reading when process_rank is unset.
  std::uint32_t rank = 0;
  // A launcher's sampler: per-process readings (is_process_metric) carry the
  // rank this returns (asked every tick: a rank registers after the launch;
  // kNoRank while none or several ranks run under the launcher), host-wide
  // readings carry kNoRank.
  std::function<std::uint32_t()> process_rank;
  // The step each sample carries (e.g. the run's current step); 0 if unset.
  std::function<std::int64_t()> current_step;
};

class Sampler {
 public:
  Sampler(SamplerOptions options, std::vector<std::unique_ptr<HardwareSource>> sources,
          ExportPipeline* pipeline);
  ~Sampler();  // stop()
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  void start();
  // Takes one last sample, then joins the thread. Idempotent.
  void stop();
  std::uint64_t ticks() const noexcept;

 private:
  // The sampling thread's state, behind a pointer: in a forked child (no such
  // thread) stop() returns at once and the destructor abandons it
  // (src/common/fork_owner.hpp).
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace trainscope

#endif  // TRAINSCOPE_HARDWARE_SAMPLER_HPP_
