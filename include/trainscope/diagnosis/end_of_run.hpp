// The end of `trainscope run`: the ended run's diagnosis (its tags for the
// run, its ledger's final figures as run metrics, its summary for the user),
// or why there is none. tools/run_command.cpp sets end_of_run_hook() as
// LaunchOptions::end_record and prints
// end_of_run_text() after the launch. docs/diagnosis.md, "At the end of a run".
#ifndef TRAINSCOPE_DIAGNOSIS_END_OF_RUN_HPP_
#define TRAINSCOPE_DIAGNOSIS_END_OF_RUN_HPP_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "trainscope/diagnosis/diagnosis.hpp"
#include "trainscope/launch/launch.hpp"
#include "trainscope/run/run_status.hpp"

namespace trainscope::diagnosis {

// What the end of a run leaves for the summary: the diagnosis, or why there is none.
struct EndOfRun {
  std::optional<Diagnosis> diagnosis;
  std::string error;
};

// Reading costs about a second per 60 MB of region rows: past this the user
// would wait, uninterruptibly, after the training ended.
inline constexpr std::uint64_t kEndOfRunMaxRegionBytes = std::uint64_t{1} << 30;

// The run's status once its launcher has ended. While the hook runs the run
// directory still counts this launcher RUNNING, so the status is the worst of
// the command's outcome and the ranks' (RUNNING while another launcher's ranks
// still run), as RunReader combines them once the launcher file is final: the
// one order of trainscope/run/run_status.hpp, a crashed rank FAILED (the
// summary then says CRASHED).
RunStatus final_status(const Diagnosis& d, const LaunchResult& result);

// Diagnoses the run `result` ended, with final_status(); never throws. An
// error (the run unreadable, its region rows past `max_region_bytes`, which
// names `trainscope diagnose DIR`) leaves no diagnosis. `thresholds`: those
// of `trainscope run --threshold` (the hang watch's judge the HANG of a job
// ended for it); `ledger`: those of `trainscope run --peak-flops`, ...
EndOfRun diagnose_ended_run(const LaunchResult& result,
                            std::uint64_t max_region_bytes = kEndOfRunMaxRegionBytes,
                            const Thresholds& thresholds = {},
                            const steps::LedgerOptions& ledger = {});

// LaunchOptions::end_record: diagnose_ended_run() into *end, the diagnosis's
// tags for the run and its ledger's figures as run metrics
// (ledger_run_metrics: the values the summary's ledger line shows); nothing
// without a diagnosis.
std::function<EndRecord(const LaunchResult&)> end_of_run_hook(std::shared_ptr<EndOfRun> end,
                                                              Thresholds thresholds = {},
                                                              steps::LedgerOptions ledger = {});

// What `trainscope run` prints on stderr after the run: the summary
// (format_run_summary, nothing when `quiet`), or the one line that says why
// there is no diagnosis ("trainscope run: warning: no diagnosis of DIR: ...").
std::string end_of_run_text(const EndOfRun& end, const std::string& run_dir, bool quiet);

}  // namespace trainscope::diagnosis

#endif  // TRAINSCOPE_DIAGNOSIS_END_OF_RUN_HPP_
