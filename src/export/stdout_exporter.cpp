#include "trainscope/export/stdout_exporter.hpp"

#include <cerrno>
#include <string>

namespace trainscope {

absl::Status StdoutExporter::write_summary(const Summary& summary) {
  const std::string text = format_summary(summary, format_);
  if (std::fwrite(text.data(), 1, text.size(), stream_) != text.size()) {
    return absl::ErrnoToStatus(errno, "stdout exporter: cannot write the summary");
  }
  return absl::OkStatus();
}

absl::Status StdoutExporter::flush() {
  if (std::fflush(stream_) != 0) return absl::ErrnoToStatus(errno, "stdout exporter: cannot flush");
  return absl::OkStatus();
}

}  // namespace trainscope
