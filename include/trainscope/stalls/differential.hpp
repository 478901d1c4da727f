// DS-Analyzer's differential analysis, without root (`trainscope stalls
// --dataset PATH -- command...`, Python's trainscope.stalls.run_differential):
// the command runs as four runs of one analysis directory, each stopped by
// the timed loader after W + N batches:
//   synthetic  the loader's first batch again and again: compute alone (T1)
//   cold       the dataset evicted from the page cache (T2)
//   warm       the dataset read in first (T3)
//   loader     warm, the loader alone: batches taken as soon as they are
//              ready, none handed to the loop (the loader's own rate)
// and one more warm run per --vary value. conclude() turns what the runs
// measured into the differential, the what-ifs and the findings; the result
// is stored as DIR/stalls.json (write_differential) and read back by
// read_differential, its one writer and one reader. docs/stalls.md describes
// the method.
#ifndef TRAINSCOPE_STALLS_DIFFERENTIAL_HPP_
#define TRAINSCOPE_STALLS_DIFFERENTIAL_HPP_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainscope/stalls/analysis.hpp"
#include "trainscope/stalls/page_cache.hpp"

namespace trainscope::stalls {

// The analysis's document in its directory, and the tags each of its runs gets.
inline constexpr char kAnalysisFileName[] = "stalls.json";
inline constexpr char kAnalysisTag[] = "trainscope.stalls.analysis";  // the analysis directory
inline constexpr char kLegTag[] = "trainscope.stalls.leg";            // the run's leg name

// What one run of the command measured: runs.<name> of stalls.json.
struct LegResult {
  std::string run_dir;
  Timing timing;               // the N measured iterations after W (time_s, time_ci_s)
  double live_wait_share = 0;  // waiting in the loader during those iterations
  // The disk's read rate: the busiest device's bytes over its busy time when it
  // read enough to tell ("diskstats"), else the mean of the hardware samples
  // that saw reads ("samples").
  double disk_read_mb_s = 0;
  std::string disk_rate_from;
  DiskReads disk;      // what the busiest device read during the run
  double read_mb = 0;  // by the command's process tree
  double cpu_pct = 0;  // the job's (docs/steps.md), % of one core, mean over the host samples
  // The dataset's residency before the run (cold: after eviction; warm and
  // loader: after reading it in); none for synthetic and the varied runs.
  std::optional<Residency> residency;
  // The run's live analysis ("analysis"; read back from stalls.json without
  // its series: iteration_s, wait_s and their starts are empty).
  RunStalls stalls;
};

// A warm run with `--KEY VALUE` appended to the command (--vary KEY=V1,V2).
struct VariedLeg {
  int value = 0;
  LegResult leg;
};

// The runs of one analysis, by role.
struct Legs {
  LegResult synthetic;
  LegResult cold;
  LegResult warm;
  LegResult loader;
  std::vector<VariedLeg> varied;  // in the order they ran
};

// A varied run's name (its run directory and its key in stalls.json's runs):
// "warm-<key>-<value>".
std::string varied_leg_name(const std::string& key, int value);

struct DatasetState {
  std::string path;
  Residency residency_before;                // before any run
  std::uint64_t available_memory_bytes = 0;  // MemAvailable; 0: unknown
};

// The cache what-if (what_if.cache): the model and what it was made from.
struct CacheWhatIf {
  double disk_read_mb_s = 0;  // the cold run's
  std::string disk_rate_from;
  double memory_mb_s = 0;
  double bytes_per_sample = 0;  // the cold run's reads over the samples it read; 0: unknown
  CacheModel model;
};

// The loader-worker what-if (what_if.workers): a fit, or why there is none.
struct WorkersWhatIf {
  std::string key;  // --vary's KEY
  std::optional<WorkerFit> fit;
  std::string note;  // without a fit
};

// A differential analysis: everything stalls.json holds, and the directory.
struct DifferentialAnalysis {
  std::string dir;  // the analysis directory (not in the document)
  DatasetState dataset;
  int iterations = 0;  // N
  int warmup = 0;      // W
  int batch_size = 1;  // B (1 when unknown: rates per batch)
  Legs runs;
  Differential differential;
  CacheWhatIf cache;
  std::optional<WorkersWhatIf> workers;  // with --vary
  GpuWhatIf gpus;
  std::vector<std::string> findings;  // each with the recommendation the what-ifs support
  std::vector<std::string> notes;     // what limits the runs (a partly warm cache, ...)
};

// What conclude() starts from: the runs, as measured, and the machine.
struct DifferentialInputs {
  DatasetState dataset;
  int iterations = 0;
  int warmup = 0;
  std::string vary_key;
  Legs runs;
  double memory_mb_s = 0;          // memory_bandwidth_mb_s()
  int cores = 1;                   // loader workers beyond this add nothing
  std::vector<std::string> notes;  // from evicting and reading in the dataset
};

// The differential, the what-ifs and the findings from measured runs: pure
// (no run is launched, no file read), so known inputs give known conclusions.
DifferentialAnalysis conclude(DifferentialInputs inputs);

struct DifferentialOptions {
  std::vector<std::string> command;  // argv, as `trainscope run` takes it
  std::string dataset;               // the files the loader reads (a directory or a file)
  int iterations = 50;               // N, >= 1 and >= warmup
  int warmup = 5;                    // W, >= 0
  // More warm runs, one per value, with `--KEY VALUE` appended to the command.
  std::string vary_key;
  std::vector<int> vary_values;
  // The analysis directory (its runs under DIR/runs/, the analysis in
  // DIR/stalls.json); empty: ./trainscope-stalls/<local time>.
  std::string dir;
  // Receives a line per step (which run starts, how it ended, the cache's
  // state); none: quiet.
  std::function<void(const std::string&)> progress;
};

// Runs the legs with trainscope::launch (the mode and the W + N limit in the
// command's environment only), concludes, and stores DIR/stalls.json.
// InvalidArgument for bad options or a dataset without files (naming it);
// FailedPrecondition naming the run when a run failed, recorded no timed
// loader or ended before W + N iterations; other errors from the file system
// or the launch.
absl::StatusOr<DifferentialAnalysis> run_differential(const DifferentialOptions& options);

// The document: stalls.json's JSON text (indented by one space, as
// `trainscope stalls --dataset ... --json` prints it).
std::string differential_json(const DifferentialAnalysis& analysis);
// Stores it as <analysis.dir>/stalls.json, atomically.
absl::Status write_differential(const DifferentialAnalysis& analysis);
// Reads a document from its text; InvalidArgument naming `file` and what is
// wrong: "FILE: not valid JSON: ..." or "FILE: not a trainscope stalls
// analysis: runs.cold.time_s: a string, not a number". `dir` is left empty.
absl::StatusOr<DifferentialAnalysis> parse_differential(std::string_view text,
                                                        const std::string& file);
// Reads <dir>/stalls.json; NotFound naming the file when it is not there.
absl::StatusOr<DifferentialAnalysis> read_differential(const std::string& dir);

// The analysis as `trainscope stalls --dataset` prints it: each run's time
// and live share, the rates, the stalls, the disk, the findings and notes.
std::string format_differential(const DifferentialAnalysis& analysis,
                                const std::vector<std::string>& command);

}  // namespace trainscope::stalls

#endif  // TRAINSCOPE_STALLS_DIFFERENTIAL_HPP_
