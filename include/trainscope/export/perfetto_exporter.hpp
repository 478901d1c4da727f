// Regions as a Chrome JSON trace (the "JSON Array Format" of the Trace Event
// Format), which ui.perfetto.dev and chrome://tracing open: one process per
// rank, one track per CPU thread and one per GPU timeline of a thread.
//
// The file is streamed: "[" then one event per line, separated by commas, so
// whatever a crashed run left is still a loadable trace (the closing "]" is
// optional in this format; appending it makes the file strict JSON).
// close(), a final write_run_info() or the destructor write the "]".
#ifndef TRAINSCOPE_EXPORT_PERFETTO_EXPORTER_HPP_
#define TRAINSCOPE_EXPORT_PERFETTO_EXPORTER_HPP_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "trainscope/export/exporter.hpp"

namespace trainscope {

// Thread ids of GPU tracks: kGpuTidBase + the thread index of the thread that
// timed the region, so CPU and GPU tracks of one thread sort apart.
inline constexpr std::uint32_t kPerfettoGpuTidBase = 1000000;

// Events: region samples are complete events ("ph":"X"; "ts"/"dur" in
// microseconds with nanosecond decimals; "pid" = rank; "tid" = thread for
// CPU, kPerfettoGpuTidBase + thread for GPU; "name" = key; "cat" = "CPU" or
// "GPU"); metrics are counter events ("ph":"C", args {"value": v}); each track
// gets its name once ("ph":"M": "rank N", "CPU thread T", "GPU (thread T)").
// GPU slices start at the CPU time their region started (when its work was
// enqueued) and last the GPU-measured duration.
class PerfettoExporter final : public Exporter {
 public:
  // Creates (truncates) `path` and writes the opening "[".
  static absl::StatusOr<std::shared_ptr<PerfettoExporter>> Create(std::string path,
                                                                  std::uint32_t rank = 0);
  ~PerfettoExporter() override;  // close(), errors ignored
  PerfettoExporter(const PerfettoExporter&) = delete;
  PerfettoExporter& operator=(const PerfettoExporter&) = delete;

  std::string name() const override { return "perfetto:" + path_; }
  absl::Status write_samples(absl::Span<const RegionSample> samples) override;
  absl::Status write_metrics(absl::Span<const MetricPoint> metrics) override;
  // Closes the trace once the run has a final status.
  absl::Status write_run_info(const RunInfo& info) override;
  absl::Status flush() override;
  // Writes the closing "]" and closes the file; later writes fail. Idempotent.
  absl::Status close();

 private:
  PerfettoExporter(std::string path, std::uint32_t rank, std::FILE* file);
  void append_event(const std::string& event, std::string* out);
  void append_process_name(std::string* out);
  void append_track_names(Device device, std::uint32_t thread, std::string* out);
  absl::Status write(const std::string& text);
  absl::Status closed_error() const;

  std::string path_;
  std::uint32_t rank_;
  std::FILE* file_;
  bool any_event_ = false;
  bool process_named_ = false;
  std::set<std::pair<Device, std::uint32_t>> named_tracks_;
};

}  // namespace trainscope

#endif  // TRAINSCOPE_EXPORT_PERFETTO_EXPORTER_HPP_
