// trainscope._core._RegionRing: regions timed elsewhere (a collective that
// one thread enters and another completes, a DDP bucket's all-reduce whose
// future completes on the backend's thread), recorded into a run with the
// start and duration they had. A Timer cannot: its start and end are "now"
// on one thread. The ring is one more producer of the run's ExportPipeline,
// as a timer's is, so the rows land in regions-<r>.csv (and every exporter)
// like any timer's; they have no entry in summary-<r>.json (no timer holds
// their statistics). Used by trainscope._torch_comm.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>

#include "py_timers.hpp"
#include "trainscope/common/clock.hpp"
#include "trainscope/run/run.hpp"
#include "trainscope/timing/detail/sample_ring.hpp"
#include "trainscope/timing/region_sink.hpp"

namespace py = pybind11;

namespace trainscope::python {
namespace {

class RegionRing {
 public:
  explicit RegionRing(Run& run) : ring_(run.pipeline().open_ring()) {}
  RegionRing(const RegionRing&) = delete;
  RegionRing& operator=(const RegionRing&) = delete;
  ~RegionRing() { release(); }

  // start_ns: CLOCK_MONOTONIC nanoseconds (Python's time.monotonic_ns()).
  // False when the ring is released or its budget dropped the row.
  bool record(py::handle key, std::int64_t start_ns, std::int64_t duration_ns) {
    if (ring_ == nullptr) return false;
    if (duration_ns < 0) throw py::value_error("a region's duration cannot be negative");
    Key interned(TimeType::EPOCH);
    if (!KeyFromPython(key.ptr(), &interned)) throw py::error_already_set();
    RegionSample sample;
    sample.key = interned.id();
    sample.device = Device::kCPU;
    sample.thread = trainscope::detail::thread_index();
    sample.start_unix_ns = start_ns;  // steady ns; the pipeline converts to wall time
    sample.duration_ns = duration_ns;
    return ring_->push(sample);
  }
  void release() noexcept {
    if (ring_ != nullptr) {
      ring_->release();
      ring_.reset();
    }
  }

 private:
  std::shared_ptr<timing::detail::SampleRing> ring_;
};

}  // namespace

void RegisterRegionRing(py::module_& m) {
  py::class_<RegionRing>(m, "_RegionRing", R"doc(
Regions timed elsewhere, recorded into a run (trainscope._torch_comm): record(key,
start_ns, duration_ns) with start_ns from time.monotonic_ns(). One producer at a
time (calls hold the GIL).)doc")
      .def(py::init([](Run& run) { return new RegionRing(run); }), py::arg("run"),
           py::keep_alive<1, 2>())
      .def("record", &RegionRing::record, py::arg("key"), py::arg("start_ns"),
           py::arg("duration_ns"))
      .def("release", &RegionRing::release);
}

}  // namespace trainscope::python
