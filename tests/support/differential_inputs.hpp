// What the runs of a differential analysis measured, made up with round
// numbers (tests of stalls::conclude, of stalls.json's writer and reader, and
// of the report page that shows it): N = 10 iterations of B = 8 samples after
// W = 2; T1 0.1 s, T2 0.4 s, T3 0.35 s, the loader alone 0.05 s, and a warm
// run with --num_workers 2 of 0.2 s.
#ifndef TRAINSCOPE_TESTS_SUPPORT_DIFFERENTIAL_INPUTS_HPP_
#define TRAINSCOPE_TESTS_SUPPORT_DIFFERENTIAL_INPUTS_HPP_

#include <string>

#include "trainscope/stalls/differential.hpp"

namespace trainscope::testing {

inline stalls::LegResult made_up_leg(const std::string& dir, const std::string& name, double time_s,
                                     double ci_s, double live_share) {
  stalls::LegResult leg;
  leg.run_dir = dir + "/runs/" + name;
  leg.timing.total_s = time_s;
  leg.timing.ci_half_s = ci_s;
  leg.timing.iterations = 10;
  leg.live_wait_share = live_share;
  leg.disk_read_mb_s = 100;
  leg.disk_rate_from = "diskstats";
  leg.disk = {"sda", 2000000, 20};
  leg.read_mb = 2;
  leg.cpu_pct = 90;
  stalls::RunStalls& s = leg.stalls;
  s.run_dir = leg.run_dir;
  s.status = "FINISHED";
  s.batch_size = 8;
  s.pattern = live_share < 0.05 ? "none" : "spread";
  s.total = stalls::pass_stalls(std::vector<double>(12, live_share * time_s / 10), time_s * 1.2);
  s.passes = {s.total};
  s.passes[0].index = 1;
  s.ranks = {{0, s.total}};
  return leg;
}

inline stalls::DifferentialInputs made_up_differential_inputs(const std::string& dir) {
  stalls::DifferentialInputs in;
  in.dataset.path = "/data";
  in.dataset.residency_before = {4, 4096, 1024, {}};
  in.dataset.available_memory_bytes = 8u << 30;
  in.iterations = 10;
  in.warmup = 2;
  in.vary_key = "num_workers";
  in.runs.synthetic = made_up_leg(dir, "synthetic", 0.1, 0.001, 0.0);
  in.runs.cold = made_up_leg(dir, "cold", 0.4, 0.01, 0.74);
  in.runs.cold.residency = stalls::Residency{4, 4096, 0, {}};
  in.runs.warm = made_up_leg(dir, "warm", 0.35, 0.005, 0.7);
  in.runs.warm.residency = stalls::Residency{4, 4096, 4096, {}};
  in.runs.loader = made_up_leg(dir, "loader", 0.05, 0.001, 0.9);
  in.runs.loader.residency = stalls::Residency{4, 4096, 4096, {}};
  in.runs.varied = {{2, made_up_leg(dir, "warm-num_workers-2", 0.2, 0.004, 0.5)}};
  in.memory_mb_s = 10000;
  in.cores = 4;
  return in;
}

}  // namespace trainscope::testing

#endif  // TRAINSCOPE_TESTS_SUPPORT_DIFFERENTIAL_INPUTS_HPP_
