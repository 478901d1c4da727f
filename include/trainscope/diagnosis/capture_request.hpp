// Captures asked for by a label (issue 40): when STRAGGLER, MEMORY-CREEP or
// THROUGHPUT-DRIFT first appears in a running job, the launcher's watch
// (`trainscope run`, what follows the run live for HANG) writes a capture
// request into the run directory (capture-request.json: one writer, this
// room; one reader, bindings/python/trainscope/_anomaly.py, whose daemon
// thread looks at it once a second); each rank asked starts a torch.profiler
// capture of its next N steps, within the same caps as a slow step's
// (--capture-max, 100 MB), named for the label
// (captures/capture-r<rank>-s<step>-<label>.json). docs/run-format.md,
// docs/auto.md. Nothing of it runs on the training thread but one attribute
// read per step.
#ifndef TRAINSCOPE_DIAGNOSIS_CAPTURE_REQUEST_HPP_
#define TRAINSCOPE_DIAGNOSIS_CAPTURE_REQUEST_HPP_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "trainscope/diagnosis/diagnosis.hpp"
#include "trainscope/diagnosis/hang.hpp"
#include "trainscope/launch/launch.hpp"

namespace trainscope::diagnosis {

// The request file, in the run directory.
inline constexpr std::string_view kCaptureRequestFile = "capture-request.json";

// STRAGGLER, MEMORY-CREEP, THROUGHPUT-DRIFT: the labels whose first
// appearance asks for a capture.
bool asks_capture(LabelName name) noexcept;

struct CaptureRequest {
  LabelName label = LabelName::kStraggler;
  std::uint64_t step = 0;            // steps ended (the most of any rank) when it appeared
  std::vector<std::uint32_t> ranks;  // the ranks asked, in order
  std::int64_t time_ms = 0;          // Unix ms of the watch's read
};

// The pure step: the requests the labels of `diagnosis` (its window and run
// scopes) ask for that `asked` does not hold yet, one per label name per run.
// STRAGGLER and THROUGHPUT-DRIFT ask every rank that runs (the straggler's
// trace beside those of the ranks that wait for it); MEMORY-CREEP the rank it
// names. Nothing when no rank runs.
std::vector<CaptureRequest> new_capture_requests(const Diagnosis& diagnosis,
                                                 const std::vector<CaptureRequest>& asked);

// {"format": "trainscope.capture_request", "version": 1, "requests": [{"label":
// "MEMORY-CREEP", "step": 57, "ranks": [0], "time_ms": ...}, ...]}: every
// request of the run so far, oldest first.
std::string capture_requests_json(const std::vector<CaptureRequest>& requests);
// Writes them to <run_dir>/capture-request.json atomically (a reader sees the
// old list or the new one, never a mix). The error names the file.
absl::Status write_capture_requests(const std::string& run_dir,
                                    const std::vector<CaptureRequest>& requests);

}  // namespace trainscope::diagnosis

#endif  // TRAINSCOPE_DIAGNOSIS_CAPTURE_REQUEST_HPP_
