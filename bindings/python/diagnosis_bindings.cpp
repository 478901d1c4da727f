// trainscope._core's diagnosis (include/trainscope/diagnosis/diagnosis.hpp):
// diagnosis::diagnose_run with the GIL released, the one JSON writer and
// reader, the threshold table and the phase names. The result is the C++
// Diagnosis itself, bound with read-only properties of the same names;
// trainscope/diagnosis.py wraps the call (paths, dicts of phases and
// thresholds) and adds the pandas view.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "py_ledger.hpp"
#include "py_timers.hpp"
#include "trainscope/diagnosis/diagnosis.hpp"
#include "trainscope/launch/dump.hpp"
#include "trainscope/stats/summary.hpp"

namespace py = pybind11;

namespace trainscope::python {
namespace {

using diagnosis::CollectiveRow;
using diagnosis::Diagnosis;
using diagnosis::GpuNow;
using diagnosis::HostNow;
using diagnosis::Interval;
using diagnosis::KeyRow;
using diagnosis::Label;
using diagnosis::LabelKind;
using diagnosis::LabelName;
using diagnosis::Phase;
using diagnosis::PhaseRow;
using diagnosis::RankNow;
using diagnosis::Scope;

std::string Number(double value) {
  if (std::isnan(value)) return "nan";
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

std::string Quoted(std::string_view text) { return py::repr(py::str(std::string(text))); }

void BindInterval(py::module_& m) {
  py::class_<Interval>(m, "Interval",
                       "An estimate and its 95% interval: value, low, high (NaN when unknown).")
      .def_readonly("value", &Interval::value)
      .def_readonly("low", &Interval::low)
      .def_readonly("high", &Interval::high)
      .def("__iter__",
           [](const Interval& i) { return py::iter(py::make_tuple(i.value, i.low, i.high)); })
      .def("__repr__", [](const Interval& i) {
        return "Interval(value=" + Number(i.value) + ", low=" + Number(i.low) +
               ", high=" + Number(i.high) + ")";
      });
}

void BindLabel(py::module_& m) {
  py::class_<Label>(m, "Label", R"doc(
One label of a scope: name (INPUT-BOUND, STRAGGLER, ...), kind (COMPUTE-BOUND: the
largest compute phase; STRAGGLER: "input" or "compute"; MEMORY-CREEP: "host" or
"device"; else ""), rank (STRAGGLER, MEMORY-CREEP; else None), host
(HOST-PRESSURE; else None), device ("GPU" for COMPUTE-BOUND judged on the
device's time; else None), quantity (what value is), value (an Interval),
threshold and threshold_name (what the interval was held against), evidence and
next_step (one line each).)doc")
      // Python keeps the documents' names: the enums are the C++ API's.
      .def_property_readonly("name", [](const Label& l) { return std::string(label_name(l.name)); })
      .def_property_readonly("kind",
                             [](const Label& l) { return std::string(label_kind_name(l.kind)); })
      .def_readonly("rank", &Label::rank)
      .def_readonly("host", &Label::host)
      .def_property_readonly("device",
                             [](const Label& l) -> std::optional<std::string> {
                               if (!l.device) return std::nullopt;
                               return std::string(device_name(*l.device));
                             })
      .def_readonly("quantity", &Label::quantity)
      .def_readonly("value", &Label::value)
      .def_readonly("threshold", &Label::threshold)
      .def_readonly("threshold_name", &Label::threshold_name)
      .def_readonly("evidence", &Label::evidence)
      .def_readonly("next_step", &Label::next_step)
      .def("__repr__", [](const Label& l) {
        std::string out = "Label(" + Quoted(std::string(label_name(l.name)));
        if (l.kind != LabelKind::kNone)
          out += ", kind=" + Quoted(std::string(label_kind_name(l.kind)));
        if (l.rank) out += ", rank=" + std::to_string(*l.rank);
        if (l.host) out += ", host=" + Quoted(*l.host);
        if (l.device) out += ", device=" + Quoted(std::string(device_name(*l.device)));
        out += ", " + l.quantity + "=" + Number(l.value.value) + " [" + Number(l.value.low) + ", " +
               Number(l.value.high) + "], " + l.threshold_name + "=" + Number(l.threshold) + ")";
        return out;
      });
}

void BindPhaseRow(py::module_& m) {
  py::class_<PhaseRow>(m, "PhaseRow", R"doc(
One phase on one device over a scope's steps: phase (a name of PHASES), device
("CPU" or "GPU"), median_s and p95_s of every rank's steps, share of the step
time, median_rank_s (the median over ranks of each rank's median),
worst_rank_s and worst_rank, skew (worst_rank_s / median_rank_s - 1).)doc")
      .def_property_readonly("phase",
                             [](const PhaseRow& r) { return std::string(phase_name(r.phase)); })
      .def_property_readonly("device",
                             [](const PhaseRow& r) { return std::string(device_name(r.device)); })
      .def_readonly("median_s", &PhaseRow::median_s)
      .def_readonly("p95_s", &PhaseRow::p95_s)
      .def_readonly("share", &PhaseRow::share)
      .def_readonly("median_rank_s", &PhaseRow::median_rank_s)
      .def_readonly("worst_rank_s", &PhaseRow::worst_rank_s)
      .def_readonly("worst_rank", &PhaseRow::worst_rank)
      .def_readonly("skew", &PhaseRow::skew)
      .def("__repr__", [](const PhaseRow& r) {
        return "PhaseRow(" + std::string(phase_name(r.phase)) + ", " +
               std::string(device_name(r.device)) + ", median_s=" + Number(r.median_s) +
               ", share=" + Number(r.share) + ", worst_rank=" + std::to_string(r.worst_rank) +
               ", skew=" + Number(r.skew) + ")";
      });
}

void BindCollectiveRow(py::module_& m) {
  py::class_<CollectiveRow>(m, "CollectiveRow", R"doc(
One collective (op on group, its key COMM/<op>/<group>) over the ranks' last rows:
seconds (summed over ranks), count (the most rows a rank has), median_s, and
its arrivals: matched (collectives every rank recorded), last_rank (the rank
that entered last most often, None with one rank), last_share (how often) and
lag_s (median, when last, of its start minus the other ranks' median start).)doc")
      .def_readonly("key", &CollectiveRow::key)
      .def_readonly("op", &CollectiveRow::op)
      .def_readonly("group", &CollectiveRow::group)
      .def_readonly("seconds", &CollectiveRow::seconds)
      .def_readonly("count", &CollectiveRow::count)
      .def_readonly("median_s", &CollectiveRow::median_s)
      .def_readonly("matched", &CollectiveRow::matched)
      .def_readonly("last_rank", &CollectiveRow::last_rank)
      .def_readonly("last_share", &CollectiveRow::last_share)
      .def_readonly("lag_s", &CollectiveRow::lag_s)
      .def("__repr__", [](const CollectiveRow& c) {
        return "CollectiveRow(" + c.op + ", " + c.group + ", count=" + std::to_string(c.count) +
               ", last_rank=" + (c.last_rank ? std::to_string(*c.last_rank) : "None") +
               ", lag_s=" + Number(c.lag_s) + ")";
      });
}

void BindScope(py::module_& m) {
  py::class_<Scope>(m, "Scope", R"doc(
The diagnosis over some steps: name ("window" or "run"), steps (per rank),
warmup (steps dropped at the run's start), steps_per_s, step_s (an Interval),
phases (PhaseRow list), labels (Label list, the primary label first) and notes
(what could not be judged and why). find(name) returns the label or None.)doc")
      .def_readonly("name", &Scope::name)
      .def_readonly("steps", &Scope::steps)
      .def_readonly("warmup", &Scope::warmup)
      .def_readonly("steps_per_s", &Scope::steps_per_s)
      .def_readonly("step_s", &Scope::step_s)
      .def_readonly("phases", &Scope::phases)
      .def_readonly("labels", &Scope::labels)
      .def_readonly("collectives", &Scope::collectives)
      .def_readonly("notes", &Scope::notes)
      .def(
          "find",
          [](const Scope& s, const std::string& name) -> std::optional<Label> {
            const absl::StatusOr<LabelName> parsed = diagnosis::parse_label_name(name);
            const Label* label = parsed.ok() ? s.find(*parsed) : nullptr;
            if (label == nullptr) return std::nullopt;
            return *label;
          },
          py::arg("name"), "The label called `name` (\"STRAGGLER\"), or None.")
      .def("__repr__", [](const Scope& s) {
        std::string labels;
        for (const Label& l : s.labels) {
          labels += (labels.empty() ? "" : ", ") + std::string(label_name(l.name));
        }
        return "Scope(" + Quoted(s.name) + ", steps=" + std::to_string(s.steps) + ", labels=[" +
               labels + "])";
      });
}

void BindNow(py::module_& m) {
  py::class_<KeyRow>(m, "KeyRow", R"doc(
One region key: key, device, count (over the run), window_count, rate_per_s,
p50_s and p95_s (in the window), share (of the window's wall time, per rank),
run_median_s with run_median_low_s/run_median_high_s (95%) and run_p95_s;
callers: the modules its rows come from when more than one ("Net, Head";
--auto's tag trainscope.auto.callers.<key>), else ""; sampled_every: timed on
one step in this many (a layer's backward under --auto=layers; 1: every step).)doc")
      .def_readonly("key", &KeyRow::key)
      .def_property_readonly("device",
                             [](const KeyRow& r) { return std::string(device_name(r.device)); })
      .def_readonly("count", &KeyRow::count)
      .def_readonly("window_count", &KeyRow::window_count)
      .def_readonly("rate_per_s", &KeyRow::rate_per_s)
      .def_readonly("p50_s", &KeyRow::p50_s)
      .def_readonly("p95_s", &KeyRow::p95_s)
      .def_readonly("share", &KeyRow::share)
      .def_readonly("run_median_s", &KeyRow::run_median_s)
      .def_readonly("run_median_low_s", &KeyRow::run_median_low_s)
      .def_readonly("run_median_high_s", &KeyRow::run_median_high_s)
      .def_readonly("run_p95_s", &KeyRow::run_p95_s)
      .def_readonly("callers", &KeyRow::callers)
      .def_readonly("sampled_every", &KeyRow::sampled_every)
      .def("__repr__", [](const KeyRow& r) {
        return "KeyRow(" + Quoted(r.key) + ", " + std::string(device_name(r.device)) +
               ", count=" + std::to_string(r.count) + ", p50_s=" + Number(r.p50_s) + ")";
      });
  py::class_<GpuNow>(m, "GpuNow",
                     "A GPU's latest readings: index, util_pct, mem_used_mb, "
                     "mem_total_mb (NaN when not read).")
      .def_readonly("index", &GpuNow::index)
      .def_readonly("util_pct", &GpuNow::util_pct)
      .def_readonly("mem_used_mb", &GpuNow::mem_used_mb)
      .def_readonly("mem_total_mb", &GpuNow::mem_total_mb);
  py::class_<HostNow>(m, "HostNow",
                      "A host's latest readings: host, time_ms, cpu_util_pct, "
                      "mem_used_pct, swap_used_mb, gpus (GpuNow list).")
      .def_readonly("host", &HostNow::host)
      .def_readonly("time_ms", &HostNow::time_ms)
      .def_readonly("cpu_util_pct", &HostNow::cpu_util_pct)
      .def_readonly("mem_used_pct", &HostNow::mem_used_pct)
      .def_readonly("swap_used_mb", &HostNow::swap_used_mb)
      .def_readonly("gpus", &HostNow::gpus);
  py::class_<RankNow>(m, "RankNow",
                      "A rank: rank, host, status (RUNNING, FINISHED, FAILED, "
                      "KILLED, CRASHED), steps; its own window: step_p50_s, step_p95_s, "
                      "steps_per_s, phase_share (dict phase -> share; NaN: not timed); its "
                      "process tree's latest cpu_pct, rss_mb, gpu_mem_mb (NaN: none).")
      .def_readonly("rank", &RankNow::rank)
      .def_readonly("host", &RankNow::host)
      .def_property_readonly(
          "status", [](const RankNow& r) { return std::string(process_status_name(r.status)); })
      .def_readonly("steps", &RankNow::steps)
      .def_readonly("step_p50_s", &RankNow::step_p50_s)
      .def_readonly("step_p95_s", &RankNow::step_p95_s)
      .def_readonly("steps_per_s", &RankNow::steps_per_s)
      .def_property_readonly("phase_share",
                             [](const RankNow& r) {
                               py::dict out;
                               for (std::size_t i = 0; i < r.phase_share.size(); ++i) {
                                 out[py::str(std::string(phase_name(static_cast<Phase>(i))))] =
                                     r.phase_share[i];
                               }
                               return out;
                             })
      .def_readonly("cpu_pct", &RankNow::cpu_pct)
      .def_readonly("rss_mb", &RankNow::rss_mb)
      .def_readonly("gpu_mem_mb", &RankNow::gpu_mem_mb)
      .def("__repr__", [](const RankNow& r) {
        return "RankNow(rank=" + std::to_string(r.rank) + ", host=" + Quoted(r.host) +
               ", status=" + Quoted(std::string(process_status_name(r.status))) +
               ", steps=" + std::to_string(r.steps) + ")";
      });
}

void BindDiagnosis(py::module_& m) {
  py::class_<Diagnosis>(m, "Diagnosis", R"doc(
A run's diagnosis (trainscope::diagnosis::Diagnosis): run_dir, run_id,
run_name, status, start_time_ms, elapsed_ms, world_size, ranks (RankNow list),
hosts, window_steps (K), read_share (1 unless a live follower sampled the run), window and run (Scope: the last K steps and the whole
run), keys (KeyRow list, by summed window time), host_now (HostNow list).
headline() is the labels in one line; to_json() the document
`trainscope diagnose --json` prints (read back with trainscope.read_diagnosis).)doc")
      .def_readonly("run_dir", &Diagnosis::run_dir)
      .def_readonly("run_id", &Diagnosis::run_id)
      .def_readonly("run_name", &Diagnosis::run_name)
      .def_property_readonly(
          "status", [](const Diagnosis& d) { return std::string(run_status_name(d.status)); })
      .def_readonly("start_time_ms", &Diagnosis::start_time_ms)
      .def_readonly("elapsed_ms", &Diagnosis::elapsed_ms)
      .def_readonly("world_size", &Diagnosis::world_size)
      .def_readonly("ranks", &Diagnosis::ranks)
      .def_readonly("hosts", &Diagnosis::hosts)
      .def_readonly("window_steps", &Diagnosis::window_steps)
      .def_readonly("read_share", &Diagnosis::read_share)
      .def_readonly("window", &Diagnosis::window)
      .def_readonly("run", &Diagnosis::run)
      .def_readonly("keys", &Diagnosis::keys)
      .def_readonly("host_now", &Diagnosis::host_now)
      .def_property_readonly(
          "auto_found",
          [](const Diagnosis& d) {
            py::dict found;
            found["mode"] = d.auto_found.mode;
            found["steps"] = d.auto_found.steps;
            found["found"] = d.auto_found.found;
            return found;
          },
          "What `trainscope run --auto` found: {'mode', 'steps', 'found'} (mode '': no --auto "
          "run).")
      .def_property_readonly(
          "captures",
          [](const Diagnosis& d) {
            py::list out;
            for (const diagnosis::Capture& c : d.captures) {
              py::dict one;
              one["rank"] = c.rank;
              one["step"] = c.step;
              one["path"] = c.path;
              one["label"] = c.label
                                 ? py::object(py::str(std::string(diagnosis::label_name(*c.label))))
                                 : py::object(py::none());
              out.append(std::move(one));
            }
            return out;
          },
          "The anomaly captures: [{'rank', 'step' (the slow one, or the step a label's capture "
          "began after), 'path' (in the run), 'label' (the label that asked for it; None: a "
          "slow step)}].")
      .def_property_readonly(
          "ledger",
          [](const Diagnosis& d) -> py::object {
            if (!d.ledger) return py::none();
            return ledger_dict(*d.ledger);
          },
          "diagnose()'s efficiency ledger (docs/ledger.md): the dict of trainscope.ledger, "
          "None when the run recorded no work.")
      .def("headline", &Diagnosis::headline,
           "The labels of the run scope (the window's while running) in one line.")
      .def(
          "to_json",
          [](const Diagnosis& d, int indent) { return diagnosis::diagnosis_json(d, indent); },
          py::arg("indent") = -1,
          "The document {\"format\": \"trainscope.diagnosis\", ...}; indent < 0: compact.")
      .def("__str__", &diagnosis::format_diagnosis)
      .def("__repr__", [](const Diagnosis& d) {
        return "<Diagnosis " + Quoted(d.run_dir) +
               " status=" + std::string(run_status_name(d.status)) +
               " headline=" + Quoted(d.headline()) + ">";
      });
}

}  // namespace

void RegisterDiagnosis(py::module_& core) {
  BindInterval(core);
  BindLabel(core);
  BindPhaseRow(core);
  BindCollectiveRow(core);
  BindScope(core);
  BindNow(core);
  BindDiagnosis(core);
  core.def(
      "_diagnose",
      [](const std::string& run_dir, std::size_t window,
         const std::vector<std::string>& phase_specs,
         const std::vector<std::pair<std::string, double>>& thresholds) {
        diagnosis::FollowOptions options;
        options.window_steps = window;
        for (const std::string& spec : phase_specs) ThrowIfError(options.keys.map(spec));
        for (const auto& [name, value] : thresholds) {
          ThrowIfError(options.thresholds.set(name, value));
        }
        absl::StatusOr<Diagnosis> result;
        {
          py::gil_scoped_release release;  // reading a large run takes seconds
          result = diagnosis::diagnose_run(run_dir, options);
        }
        ThrowIfError(result.status());
        return std::move(*result);
      },
      py::arg("run_dir"), py::arg("window"), py::arg("phase_specs"), py::arg("thresholds"),
      "diagnosis::diagnose_run; see trainscope.diagnose().");
  core.def(
      "_read_diagnosis",
      [](const std::string& path) {
        absl::StatusOr<Diagnosis> result;
        {
          py::gil_scoped_release release;
          result = diagnosis::read_diagnosis(path);
        }
        ThrowIfError(result.status());
        return std::move(*result);
      },
      py::arg("path"), "diagnosis::read_diagnosis; see trainscope.read_diagnosis().");
  core.def(
      "_parse_diagnosis",
      [](const std::string& text, const std::string& source) {
        absl::StatusOr<Diagnosis> result = diagnosis::parse_diagnosis(text, source);
        ThrowIfError(result.status());
        return std::move(*result);
      },
      py::arg("text"), py::arg("source"), "diagnosis::parse_diagnosis.");
  core.def("_format_run_summary", &diagnosis::format_run_summary, py::arg("diagnosis"));
  // (name, default, meaning) of every threshold, in the table's order.
  py::list thresholds;
  const diagnosis::Thresholds defaults;
  for (const diagnosis::ThresholdInfo& info : diagnosis::threshold_table()) {
    thresholds.append(
        py::make_tuple(std::string(info.name), defaults.*(info.field), std::string(info.meaning)));
  }
  core.attr("_DIAGNOSIS_THRESHOLDS") = py::tuple(thresholds);
  py::list phases;
  for (std::size_t i = 0; i < diagnosis::kPhaseCount; ++i) {
    phases.append(std::string(phase_name(static_cast<Phase>(i))));
  }
  core.attr("_DIAGNOSIS_PHASES") = py::tuple(phases);
  py::list labels;
  // Every label, HANG and LAUNCH-BOUND (the last) included.
  for (int i = 0; i <= static_cast<int>(diagnosis::LabelName::kLaunchBound); ++i) {
    labels.append(std::string(label_name(static_cast<diagnosis::LabelName>(i))));
  }
  core.attr("_DIAGNOSIS_LABELS") = py::tuple(labels);
  // The signal `trainscope dump` sends (trainscope/launch/dump.hpp); trainscope._hang waits for it.
  core.attr("_DUMP_SIGNAL") = dump_signal();
}

}  // namespace trainscope::python
