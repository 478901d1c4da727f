#include "trainscope/export/perfetto_exporter.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/escaping.h"
#include "common/files.hpp"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "trainscope/timing/time_type.hpp"

namespace trainscope {
namespace {

std::string json_string(std::string_view value) {
  // Replace invalid UTF-8 rather than fail: a key must not lose the trace.
  return nlohmann::json(std::string(value))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Nanoseconds as exact decimal microseconds ("1234.567"): a double would
// round Unix-epoch timestamps to about 0.25 us.
std::string micros(std::int64_t ns) {
  const char* sign = ns < 0 ? "-" : "";
  const std::uint64_t magnitude =
      ns < 0 ? std::uint64_t{0} - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  return fmt::format("{}{}.{:03}", sign, magnitude / 1000, magnitude % 1000);
}

std::uint32_t track_tid(Device device, std::uint32_t thread) {
  return device == Device::kGPU ? kPerfettoGpuTidBase + thread : thread;
}

std::string track_name(Device device, std::uint32_t thread) {
  return device == Device::kGPU ? fmt::format("GPU (thread {})", thread)
                                : fmt::format("CPU thread {}", thread);
}

}  // namespace

absl::StatusOr<std::shared_ptr<PerfettoExporter>> PerfettoExporter::Create(std::string path,
                                                                           std::uint32_t rank) {
  std::FILE* file = std::fopen(path.c_str(), "we");
  if (file == nullptr) return detail::file_error(errno, "create trace file", path);
  std::shared_ptr<PerfettoExporter> exporter(new PerfettoExporter(std::move(path), rank, file));
  absl::Status status = exporter->write("[\n");
  if (!status.ok()) return status;
  return exporter;
}

PerfettoExporter::PerfettoExporter(std::string path, std::uint32_t rank, std::FILE* file)
    : path_(std::move(path)), rank_(rank), file_(file) {}

PerfettoExporter::~PerfettoExporter() { (void)close(); }

absl::Status PerfettoExporter::closed_error() const {
  return absl::FailedPreconditionError(fmt::format("{}: the trace is closed", name()));
}

// Events are separated by ",\n", never terminated by one, so the file up
// to any complete event plus "]" is a valid JSON array.
void PerfettoExporter::append_event(const std::string& event, std::string* out) {
  if (any_event_) out->append(",\n");
  any_event_ = true;
  out->append(event);
}

void PerfettoExporter::append_process_name(std::string* out) {
  if (process_named_) return;
  process_named_ = true;
  append_event(
      fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"args":{{"name":"rank {}"}}}})",
                  rank_, rank_),
      out);
}

void PerfettoExporter::append_track_names(Device device, std::uint32_t thread, std::string* out) {
  append_process_name(out);
  if (!named_tracks_.emplace(device, thread).second) return;
  append_event(
      fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})",
                  rank_, track_tid(device, thread), json_string(track_name(device, thread))),
      out);
}

absl::Status PerfettoExporter::write_samples(absl::Span<const RegionSample> samples) {
  if (file_ == nullptr) return closed_error();
  std::string text;
  for (const RegionSample& s : samples) {
    append_track_names(s.device, s.thread, &text);
    append_event(
        fmt::format(R"({{"ph":"X","name":{},"cat":"{}","pid":{},"tid":{},"ts":{},"dur":{}}})",
                    json_string(Key::FromId(s.key).name()), device_name(s.device), rank_,
                    track_tid(s.device, s.thread), micros(s.start_unix_ns), micros(s.duration_ns)),
        &text);
  }
  return write(text);
}

absl::Status PerfettoExporter::write_metrics(absl::Span<const MetricPoint> metrics) {
  if (file_ == nullptr) return closed_error();
  std::string text;
  for (const MetricPoint& m : metrics) {
    if (!std::isfinite(m.value)) continue;  // JSON has no NaN or infinity
    append_process_name(&text);
    append_event(fmt::format(R"({{"ph":"C","name":{},"pid":{},"ts":{},"args":{{"value":{}}}}})",
                             json_string(m.key), rank_, micros(m.timestamp_ms * 1000000), m.value),
                 &text);
  }
  return write(text);
}

absl::Status PerfettoExporter::write_run_info(const RunInfo& info) {
  if (info.status == RunStatus::kRunning) return absl::OkStatus();
  return close();
}

absl::Status PerfettoExporter::flush() {
  if (file_ == nullptr) return absl::OkStatus();
  if (std::fflush(file_) == 0) return absl::OkStatus();
  return detail::file_error(errno, "write trace file", path_);
}

absl::Status PerfettoExporter::close() {
  if (file_ == nullptr) return absl::OkStatus();
  absl::Status status = write("\n]\n");
  if (file_ == nullptr) return status;  // write() failed and closed it
  const bool closed = std::fclose(file_) == 0;
  const int error = errno;
  file_ = nullptr;
  if (!status.ok()) return status;
  return closed ? absl::OkStatus() : detail::file_error(error, "close trace file", path_);
}

absl::Status PerfettoExporter::write(const std::string& text) {
  if (text.empty() || std::fwrite(text.data(), 1, text.size(), file_) == text.size()) {
    return absl::OkStatus();
  }
  const int error = errno;
  // A torn event would make the rest of the file unparsable: stop here.
  std::fclose(file_);
  file_ = nullptr;
  return detail::file_error(error, "write trace file", path_);
}

}  // namespace trainscope
