// A sweep's plan: the jobs to run, whatever the input was (radT's experiment
// CSV, radT's / W&B's YAML sweep, Furcate's JSON config, a grid on the
// command line). Every job is one `trainscope run` (launch()).
#ifndef TRAINSCOPE_SWEEP_PLAN_HPP_
#define TRAINSCOPE_SWEEP_PLAN_HPP_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace trainscope::sweep {

// One training of the sweep.
struct Job {
  // Stable across re-expansions of the same input (resume, live update): a
  // name built from the params (and repeat), unique within the plan, usable
  // as a directory name ([A-Za-z0-9._=-]).
  std::string id;
  // In input order; each reaches the program as `--key value` (so the run's
  // params are the config).
  std::vector<std::pair<std::string, std::string>> params;
  int repeat = 0;  // 0-based repetition of the same params (--repeat)
  // Jobs of the same group start together (radT: same Experiment and
  // Workload, collocated); groups run in order. -1: no group (free scheduling).
  int group = -1;
  // Devices the input pinned ("0+1" in radT's Devices); empty: the scheduler assigns slots.
  std::vector<int> devices;
  std::string collocation = "-";       // "-" exclusive, "mps", or a MIG profile ("3g.20gb")
  std::vector<std::string> listeners;  // radT's Listeners ("smi", "top", "nsys", ...)
  std::vector<std::string> command;    // program and its own arguments, without the params
  std::string config_json;             // the config as JSON (Furcate: a file path in the env)
  std::string source;                  // "file:line" or "file: key" for messages
};

struct Plan {
  std::string name;
  std::vector<Job> jobs;
  int max_parallel = 0;   // 0: every free slot (Furcate: meta.max_threads)
  bool allow_cpu = true;  // Furcate's meta.allow_cpu
};

}  // namespace trainscope::sweep

#endif  // TRAINSCOPE_SWEEP_PLAN_HPP_
