// trainscope._core._pass_stalls: the figures of one pass over a loader, from
// trainscope::stalls::pass_stalls, for the Python timed loader's live
// stalls/... metrics (trainscope/_stalls.py), so they are computed as
// `trainscope stalls RUN_DIR` computes them.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "py_timers.hpp"
#include "trainscope/stalls/analysis.hpp"

namespace py = pybind11;

namespace trainscope::python {

void RegisterStalls(py::module_& core) {
  core.def(
      "_pass_stalls",
      [](const std::vector<double>& waits_s, double wall_s) {
        const stalls::PassStalls p = stalls::pass_stalls(waits_s, wall_s);
        py::dict out;
        out["share"] = p.share;
        out["input_bound"] = stalls::input_bound_class(p.share);
        out["wait_p50_s"] = p.wait_p50_s;
        out["wait_p95_s"] = p.wait_p95_s;
        out["wait_max_s"] = p.wait_max_s;
        out["startup_wait_share"] = p.startup_wait_share;
        out["batches"] = p.batches;
        return out;
      },
      py::arg("waits_s"), py::arg("wall_s"),
      "One pass's data-wait figures (trainscope::stalls::pass_stalls).");
}

}  // namespace trainscope::python
