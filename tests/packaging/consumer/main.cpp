// Uses trainscope as an outside project would: times a few regions, prints
// the statistics and exits non-zero if anything is off. Built by
// run_packaging_tests.sh against an installed package and via add_subdirectory.
#include <cstdlib>
#include <iostream>
#include <string>

#include "trainscope/trainscope.hpp"

namespace {

// Busy work the optimizer cannot drop, so regions take measurable time.
double Spin(int n) {
  volatile double acc = 0.0;
  for (int i = 0; i < n; ++i) acc = acc + 1.0 / (i + 1.0);
  return acc;
}

}  // namespace

int main() {
  std::cout << "trainscope " << TRAINSCOPE_VERSION_STRING
            << " (CUDA in library: " << (trainscope::built_with_cuda() ? "yes" : "no") << ")\n";

  // Both timers: CPUGPUTimer pulls in the CUDA side of the library when it
  // was built with CUDA (and degrades to CPU timing without a GPU).
  trainscope::CPUGPUTimer timer;
  const trainscope::Key kStep("consumer_step");
  for (int i = 0; i < 5; ++i) {
    auto batch = timer.scope(trainscope::TimeType::BATCH, /*gpu=*/true);
    auto step = timer.scope(kStep);
    Spin(20000 + 5000 * i);
  }
  timer.print_all_time_stats(std::cout, trainscope::StatsFormat::kTable);

  trainscope::Timer cpu_timer;
  cpu_timer.start(trainscope::TimeType::EPOCH);
  Spin(10000);
  cpu_timer.end(trainscope::TimeType::EPOCH);
  cpu_timer.print_all_time_stats(std::cout);

  const trainscope::TimeStats stats = timer.get_time_stats(kStep);
  if (stats.count != 5 || !(stats.min > 0.0) ||
      cpu_timer.get_time_stats(trainscope::TimeType::EPOCH).count != 1) {
    std::cerr << "consumer: unexpected statistics\n";
    return EXIT_FAILURE;
  }
  std::cout << "consumer OK\n";
  return EXIT_SUCCESS;
}
