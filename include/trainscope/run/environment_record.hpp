// environment.json, typed: what `trainscope run` records about the machine and
// the software a launcher ran its command on (docs/run-format.md). One writer
// (format_environment_record: the launcher) and one reader
// (parse_environment_record: RunReader::environment_record, so compare's
// hardware and software warnings, the report and Python read the same fields).
// Every field may be missing in a run recorded by an older trainscope (or
// where a tool was absent): empty strings, zeros and nullopt then.
#ifndef TRAINSCOPE_RUN_ENVIRONMENT_RECORD_HPP_
#define TRAINSCOPE_RUN_ENVIRONMENT_RECORD_HPP_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace trainscope {

struct EnvironmentRecord {
  struct OperatingSystem {
    std::string sysname, release, version, machine;  // uname(2)
  };
  struct Git {
    std::string commit;
    bool dirty = false;  // uncommitted changes (or `git status` failed)
  };
  // The interpreter whose packages pip_freeze lists.
  struct Python {
    std::string path;
    std::string from;  // "the command" or "PATH (python3)"
    bool pip_freeze_cached = false;
  };

  std::string hostname;
  std::optional<OperatingSystem> os;
  std::string cpu_model;
  std::int64_t cores = 0;      // online CPUs
  std::int64_t memory_mb = 0;  // physical memory
  std::string launcher;        // "<host>-<pid>" of the launcher that wrote it
  std::vector<std::string> command_line;
  std::string cwd;
  std::optional<Git> git;
  std::optional<Python> python;
  // Paths, relative to the run directory, of the artifacts that hold each
  // tool's output ("artifacts/pip-freeze-<host>-<pid>.txt"); empty if none.
  std::string pip_freeze;
  std::string conda_list;
  std::string nvidia_smi;
  std::string driver_version;  // from nvidia-smi
  std::string cuda_version;

  // "Intel Xeon ..., 2 cores, 24003 MB": what compare calls a side's hardware.
  std::string hardware() const;
};

// The document, as the launcher writes it (a JSON object, 2-space indented).
std::string format_environment_record(const EnvironmentRecord& record);
// InvalidArgument naming `source` and the field ("environment.json: not a
// trainscope environment: cores: a string, not an integer") for text that is
// not such a document; members it does not know are ignored.
absl::StatusOr<EnvironmentRecord> parse_environment_record(std::string_view text,
                                                           std::string_view source);

}  // namespace trainscope

#endif  // TRAINSCOPE_RUN_ENVIRONMENT_RECORD_HPP_
