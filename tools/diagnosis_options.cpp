// The diagnosis's flags, shared by `trainscope diagnose` and `trainscope top`
// (tools/cli.hpp).
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

}  // namespace trainscope::cli
