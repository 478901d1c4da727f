// The diagnosis's flags, shared by `trainscope diagnose` and `trainscope top`,
// and the ledger's, by `diagnose` and `run` (tools/cli.hpp).
#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "cli.hpp"
#include "fmt/format.h"
#include "trainscope/diagnosis/diagnosis.hpp"

namespace trainscope::cli {

void add_diagnosis_options(CommandLine* line, diagnosis::FollowOptions* options) {
  line->add_value(
      "--window", "K",
      fmt::format("the window: the last K steps of each rank (default {})", options->window_steps),
      [options](const std::string& v) {
        options->window_steps = static_cast<std::size_t>(count("--window", v, 1));
      });
  line->add_value("--phase", "PHASE=KEY",
                  "a key that means a phase (repeatable): data_wait, h2d, forward,\n"
                  "backward, optimizer, comm, or step (e.g. --phase optimizer=opt_step)",
                  [options](const std::string& v) {
                    if (absl::Status s = options->keys.map(v); !s.ok()) {
                      bad_value("--phase: " + std::string(s.message()));
                    }
                  })
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  add_threshold_option(line, &options->thresholds,
                       "override a threshold of the labels (repeatable; docs/diagnosis.md\n"
                       "lists them, e.g. --threshold input_bound_share=0.3)");
}

void add_threshold_option(CommandLine* line, diagnosis::Thresholds* thresholds,
                          const std::string& help) {
  line->add_value("--threshold", "NAME=VALUE", help,
                  [thresholds](const std::string& v) {
                    if (absl::Status s = thresholds->set(v); !s.ok()) {
                      bad_value("--threshold: " + std::string(s.message()));
                    }
                  })
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

void add_ledger_options(CommandLine* line, steps::LedgerOptions* ledger) {
  line->add_value("--peak-flops", "FLOPS",
                  "the peak FLOP/s of one device for the ledger's MFU (default: the\n"
                  "GPU table, or the CPU's measured GEMM peak; docs/ledger.md)",
                  [ledger](const std::string& v) {
                    ledger->peak_flops = number("--peak-flops", v, {0, 1e30, true});
                  });
  line->add_value("--price-per-kwh", "PRICE", "the ledger's cost of the energy measured",
                  [ledger](const std::string& v) {
                    ledger->price_per_kwh = number("--price-per-kwh", v, {0});
                  });
  line->add_value("--price-per-hour", "PRICE", "the ledger's cost of the steps' time",
                  [ledger](const std::string& v) {
                    ledger->price_per_hour = number("--price-per-hour", v, {0});
                  });
  line->add_value("--grams-co2-per-kwh", "GRAMS", "the ledger's CO2 of the energy measured",
                  [ledger](const std::string& v) {
                    ledger->grams_co2_per_kwh = number("--grams-co2-per-kwh", v, {0});
                  });
}

}  // namespace trainscope::cli
