// CPU cost of hardware sampling as a share of one core, against radT's way on
// windows of the same length. Not a Google Benchmark loop: a measurement with
// its own main, because what matters is CPU time over wall time.
//
//   trainscope 1 Hz / 10 Hz  the real host sources in a Sampler; CPU time of
//                            this whole process (sampler and pipeline threads;
//                            the main thread sleeps), so an upper bound
//   radT: top -b -d 1        utime+stime of a `top` child from /proc/<pid>/stat
//                            (radT also runs iostat and free: not counted, so
//                            the ratio flatters radT)
//   naive /proc at 10 Hz     the same files opened, read into a std::string
//                            through ifstream and closed each time, as a
//                            script or an unoptimised reader would
//
// Usage: sampler_bench [seconds per window, default 5]
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>

#include "fmt/format.h"
#include "trainscope/export_pipeline.hpp"
#include "trainscope/sampler.hpp"

namespace {

double process_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

// Percent of one core this process used while `body` ran.
template <typename Body>
double measure_self(Body body) {
  const double cpu0 = process_cpu_seconds();
  const auto wall0 = std::chrono::steady_clock::now();
  body();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return 100.0 * (process_cpu_seconds() - cpu0) / wall;
}

double sampler_pct(double hz, int seconds) {
  trainscope::ExportPipeline pipeline;  // no exporter: the queue is drained and dropped
  trainscope::SamplerOptions options;
  options.interval = absl::Seconds(1.0 / hz);
  trainscope::Sampler sampler(options, trainscope::host_sources(), &pipeline);
  return measure_self([&] {
    sampler.start();
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    sampler.stop();
    pipeline.flush();
  });
}

// utime+stime of `pid` in seconds; -1 if unreadable.
double child_cpu_seconds(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t paren = text.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream fields(text.substr(paren + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// Percent of one core `top -b -d 1` used over `seconds`; -1 without top.
double top_pct(int seconds) {
  if (std::system("command -v top >/dev/null 2>&1") != 0) return -1;
  std::fflush(stdout);  // or the child's freopen writes our buffered lines again
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::freopen("/dev/null", "w", stdout);
    ::execlp("top", "top", "-b", "-d", "1", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto wall0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  const double cpu = child_cpu_seconds(pid);  // before the kill: it is still ours to read
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  ::kill(pid, SIGTERM);
  ::waitpid(pid, nullptr, 0);
  return cpu < 0 ? -1 : 100.0 * cpu / wall;
}

double naive_proc_pct(int seconds) {
  const char* files[] = {"/proc/stat", "/proc/meminfo", "/proc/diskstats", "/proc/net/dev",
                         "/proc/self/stat", "/proc/self/io"};
  std::size_t bytes = 0;
  const double pct = measure_self([&] {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    auto next = std::chrono::steady_clock::now();
    while (next < end) {
      for (const char* f : files) {
        std::ifstream in(f);
        bytes += std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>())
                     .size();
      }
      next += std::chrono::milliseconds(100);
      std::this_thread::sleep_until(next);
    }
  });
  return bytes > 0 ? pct : -1;
}

}  // namespace

int main(int argc, char** argv) {
  const int seconds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  std::printf("sampler CPU cost, %d s windows, %% of one core\n", seconds);
  const double at1 = sampler_pct(1, seconds);
  const double at10 = sampler_pct(10, seconds);
  const double top = top_pct(seconds);
  const double naive = naive_proc_pct(seconds);
  const auto cell = [](double v) { return v < 0 ? std::string("n/a") : fmt::format("{:.3f}", v); };
  const auto ratio = [](double a, double b) {
    return a < 0 || b <= 0 ? std::string("n/a") : fmt::format("{:.3f}", a / b);
  };
  std::printf("%-28s %10s %12s\n", "method", "% core", "/ radT top");
  std::printf("%-28s %10s %12s\n", "trainscope sampler 1 Hz", cell(at1).c_str(), ratio(at1, top).c_str());
  std::printf("%-28s %10s %12s\n", "trainscope sampler 10 Hz", cell(at10).c_str(), ratio(at10, top).c_str());
  std::printf("%-28s %10s %12s\n", "radT: top -b -d 1 (1 Hz)", cell(top).c_str(), "1.000");
  std::printf("%-28s %10s %12s\n", "naive /proc reads 10 Hz", cell(naive).c_str(), ratio(naive, top).c_str());
  std::printf("targets: 10 Hz <= 0.5 %% of a core: %s; 10 Hz <= radT / 10: %s\n",
              at10 <= 0.5 ? "met" : "MISSED",
              top < 0 ? "n/a (no top)" : (at10 <= top / 10 ? "met" : "MISSED"));
  return 0;
}
