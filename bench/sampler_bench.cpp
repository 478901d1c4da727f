// CPU cost of hardware sampling as a share of one core, against radT's way,
// on windows of the same length (default 30 s; CI does not run this). Not a
// Google Benchmark loop: a measurement with its own main, because what
// matters is CPU time over wall time.
//
//   trainscope 1 Hz / 10 Hz   host_sources() (plus gpu_sources() where
//                             nvidia-smi is installed, as radT then runs it)
//                             in a Sampler; CPU time of this whole process
//                             (sampler and pipeline threads; the main thread
//                             sleeps), so an upper bound
//   radT listeners            bench/radt_baseline.py radt: radT's default
//                             listeners as radT runs them, one Python process
//                             each that starts the CLI (top -i -b -d 1,
//                             iostat 1 -m, free --mega --total -s 1;
//                             nvidia-smi -l 1 and dcgmi dmon where installed)
//                             and parses its lines; CLI CPU from
//                             getrusage(RUSAGE_CHILDREN) after it was
//                             terminated and reaped, parser CPU from the
//                             listener's own getrusage. MLflow logging is
//                             not run, so this flatters radT
//   Python /proc reader 1 Hz  bench/radt_baseline.py proc: the files the host
//                             sources read, read and split into lines in
//                             Python once a second
//   top + /proc reader        the issue's definition of radT's way: top's CPU
//                             plus the /proc-reading baseline
//   per source                each source's thread CPU per sample() call at
//                             10 Hz, outside the windows: where the time goes
//
// The optional idle processes stand for a busy node's process table (top's
// cost grows with it); they are kept out of the monitored process tree.
//
// getrusage and wait4 report CPU time at scheduler precision (utime+stime
// sum to the exact runtime), unlike /proc/<pid>/stat's 10 ms ticks.
//
// Usage: sampler_bench [seconds per window [idle processes]]
// (or TRAINSCOPE_BENCH_SECONDS, TRAINSCOPE_BENCH_IDLE_PROCS;
// TRAINSCOPE_RADT_BASELINE: the script, default next to this source;
// PYTHON: the interpreter, default python3)
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fmt/format.h"
#include "trainscope/export/export_pipeline.hpp"
#include "trainscope/hardware/gpu/gpu_sources.hpp"
#include "trainscope/hardware/host/host_sources.hpp"
#include "trainscope/hardware/sampler.hpp"

namespace {

double seconds_of(const timeval& tv) {
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6;
}

double process_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return seconds_of(usage.ru_utime) + seconds_of(usage.ru_stime);
}

bool on_path(const char* tool) {
  return std::system(fmt::format("command -v {} >/dev/null 2>&1", tool).c_str()) == 0;
}

std::vector<pid_t> task_ids() {
  std::vector<pid_t> tids;
  if (DIR* dir = ::opendir("/proc/self/task")) {
    while (const dirent* entry = ::readdir(dir)) {
      if (entry->d_name[0] != '.') tids.push_back(static_cast<pid_t>(std::atoi(entry->d_name)));
    }
    ::closedir(dir);
  }
  return tids;
}

// A thread's time on CPU from /proc/self/task/<tid>/schedstat (nanoseconds);
// -1 if unreadable.
double task_cpu_seconds(pid_t tid) {
  std::FILE* f = std::fopen(fmt::format("/proc/self/task/{}/schedstat", tid).c_str(), "r");
  if (f == nullptr) return -1;
  unsigned long long ns = 0;
  const bool ok = std::fscanf(f, "%llu", &ns) == 1;
  std::fclose(f);
  return ok ? static_cast<double>(ns) * 1e-9 : -1;
}

struct SamplerCost {
  double process_pct = -1;  // this whole process
  double thread_pct = -1;   // the sampler thread alone
};

// Percent of one core used while the sampler ran for `seconds`.
SamplerCost sampler_pct(double hz, int seconds, bool with_gpu) {
  trainscope::ExportPipeline pipeline;  // no exporter: the queue is drained and dropped
  trainscope::SamplerOptions options;
  options.interval = absl::Seconds(1.0 / hz);
  auto sources = trainscope::host_sources();
  if (with_gpu) {
    for (auto& source : trainscope::gpu_sources()) sources.push_back(std::move(source));
  }
  trainscope::Sampler sampler(options, std::move(sources), &pipeline);
  const std::vector<pid_t> before = task_ids();
  const double cpu0 = process_cpu_seconds();
  const auto wall0 = std::chrono::steady_clock::now();
  sampler.start();
  pid_t sampler_tid = 0;
  for (pid_t tid : task_ids()) {
    if (std::find(before.begin(), before.end(), tid) == before.end()) sampler_tid = tid;
  }
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  const double thread_cpu = sampler_tid != 0 ? task_cpu_seconds(sampler_tid) : -1;
  const double thread_wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  sampler.stop();
  pipeline.flush();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  SamplerCost cost;
  cost.process_pct = 100.0 * (process_cpu_seconds() - cpu0) / wall;
  if (thread_cpu >= 0) cost.thread_pct = 100.0 * thread_cpu / thread_wall;
  return cost;
}

// `count` idle processes (a training node runs hundreds: top reads every
// /proc/<pid> each refresh, so its cost grows with them). They are children
// of the bench's first process, which then measures from a child of its own,
// so they are not in the monitored process tree.
std::vector<pid_t> spawn_idle(int count) {
  std::vector<pid_t> pids;
  std::fflush(stdout);
  for (int i = 0; i < count; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::pause();
      ::_exit(0);
    }
    if (pid > 0) pids.push_back(pid);
  }
  return pids;
}

double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Each source's CPU per sample() on this thread, over `calls` calls 100 ms
// apart (as at 10 Hz: rates and the process tree's once-a-second rescan see
// real intervals): where the sampler's time goes.
void per_source_breakdown(int calls, bool with_gpu) {
  auto sources = trainscope::host_sources();
  if (with_gpu) {
    for (auto& source : trainscope::gpu_sources()) sources.push_back(std::move(source));
  }
  std::printf(
      "\nper source, %d calls at 10 Hz on one thread (CPU per call; %% of a core at 10 Hz):\n",
      calls);
  std::vector<double> cpu(sources.size(), 0.0);
  std::vector<bool> ok(sources.size(), true);
  std::vector<std::size_t> readings(sources.size(), 0);
  for (std::size_t i = 0; i < sources.size(); ++i) ok[i] = sources[i]->open({}).ok();
  std::vector<trainscope::HardwareReading> out;
  for (int c = 0; c < calls; ++c) {
    for (std::size_t i = 0; i < sources.size(); ++i) {
      if (!ok[i]) continue;
      out.clear();
      const double t0 = thread_cpu_seconds();
      ok[i] = sources[i]->sample(&out).ok();
      cpu[i] += thread_cpu_seconds() - t0;
      readings[i] = out.size();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (std::size_t i = 0; i < sources.size(); ++i) {
    std::printf("  %-14s %8.1f us  %7.4f %%  (%zu readings)%s\n", sources[i]->name().c_str(),
                1e6 * cpu[i] / calls, 100.0 * 10 * cpu[i] / calls, readings[i],
                ok[i] ? "" : "  disabled");
  }
}

struct Part {
  double tool_cpu_s = 0;
  double parse_cpu_s = 0;
  long lines = 0;
};

struct ScriptRun {
  std::map<std::string, Part> parts;
  std::string notes;       // lines that are not a part ("iostat missing")
  double tree_cpu_s = -1;  // wait4: the script and all it reaped, start-up included
  double wall_s = 0;
};

// Runs radt_baseline.py `mode` for `seconds` and collects its report.
ScriptRun run_baseline(const std::string& script, const char* mode, int seconds) {
  ScriptRun run;
  int out[2];
  if (::pipe(out) != 0) return run;
  std::fflush(stdout);
  const char* python = std::getenv("PYTHON") != nullptr ? std::getenv("PYTHON") : "python3";
  const std::string secs = std::to_string(seconds);
  const auto wall0 = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::close(out[0]);
    ::close(out[1]);
    ::execlp(python, python, script.c_str(), mode, "--seconds", secs.c_str(),
             static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = ::read(out[0], buffer, sizeof(buffer))) > 0;) {
    text.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(out[0]);
  int status = 0;
  rusage usage{};
  ::wait4(pid, &status, 0, &usage);
  run.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    run.notes = fmt::format("{} {} failed (status {}): {}", python, script, status, text);
    return run;
  }
  run.tree_cpu_s = seconds_of(usage.ru_utime) + seconds_of(usage.ru_stime);
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string name, k1, k2, k3;
    Part part;
    if (words >> name >> k1 >> part.tool_cpu_s >> k2 >> part.parse_cpu_s >> k3 >> part.lines &&
        k1 == "tool_cpu_s") {
      run.parts[name] = part;
    } else {
      run.notes += line + "\n";
    }
  }
  return run;
}

std::string baseline_script() {
  if (const char* path = std::getenv("TRAINSCOPE_RADT_BASELINE")) return path;
  std::string here = __FILE__;
  return here.substr(0, here.rfind('/') + 1) + "radt_baseline.py";
}

std::string cell(double v) { return v < 0 ? std::string("n/a") : fmt::format("{:.4f}", v); }
std::string ratio(double a, double b) {
  return a < 0 || b <= 0 ? std::string("n/a") : fmt::format("{:.3f}", a / b);
}

}  // namespace

int measure(int seconds, std::size_t idle);

int main(int argc, char** argv) {
  int seconds = 30;
  if (const char* env = std::getenv("TRAINSCOPE_BENCH_SECONDS")) seconds = std::atoi(env);
  if (argc > 1) seconds = std::atoi(argv[1]);
  seconds = std::max(1, seconds);
  int idle = 0;
  if (const char* env = std::getenv("TRAINSCOPE_BENCH_IDLE_PROCS")) idle = std::atoi(env);
  if (argc > 2) idle = std::atoi(argv[2]);
  const std::vector<pid_t> idle_pids = spawn_idle(std::max(0, idle));
  if (idle_pids.empty()) return measure(seconds, 0);
  const pid_t measurer = ::fork();
  if (measurer == 0) {
    const int rc = measure(seconds, idle_pids.size());
    std::fflush(stdout);
    ::_exit(rc);
  }
  int status = 0;
  ::waitpid(measurer, &status, 0);
  for (pid_t pid : idle_pids) ::kill(pid, SIGKILL);
  for (pid_t pid : idle_pids) ::waitpid(pid, nullptr, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int measure(int seconds, std::size_t idle) {
  const bool with_gpu = on_path("nvidia-smi");
  const std::string script = baseline_script();
  std::printf("sampler CPU cost, %d s windows, %% of one core%s; %zu extra idle processes\n",
              seconds,
              with_gpu ? " (with GPU sources)" : " (host sources; no nvidia-smi, so no GPU)", idle);

  const SamplerCost at1 = sampler_pct(1, seconds, with_gpu);
  const SamplerCost at10 = sampler_pct(10, seconds, with_gpu);
  per_source_breakdown(std::min(100, seconds * 10), with_gpu);
  const ScriptRun radt = run_baseline(script, "radt", seconds);
  const ScriptRun proc = run_baseline(script, "proc", seconds);

  const double window = seconds;
  double radt_cpu = radt.parts.empty() ? -1 : 0;
  for (const auto& [name, part] : radt.parts) radt_cpu += part.tool_cpu_s + part.parse_cpu_s;
  const double radt_pct = radt_cpu < 0 ? -1 : 100.0 * radt_cpu / window;
  const auto proc_it = proc.parts.find("proc-reader");
  const double proc_pct =
      proc_it == proc.parts.end() ? -1 : 100.0 * proc_it->second.parse_cpu_s / window;
  const auto top_it = radt.parts.find("top");
  const double top_pct =
      top_it == radt.parts.end() ? -1 : 100.0 * top_it->second.tool_cpu_s / window;
  const double issue_pct = top_pct < 0 || proc_pct < 0 ? -1 : top_pct + proc_pct;

  std::printf("\n%-44s %10s %12s %12s\n", "method (% of one core)", "process", "ts 10 Hz/it",
              "ts 1 Hz/it");
  std::printf("%-44s %10s   (sampler thread alone: %s)\n", "trainscope sampler 1 Hz",
              cell(at1.process_pct).c_str(), cell(at1.thread_pct).c_str());
  std::printf("%-44s %10s   (sampler thread alone: %s)\n", "trainscope sampler 10 Hz",
              cell(at10.process_pct).c_str(), cell(at10.thread_pct).c_str());
  const auto row = [&](const char* name, double pct) {
    std::printf("%-44s %10s %12s %12s\n", name, cell(pct).c_str(),
                ratio(at10.process_pct, pct).c_str(), ratio(at1.process_pct, pct).c_str());
  };
  row("radT listeners, 1 Hz (CLIs + Python parsers)", radt_pct);
  for (const auto& [name, part] : radt.parts) {
    std::printf("  %-20s CLI %8s  parser %8s  (%ld lines)\n", name.c_str(),
                cell(100.0 * part.tool_cpu_s / window).c_str(),
                cell(100.0 * part.parse_cpu_s / window).c_str(), part.lines);
  }
  row("Python /proc reader, 1 Hz", proc_pct);
  row("top + Python /proc reader (issue's radT)", issue_pct);
  std::printf(
      "\ncross-check, wait4 of each script's whole tree incl. interpreter start-up: "
      "radt %s s, proc %s s CPU (%s s, %s s wall)\n",
      cell(radt.tree_cpu_s).c_str(), cell(proc.tree_cpu_s).c_str(), cell(radt.wall_s).c_str(),
      cell(proc.wall_s).c_str());
  if (!radt.notes.empty()) std::printf("radt: %s\n", radt.notes.c_str());
  if (!proc.notes.empty()) std::printf("proc: %s\n", proc.notes.c_str());

  const double radt_ref = issue_pct < 0  ? radt_pct
                          : radt_pct < 0 ? issue_pct
                                         : std::min(radt_pct, issue_pct);
  std::printf(
      "targets: 10 Hz <= 0.5 %% of a core: %s; 10 Hz <= radT / 10 (the lower radT "
      "figure): %s\n",
      at10.process_pct <= 0.5 ? "met" : "MISSED",
      radt_ref < 0 ? "n/a (no baseline)" : (at10.process_pct <= radt_ref / 10 ? "met" : "MISSED"));
  return 0;
}
