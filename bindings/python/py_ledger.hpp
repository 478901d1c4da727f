// The efficiency ledger as Python sees it (trainscope.ledger's dict, and
// Diagnosis.ledger): one conversion for both.
#ifndef TRAINSCOPE_BINDINGS_PYTHON_PY_LEDGER_HPP_
#define TRAINSCOPE_BINDINGS_PYTHON_PY_LEDGER_HPP_

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "trainscope/steps/ledger.hpp"

namespace trainscope::python {

// {'steps', 'samples_per_s', 'tokens_per_s', ..., 'notes', 'line', 'ranks': [...]}:
// the names of steps::Ledger (and of the diagnosis document's "ledger").
inline pybind11::dict ledger_dict(const steps::Ledger& ledger) {
  pybind11::list ranks;
  for (const steps::RankLedger& r : ledger.ranks) {
    pybind11::dict row;
    row["rank"] = r.rank;
    row["steps"] = r.steps;
    row["seconds"] = r.seconds;
    row["samples"] = r.samples;
    row["tokens"] = r.tokens;
    row["samples_per_s"] = r.samples_per_s;
    row["tokens_per_s"] = r.tokens_per_s;
    row["achieved_flops"] = r.achieved_flops;
    row["mfu"] = r.mfu;
    ranks.append(row);
  }
  pybind11::dict out;
  out["ranks"] = ranks;
  out["steps"] = ledger.steps;
  out["samples_per_s"] = ledger.samples_per_s;
  out["tokens_per_s"] = ledger.tokens_per_s;
  out["flops_per_step"] = ledger.flops_per_step;
  out["flops_source"] = ledger.flops_source;
  out["achieved_flops"] = ledger.achieved_flops;
  out["peak_flops"] = ledger.peak_flops;
  out["peak_source"] = ledger.peak_source;
  out["device"] = ledger.device;
  out["dtype"] = ledger.dtype;
  out["mfu"] = ledger.mfu;
  out["seconds"] = ledger.seconds;
  out["energy_j"] = ledger.energy_j;
  out["cpu_energy_j"] = ledger.cpu_energy_j;
  out["gpu_energy_j"] = ledger.gpu_energy_j;
  out["gpus"] = ledger.gpus;
  out["energy_per_step_j"] = ledger.energy_per_step_j;
  out["energy_per_1k_tokens_j"] = ledger.energy_per_1k_tokens_j;
  out["cost"] = ledger.cost;
  out["co2_g"] = ledger.co2_g;
  out["notes"] = ledger.notes;
  out["line"] = steps::format_ledger_line(ledger);
  return out;
}

}  // namespace trainscope::python

#endif  // TRAINSCOPE_BINDINGS_PYTHON_PY_LEDGER_HPP_
