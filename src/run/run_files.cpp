#include "trainscope/run/run_files.hpp"

#include <sys/stat.h>

#include "run/run_format.hpp"

namespace trainscope {

bool is_run_directory(const std::string& dir) {
  struct stat st;
  const std::string path = run::detail::join_path(dir, run::detail::kRunFileName);
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string run_data_file_name(RunFileKind kind, std::uint32_t rank, std::string_view host) {
  switch (kind) {
    case RunFileKind::kRegions:
      return run::detail::regions_file_name(rank);
    case RunFileKind::kMetrics:
      return run::detail::metrics_file_name(rank);
    case RunFileKind::kSummary:
      return run::detail::summary_file_name(rank);
    case RunFileKind::kHostMetrics:
      break;
  }
  return run::detail::host_metrics_file_name(host);
}

std::string run_log_path(const std::string& run_dir, RunLog log) {
  return run::detail::join_path(
      run_dir, log == RunLog::kStdout ? run::detail::kStdoutLogName : run::detail::kStderrLogName);
}

std::string run_environment_path(const std::string& run_dir) {
  return run::detail::join_path(run_dir, run::detail::kEnvironmentFileName);
}

std::string launcher_variant_name(std::string_view name, std::string_view host, std::int64_t pid) {
  const std::size_t dot = name.rfind('.');
  const std::string_view stem = dot == std::string_view::npos ? name : name.substr(0, dot);
  const std::string_view extension = dot == std::string_view::npos ? "" : name.substr(dot);
  std::string out(stem);
  out += '-';
  out += run::detail::host_file_part(host);
  out += '-';
  out += std::to_string(pid);
  out += extension;
  return out;
}

std::string run_log_path(const std::string& run_dir, RunLog log, std::string_view host,
                         std::int64_t pid) {
  return run::detail::join_path(
      run_dir, launcher_variant_name(log == RunLog::kStdout ? run::detail::kStdoutLogName
                                                            : run::detail::kStderrLogName,
                                     host, pid));
}

std::string run_environment_path(const std::string& run_dir, std::string_view host,
                                 std::int64_t pid) {
  return run::detail::join_path(
      run_dir, launcher_variant_name(run::detail::kEnvironmentFileName, host, pid));
}

absl::Status write_run_artifact(const std::string& run_dir, std::string_view name,
                                std::string_view contents) {
  return run::detail::write_artifact(run_dir, name, contents);
}

}  // namespace trainscope
