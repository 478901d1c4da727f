// The ledger's word on the diagnosis's labels (note_ledger, docs/ledger.md):
// a COMPUTE-BOUND job far from its device's peak.
#include <cmath>

#include "fmt/format.h"
#include "trainscope/diagnosis/diagnosis.hpp"

namespace trainscope::diagnosis {

void note_ledger(Scope& scope, const steps::Ledger& ledger, const Thresholds& thresholds) {
  if (!std::isfinite(ledger.mfu) || !(ledger.mfu < thresholds.mfu_low)) return;
  for (Label& label : scope.labels) {
    if (label.name != LabelName::kComputeBound) continue;
    label.evidence += fmt::format("; MFU {:.1f}% of {} (below mfu_low {:.0f}%)", ledger.mfu * 100,
                                  ledger.peak_source.empty() ? "the peak" : ledger.peak_source,
                                  thresholds.mfu_low * 100);
    const bool gpu = !ledger.device.empty() && ledger.device != "cpu";
    label.next_step += fmt::format(
        "; the compute itself is far from the device's peak: a larger batch{}, fused kernels or "
        "torch.compile do more FLOPs a second",
        gpu ? ", a lower precision (bf16, tf32)" : "");
  }
}

}  // namespace trainscope::diagnosis
