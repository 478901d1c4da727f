// The end of `trainscope run` (trainscope/diagnosis/end_of_run.hpp).
#include "trainscope/diagnosis/end_of_run.hpp"

#include <exception>
#include <utility>

#include "fmt/format.h"
#include "trainscope/diagnosis/live_watch.hpp"
#include "trainscope/run/run_reader.hpp"

namespace trainscope::diagnosis {

RunStatus final_status(const Diagnosis& d, const LaunchResult& result) {
  RunStatus status = result.status;
  for (const RankNow& rank : d.ranks) status = worse_status(status, run_status_of(rank.status));
  return status;
}

EndOfRun diagnose_ended_run(const LaunchResult& result, std::uint64_t max_region_bytes,
                            const Thresholds& thresholds, const steps::LedgerOptions& ledger) {
  EndOfRun end;
  try {
    std::uint64_t region_bytes = 0;
    if (absl::StatusOr<RunReader> reader = RunReader::Open(result.run_dir); reader.ok()) {
      for (const RunFile& file : reader->files()) {
        if (file.kind == RunFileKind::kRegions) region_bytes += file.size_bytes;
      }
    }
    if (region_bytes > max_region_bytes) {
      const std::uint64_t gib = std::uint64_t{1} << 30;
      const std::string limit = max_region_bytes % gib == 0
                                    ? fmt::format("{} GiB", max_region_bytes / gib)
                                    : fmt::format("{} bytes", max_region_bytes);
      end.error = fmt::format(
          "its region rows are {} MB, past the {} the end of a run reads; `trainscope "
          "diagnose {}` gives it",
          region_bytes / 1000000, limit, result.run_dir);
      return end;
    }
    FollowOptions options;
    options.thresholds = thresholds;
    options.ledger = ledger;
    absl::StatusOr<Diagnosis> d = diagnose_run(result.run_dir, options);
    if (!d.ok()) {
      end.error = std::string(d.status().message());
      return end;
    }
    d->status = final_status(*d, result);
    end.diagnosis = *std::move(d);
  } catch (const std::exception& error) {
    end.diagnosis.reset();
    end.error = error.what();
  } catch (...) {
    end.diagnosis.reset();
    end.error = "an unknown exception";
  }
  return end;
}

std::function<EndRecord(const LaunchResult&)> end_of_run_hook(std::shared_ptr<EndOfRun> end,
                                                              Thresholds thresholds,
                                                              steps::LedgerOptions ledger) {
  return [end, thresholds, ledger](const LaunchResult& result) -> EndRecord {
    *end = diagnose_ended_run(result, kEndOfRunMaxRegionBytes, thresholds, ledger);
    EndRecord record;
    if (!end->diagnosis) return record;
    try {
      record.tags = diagnosis_tags(*end->diagnosis);
      if (end->diagnosis->ledger) record.metrics = ledger_run_metrics(*end->diagnosis->ledger);
      return record;
    } catch (const std::exception& error) {
      end->error = error.what();
    } catch (...) {
      end->error = "an unknown exception";
    }
    end->diagnosis.reset();
    return {};
  };
}

std::string end_of_run_text(const EndOfRun& end, const std::string& run_dir, bool quiet) {
  if (!end.diagnosis) {
    if (end.error.empty()) return "";
    return fmt::format("trainscope run: warning: no diagnosis of {}: {}\n", run_dir, end.error);
  }
  if (quiet) return "";
  std::string text = format_run_summary(*end.diagnosis);
  if (!text.empty() && text.back() != '\n') text += '\n';
  return text;
}

}  // namespace trainscope::diagnosis
