// Hangs: a rank whose step has not ended for longer than
// max(hang_factor x its p99 step, hang_min_s) while its process runs is hung
// (docs/diagnosis.md, "HANG"). The pure step (find_hung) judges measured
// progress; HangWatch follows a run directory for it (the launcher's
// `--on-hang`, without a reader running); the follower adds its HANG labels
// to the diagnosis (`trainscope diagnose`, `trainscope top`).
#ifndef TRAINSCOPE_DIAGNOSIS_HANG_HPP_
#define TRAINSCOPE_DIAGNOSIS_HANG_HPP_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "trainscope/diagnosis/diagnosis.hpp"
#include "trainscope/launch/launch.hpp"
#include "trainscope/steps/steps.hpp"

namespace trainscope::diagnosis {

// What the hang check knows of one rank.
struct RankProgress {
  std::uint32_t rank = 0;
  bool alive = false;                 // its process runs (RUNNING, heartbeat fresh)
  std::uint64_t steps = 0;            // steps ended so far
  std::int64_t last_step_end_ns = 0;  // Unix ns; 0: no step ended yet (not judged)
  std::vector<double> recent_step_s;  // its last steps' periods (the window)
};

struct HungRank {
  std::uint32_t rank = 0;
  std::uint64_t step = 0;      // the step that has not ended (from 0)
  std::int64_t since_ns = 0;   // the end of its last step, Unix ns
  double stalled_s = 0;        // now - since
  double limit_s = 0;          // max(hang_factor x p99_s, hang_min_s)
  double p99_s = stats::kNaN;  // of recent_step_s; NaN without any
};

// max(hang_factor x the p99 of `recent_step_s`, hang_min_s).
double hang_limit_s(const std::vector<double>& recent_step_s, const Thresholds& thresholds);

// The pure step: the ranks that are hung at `now_ns`, in rank order. A rank
// not alive (ended, crashed) or without a step ended is never hung.
std::vector<HungRank> find_hung(const std::vector<RankProgress>& ranks, std::int64_t now_ns,
                                const Thresholds& thresholds);

// What a rank of the steps room shows of its progress.
RankProgress progress_of(const steps::RankSteps& rank);

// The HANG label of a hung rank: quantity "stalled_s", the threshold its
// limit, the evidence "step 20 has not ended for 12.3 s, since 12:03:07 UTC
// (limit 5 s = max(10 x p99 12.3 ms, hang_min_s 5 s)); its process runs".
// `ended`: judged at the end of a job ended for the hang (tag
// trainscope.end_reason=hang), the evidence then ends "its process ran until
// the job was ended for the hang".
Label hang_label(const HungRank& hung, const Thresholds& thresholds, bool ended = false);

// "HANG: rank 1 (step 20 not ended since 12:03:07 UTC); rank 0 (...)": one
// line, the same while the same ranks hang in the same steps.
std::string hang_line(const std::vector<HungRank>& hung);

// Follows a run directory for hangs only (its steps, within a read budget):
// what the launcher runs while the command runs.
class HangWatch {
 public:
  static absl::StatusOr<HangWatch> Open(std::string run_dir, Thresholds thresholds = {});
  HangWatch(HangWatch&&) noexcept;
  HangWatch& operator=(HangWatch&&) noexcept;
  ~HangWatch();

  // Reads what the run appended and judges it at the time of the read. An
  // error names the file; what was read before is kept.
  absl::StatusOr<std::vector<HungRank>> poll();

 private:
  struct State;
  explicit HangWatch(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// ---------------------------------------------------------------------------
// A rank's dump (dump-<rank>.json, written by bindings/python/trainscope/_hang.py
// on `trainscope dump`: trainscope/launch/dump.hpp): its threads' stacks, the
// regions open, its recent collectives (when the collective ring records them).

struct DumpFrame {
  std::string file;
  std::int64_t line = 0;
  std::string function;
};
struct DumpThread {
  std::string name;
  bool main = false;
  std::vector<DumpFrame> frames;  // innermost first
};
struct DumpCollective {
  std::string op;
  std::string group;
  std::int64_t seq = 0;
  bool left = false;  // false: the rank is in it
};
struct RankDump {
  std::uint32_t rank = 0;
  std::int64_t pid = 0;
  std::int64_t time_ms = 0;
  std::vector<DumpThread> threads;          // the main thread first
  std::vector<std::string> regions;         // open in the --auto recorder; C++: "LOAD (open 12 s)"
  std::vector<DumpCollective> collectives;  // oldest first
  std::vector<std::string> notes;
  std::string file;  // read_dumps: the file's name ("dump-1.json", "dump-1.txt")
};
// {"format": "trainscope.dump", "version": 1, ...}; errors name `source` and the key.
absl::StatusOr<RankDump> parse_dump(std::string_view text, std::string_view source);
// The last block a C++ rank appended to dump-<rank>.txt (src/run/dump_handler.hpp):
// its regions open. NotFound when the text holds none (Python's faulthandler
// stacks); InvalidArgument naming `source` and the line when it is cut or bad.
absl::StatusOr<RankDump> parse_region_dump(std::string_view text, std::string_view source);
// The dumps in a run directory, by rank (dump-<rank>.json, else a C++ rank's
// dump-<rank>.txt); each file that cannot be read or parsed (cut, unreadable)
// is a note naming it, and the others are read.
std::vector<RankDump> read_dumps(const std::string& run_dir, std::vector<std::string>* notes);
// Where a dumped rank is, in one line: "main thread in sleep_forever
// (hang.py:20) <- main (hang.py:55); lock-taker in take_the_other_way
// (hang.py:31); waits in all_reduce #57 of group 0".
std::string dump_text(const RankDump& dump);

// Each HANG label's evidence gets its rank's dump ("; dump-1.json at
// 12:03:10 UTC: main thread in sleep_forever ..."); with the ranks'
// collective rings, the collective the others wait in that a hung rank has
// not entered ("rank 1 has not entered all_reduce #57 of group 0; ranks 0
// wait in it").
void add_dump_evidence(std::vector<Label>* hangs, const std::vector<RankDump>& dumps);

// The anomaly captures a run holds (captures/capture-r<rank>-s<step>.json),
// by rank then step; other files there are left alone.
std::vector<Capture> find_captures(const std::string& run_dir);

// What `trainscope run --on-hang` does once a rank hangs: say it and leave
// the job running (kNone), also ask every rank for its stacks (kDump:
// trainscope/launch/dump.hpp), or ask, then stop the job (kKill: KILLED with
// trainscope.end_reason "hang").
enum class OnHang : std::uint8_t { kNone, kDump, kKill };
std::string_view on_hang_name(OnHang on_hang) noexcept;       // "none", "dump", "kill"
absl::StatusOr<OnHang> parse_on_hang(std::string_view name);  // InvalidArgument naming it
// LaunchOptions::watch for `--on-hang`: a HangWatch of the run at each call.
std::function<WatchVerdict(const std::string& run_dir)> hang_watch(OnHang on_hang,
                                                                   Thresholds thresholds);

}  // namespace trainscope::diagnosis

#endif  // TRAINSCOPE_DIAGNOSIS_HANG_HPP_
