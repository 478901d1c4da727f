#include "trainscope/export/file_exporter.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/escaping.h"
#include "common/csv.hpp"
#include "common/files.hpp"
#include "fmt/format.h"
#include "trainscope/timing/time_type.hpp"

namespace trainscope {
namespace {

constexpr std::string_view kSamplesHeader = "key,device,thread,start_unix_ns,duration_ns\n";

// Appends to an existing samples file (runs can be resumed); only a new or
// empty file gets the header.
absl::StatusOr<std::FILE*> open_samples(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "ae");
  if (file == nullptr) return detail::file_error(errno, "open samples file", path);
  struct stat st;
  int error = 0;
  if (::fstat(::fileno(file), &st) != 0) {
    error = errno;
  } else if (st.st_size == 0 && std::fwrite(kSamplesHeader.data(), 1, kSamplesHeader.size(),
                                            file) != kSamplesHeader.size()) {
    error = errno;
  }
  if (error == 0) return file;
  std::fclose(file);
  return detail::file_error(error, "write samples file", path);
}

}  // namespace

absl::StatusOr<std::shared_ptr<FileExporter>> FileExporter::Create(std::string summary_path,
                                                                   std::string samples_path) {
  absl::StatusOr<StatsFormat> format = stats_format_for_path(summary_path);
  if (!format.ok()) return format.status();
  std::FILE* samples = nullptr;
  if (!samples_path.empty()) {
    absl::StatusOr<std::FILE*> opened = open_samples(samples_path);
    if (!opened.ok()) return opened.status();
    samples = *opened;
  }
  return std::shared_ptr<FileExporter>(
      new FileExporter(std::move(summary_path), *format, std::move(samples_path), samples));
}

FileExporter::FileExporter(std::string summary_path, StatsFormat format, std::string samples_path,
                           std::FILE* samples)
    : summary_path_(std::move(summary_path)),
      format_(format),
      samples_path_(std::move(samples_path)),
      samples_(samples) {}

FileExporter::~FileExporter() {
  if (samples_ != nullptr) std::fclose(samples_);
}

absl::Status FileExporter::write_samples(absl::Span<const RegionSample> samples) {
  if (samples_ == nullptr) return absl::OkStatus();
  std::string lines;
  for (const RegionSample& s : samples) {
    detail::append_csv_field(Key::FromId(s.key).name(), &lines);
    fmt::format_to(std::back_inserter(lines), ",{},{},{},{}\n", device_name(s.device), s.thread,
                   s.start_unix_ns, s.duration_ns);
  }
  if (std::fwrite(lines.data(), 1, lines.size(), samples_) != lines.size()) {
    return detail::file_error(errno, "write samples to", samples_path_);
  }
  return absl::OkStatus();
}

absl::Status FileExporter::write_summary(const Summary& summary) {
  // A reader never sees a half-written summary (common/files.hpp).
  return detail::write_file_atomically(summary_path_, format_summary(summary, format_));
}

absl::Status FileExporter::flush() {
  if (samples_ == nullptr) return absl::OkStatus();
  if (std::fflush(samples_) != 0) return detail::file_error(errno, "flush", samples_path_);
  if (::fsync(::fileno(samples_)) != 0) return detail::file_error(errno, "sync", samples_path_);
  return absl::OkStatus();
}

}  // namespace trainscope
