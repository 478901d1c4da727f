// What following a live run costs `trainscope top` (docs/top.md, "Cost"):
// N writer threads (default 8), each one rank's run store appending ~R
// regions/s (default 100,000, in steps of P = 100 regions: IO, H2D, FORWARD,
// BACKWARD, OPTIMIZER, COMM, BATCH and 93 user regions of 32 keys, so 1,000
// steps/s per rank; --per-step 10 makes it 10,000) to one run directory, while
//   1. a diagnosis::Follower in this process polls and diagnoses at 1 Hz
//      (the CPU time of its thread), then, on a fresh run,
//   2. the real `trainscope top RUN` (--cli PATH, or TRAINSCOPE_CLI) draws in a
//      120x40 pseudo-terminal (the CPU time of its process, /proc schedstat),
//   3. the real `trainscope serve --prometheus PORT RUN` (the Prometheus
//      endpoint, which `trainscope run --prometheus` runs in the launcher) is
//      scraped once a second (the CPU time of its process).
// Each is reported as CPU seconds per wall second (% of one core; the goal is
// <= 2%) and as CPU-us per 1,000 rows appended, beside the baseline measured
// in the same run: the writers' own CPU-us per 1,000 rows.
//
//   top_cost_bench [--seconds S] [--writers N] [--rate R] [--per-step P] [--flush-ms F]
//                  [--cli PATH] [--dir DIR] [--read-all]
// --read-all: the in-process follower reads every row (no read budget: what
// `trainscope diagnose` does) instead of top's live_options().
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "run/run_store_exporter.hpp"
#include "trainscope/diagnosis/diagnosis.hpp"
#include "trainscope/timing/time_type.hpp"
#include "trainscope/top/top_view.hpp"

namespace trainscope {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Options {
  double seconds = 20;  // measured, per phase
  double warmup_s = 3;  // before measuring (the follower's first reads)
  int writers = 8;
  double rate = 100000;  // regions/s per writer
  int per_step = 100;    // regions per step: 1,000 steps/s per writer at the default rate
  int flush_ms = 250;
  std::string cli;
  std::string dir;
  bool read_all = false;  // the follower reads every row (no read budget)
};

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::int64_t unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "top_cost_bench: %s\n", message.c_str());
  std::exit(1);
}

// The regions of one step in the order they end (BATCH last): the phases
// back to back (`sequential`, each its share of the step's period), user keys
// ("layer.<j % 32>") nested at the start of BACKWARD, BATCH around the phases.
struct StepKey {
  KeyId key;
  double share;
  bool sequential;
};
std::vector<StepKey> step_keys(int per_step) {
  std::vector<StepKey> keys = {{Key(TimeType::IO).id(), 0.10, true},
                               {Key("H2D").id(), 0.04, true},
                               {Key(TimeType::FORWARD).id(), 0.25, true}};
  const int user = std::max(0, per_step - 7);
  for (int j = 0; j < user; ++j) {
    keys.push_back({Key("layer." + std::to_string(j % 32)).id(), 0.3 / user, false});
  }
  keys.insert(keys.end(), {{Key(TimeType::BACKWARD).id(), 0.35, true},
                           {Key("OPTIMIZER").id(), 0.05, true},
                           {Key(TimeType::COMM).id(), 0.03, true},
                           {Key(TimeType::BATCH).id(), 0, true}});
  return keys;
}

// One run directory with `writers` ranks appending until stop().
class Writers {
 public:
  Writers(const Options& options, const std::string& dir) : options_(options), dir_(dir) {
    fs::create_directories(dir_);
    const std::int64_t start_ms = unix_ns() / 1000000;
    RunInfo info;
    info.id = "7013c05700000000000000000000b3c0";
    info.name = "top-cost";
    info.experiment = "bench";
    info.start_time_ms = start_ms;
    std::ofstream(run::detail::join_path(dir_, run::detail::kRunFileName))
        << run::detail::format_run_file(info);
    for (int r = 0; r < options.writers; ++r) {
      run::detail::RunStoreExporter::Options store;
      store.dir = dir_;
      store.rank = RankInfo{static_cast<std::uint32_t>(r), static_cast<std::uint32_t>(r),
                            static_cast<std::uint32_t>(options.writers)};
      store.flush_interval = absl::Milliseconds(options.flush_ms);
      store.start_time_ms = start_ms;
      auto created = run::detail::RunStoreExporter::Create(store);
      if (!created.ok()) die(created.status().ToString());
      stores_.push_back(*std::move(created));
    }
    cpu_s_.assign(stores_.size(), 0);
    for (std::size_t r = 0; r < stores_.size(); ++r) {
      threads_.emplace_back([this, r] { write(r); });
    }
  }
  ~Writers() { stop(); }

  void stop() {
    stop_ = true;
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

  std::uint64_t rows() const { return rows_.load(); }
  double cpu_s() const {
    double total = 0;
    for (double s : cpu_s_) total += s;
    return total;
  }
  std::uint64_t dropped() const {
    std::uint64_t total = 0;
    for (const auto& store : stores_) total += store->dropped_records();
    return total;
  }

 private:
  void write(std::size_t r) {
    const double cpu0 = thread_cpu_s();
    const std::vector<StepKey> keys = step_keys(options_.per_step);
    const double period_ns = 1e9 * static_cast<double>(keys.size()) / options_.rate;
    std::mt19937_64 rng(r + 1);
    std::normal_distribution<double> jitter(1.0, 0.1);
    const Clock::time_point start = Clock::now();
    Clock::time_point last_flush = start;
    std::uint64_t written = 0;
    std::int64_t t_ns = unix_ns();
    std::vector<RegionSample> batch;
    while (!stop_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      const auto due = static_cast<std::uint64_t>(elapsed * options_.rate);
      batch.clear();
      while (written + keys.size() <= due) {
        const std::int64_t step_start = t_ns;
        std::int64_t at = step_start;
        for (const StepKey& k : keys) {
          RegionSample s;
          s.key = k.key;
          s.thread = 0;
          if (k.share > 0) {
            s.start_unix_ns = at;
            s.duration_ns =
                static_cast<std::int64_t>(k.share * period_ns * std::max(0.2, jitter(rng)));
            if (k.sequential) at += s.duration_ns;
          } else {  // BATCH
            s.start_unix_ns = step_start;
            s.duration_ns = at - step_start;
          }
          batch.push_back(s);
        }
        t_ns += static_cast<std::int64_t>(period_ns);
        written += keys.size();
      }
      if (!batch.empty()) (void)stores_[r]->write_samples(batch);
      if (Clock::now() - last_flush >= std::chrono::milliseconds(options_.flush_ms)) {
        (void)stores_[r]->flush();
        last_flush = Clock::now();
      }
      rows_ += batch.size();
    }
    (void)stores_[r]->flush();
    cpu_s_[r] = thread_cpu_s() - cpu0;
  }

  const Options& options_;
  std::string dir_;
  std::vector<std::shared_ptr<run::detail::RunStoreExporter>> stores_;
  std::vector<std::thread> threads_;
  std::vector<double> cpu_s_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> rows_{0};
};

struct Figure {
  double cpu_s = 0;
  double poll_cpu_s = 0;  // of cpu_s: in Follower::poll (the in-process phase)
  double wall_s = 0;
  std::uint64_t rows = 0;  // appended while measured
  std::string note;
};

void print_figure(const char* name, const Figure& f, double writer_us_per_1k) {
  const double core_pct = 100 * f.cpu_s / f.wall_s;
  const double us_per_1k = f.rows > 0 ? 1e6 * f.cpu_s / (static_cast<double>(f.rows) / 1e3) : 0;
  if (f.rows == 0) {  // nothing appended: the fixed cost
    std::printf("%-28s %7.2f%% of one core  (nothing appended)  %s\n", name, core_pct,
                f.note.c_str());
    return;
  }
  std::printf("%-28s %7.2f%% of one core  %8.3f CPU-us per 1,000 rows  (x%.4f the writers')%s%s\n",
              name, core_pct, us_per_1k, writer_us_per_1k > 0 ? us_per_1k / writer_us_per_1k : 0,
              core_pct <= 2.0 ? "  goal <= 2%: met" : "  goal <= 2%: MISSED",
              f.note.empty() ? "" : ("  " + f.note).c_str());
}

// Phase 1: the follower in this process, its thread's CPU time.
Figure follow_in_process(const Options& options, const std::string& dir, Writers* writers) {
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  diagnosis::FollowOptions follow = top::live_options();  // as trainscope top
  if (options.read_all) follow.read_budget_bytes_per_s = 0;
  auto opened = diagnosis::Follower::Open(dir, follow);
  if (!opened.ok()) die(opened.status().ToString());
  diagnosis::Follower follower = *std::move(opened);
  const Clock::time_point start = Clock::now();
  const Clock::time_point measure_from =
      start +
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.warmup_s));
  const Clock::time_point end = measure_from + std::chrono::duration_cast<Clock::duration>(
                                                   std::chrono::duration<double>(options.seconds));
  Figure figure;
  std::uint64_t rows_at_start = 0;
  bool measuring = false;
  Clock::time_point tick = start;
  std::size_t labels = 0;
  double read_share = 1;
  while (Clock::now() < end) {
    if (!measuring && Clock::now() >= measure_from) {
      measuring = true;
      rows_at_start = writers->rows();
    }
    const double cpu0 = thread_cpu_s();
    if (absl::Status s = follower.poll(); !s.ok()) die(s.ToString());
    const double cpu1 = thread_cpu_s();
    const diagnosis::Diagnosis d = follower.diagnose();
    labels = d.window.labels.size();
    read_share = d.read_share;
    if (measuring) {
      figure.cpu_s += thread_cpu_s() - cpu0;
      figure.poll_cpu_s += cpu1 - cpu0;
    }
    tick += std::chrono::seconds(1);
    std::this_thread::sleep_until(tick);
  }
  figure.wall_s = options.seconds;
  figure.rows = writers->rows() - rows_at_start;
  figure.note =
      "(poll " + std::to_string(static_cast<int>(100 * figure.poll_cpu_s / figure.cpu_s)) +
      "% of it, diagnose the rest; " + std::to_string(labels) + " window labels; read " +
      std::to_string(follower.rows_read()) + " rows, " +
      std::to_string(static_cast<int>(std::lround(100 * read_share))) + "% of those appended)";
  return figure;
}

// The run time of every thread of `pid` in seconds (/proc/<pid>/task/*/schedstat).
double process_cpu_s(pid_t pid) {
  double total = 0;
  std::error_code ec;
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream in(task.path() / "schedstat");
    unsigned long long ns = 0;
    if (in >> ns) total += static_cast<double>(ns) * 1e-9;
  }
  return total;
}

// Phase 2: `trainscope top DIR` in a pseudo-terminal, its process's CPU time.
Figure follow_with_cli(const Options& options, const std::string& dir, Writers* writers) {
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  winsize size{};
  size.ws_row = 40;
  size.ws_col = 120;
  int master = -1;
  const pid_t pid = forkpty(&master, nullptr, nullptr, &size);
  if (pid < 0) die(std::string("forkpty: ") + std::strerror(errno));
  if (pid == 0) {
    setenv("TERM", "xterm-256color", 1);
    setenv("LC_ALL", "C.UTF-8", 1);
    execl(options.cli.c_str(), "trainscope", "top", dir.c_str(), "--interval", "1",
          static_cast<char*>(nullptr));
    std::perror("exec");
    _exit(127);
  }
  // Drain the terminal, as a terminal would.
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> drawn{0};
  std::thread drain([&] {
    char buffer[65536];
    while (!done) {
      pollfd p{master, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const ssize_t n = ::read(master, buffer, sizeof buffer);
      if (n <= 0) break;
      drawn += static_cast<std::uint64_t>(n);
    }
  });
  std::this_thread::sleep_for(std::chrono::duration<double>(options.warmup_s));
  const double cpu0 = process_cpu_s(pid);
  const std::uint64_t rows0 = writers->rows();
  const Clock::time_point t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(options.seconds));
  Figure figure;
  figure.cpu_s = process_cpu_s(pid) - cpu0;
  figure.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  figure.rows = writers->rows() - rows0;
  // The writers stop first: a `top` that fell behind finishes its poll sooner.
  writers->stop();
  const Clock::time_point asked = Clock::now();
  (void)!::write(master, "q", 1);
  int status = 0;
  pid_t waited = 0;
  while ((waited = waitpid(pid, &status, WNOHANG)) == 0 &&
         Clock::now() - asked < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double quit_s = std::chrono::duration<double>(Clock::now() - asked).count();
  if (waited == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    figure.note = "(did not quit on q within 60 s: killed)";
  } else {
    char note[160];
    std::snprintf(note, sizeof note, "(exit %d %.1f s after q; drew %llu KiB)",
                  WIFEXITED(status) ? WEXITSTATUS(status) : -1, quit_s,
                  static_cast<unsigned long long>(drawn.load() / 1024));
    figure.note = note;
  }
  done = true;
  drain.join();
  ::close(master);
  return figure;
}

// One GET /metrics on 127.0.0.1:port: the bytes of the response (0: none).
std::size_t scrape_once(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::size_t got = 0;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const char request[] = "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    (void)!::send(fd, request, sizeof request - 1, MSG_NOSIGNAL);
    char buffer[65536];
    ssize_t n = 0;
    while ((n = ::recv(fd, buffer, sizeof buffer, 0)) > 0) got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return got;
}

// Phase 3: `trainscope serve --prometheus PORT DIR` (the Prometheus endpoint,
// docs/prometheus.md), scraped once a second as Prometheus would; its process's CPU time.
Figure follow_with_serve(const Options& options, const std::string& dir, Writers* writers) {
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  int port = 0;
  {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
    ::close(fd);
  }
  const std::string listen = std::to_string(port);
  const pid_t pid = fork();
  if (pid < 0) die(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    execl(options.cli.c_str(), "trainscope", "serve", "--prometheus", listen.c_str(), dir.c_str(),
          static_cast<char*>(nullptr));
    std::perror("exec");
    _exit(127);
  }
  Figure figure;
  std::size_t bytes = 0, scrapes = 0;
  const auto scrape_for = [&](double seconds) {
    const Clock::time_point end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                     std::chrono::duration<double>(seconds));
    Clock::time_point tick = Clock::now();
    while (Clock::now() < end) {
      bytes = scrape_once(port);
      ++scrapes;
      tick += std::chrono::seconds(1);
      std::this_thread::sleep_until(tick);
    }
  };
  scrape_for(options.warmup_s);
  const double cpu0 = process_cpu_s(pid);
  const std::uint64_t rows0 = writers->rows();
  const Clock::time_point t0 = Clock::now();
  scrapes = 0;
  scrape_for(options.seconds);
  figure.cpu_s = process_cpu_s(pid) - cpu0;
  figure.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  figure.rows = writers->rows() - rows0;
  writers->stop();
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  char note[160];
  std::snprintf(note, sizeof note, "(%zu scrapes, the last %zu bytes; exit %d)", scrapes, bytes,
                WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  figure.note = note;
  return figure;
}

Options parse(int argc, char** argv) {
  Options o;
  if (const char* cli = std::getenv("TRAINSCOPE_CLI")) o.cli = cli;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--read-all") {
      o.read_all = true;
      continue;
    }
    if (i + 1 >= argc) die("usage: see the top of bench/top_cost_bench.cpp (" + flag + ")");
    const std::string value = argv[++i];
    if (flag == "--seconds") {
      o.seconds = std::stod(value);
    } else if (flag == "--writers") {
      o.writers = std::stoi(value);
    } else if (flag == "--rate") {
      o.rate = std::stod(value);
    } else if (flag == "--per-step") {
      o.per_step = std::max(7, std::stoi(value));
    } else if (flag == "--flush-ms") {
      o.flush_ms = std::stoi(value);
    } else if (flag == "--cli") {
      o.cli = value;
    } else if (flag == "--dir") {
      o.dir = value;
    } else {
      die("unknown option " + flag);
    }
  }
  if (o.dir.empty()) {
    o.dir = (fs::temp_directory_path() / ("top_cost_bench-" + std::to_string(getpid()))).string();
  }
  return o;
}

}  // namespace
}  // namespace trainscope

int main(int argc, char** argv) {
  using namespace trainscope;
  const Options options = parse(argc, argv);
  std::printf(
      "top_cost_bench: %d writers x %.0f regions/s in steps of %d regions (%.0f steps/s "
      "each), %.0f s measured per phase (after %.0f s), flush every %d ms, %u CPUs\n",
      options.writers, options.rate, options.per_step, options.rate / options.per_step,
      options.seconds, options.warmup_s, options.flush_ms, std::thread::hardware_concurrency());
  std::vector<std::pair<const char*, Figure>> figures;
  double writer_cpu = 0;
  double writer_rows = 0, writer_wall = 0;
  const auto phase = [&](const char* name, auto measure) {
    const std::string dir = options.dir + "/" + name;
    const Clock::time_point t0 = Clock::now();
    Writers writers(options, dir);
    Figure figure = measure(dir, &writers);
    writers.stop();
    if (std::string(name) != "cli-idle") {
      writer_cpu += writers.cpu_s();
      writer_rows += static_cast<double>(writers.rows());
      writer_wall += std::chrono::duration<double>(Clock::now() - t0).count();
    }
    if (writers.dropped() > 0) {
      figure.note += " (" + std::to_string(writers.dropped()) + " rows dropped by the writers)";
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
    figures.emplace_back(name, figure);
  };
  phase("follower",
        [&](const std::string& dir, Writers* w) { return follow_in_process(options, dir, w); });
  if (!options.cli.empty()) {
    phase("cli",
          [&](const std::string& dir, Writers* w) { return follow_with_cli(options, dir, w); });
    phase("serve",
          [&](const std::string& dir, Writers* w) { return follow_with_serve(options, dir, w); });
    // The UI's own work: `top` on a run that appends nothing (3 s written, then idle).
    phase("cli-idle", [&](const std::string& dir, Writers* w) {
      std::this_thread::sleep_for(std::chrono::seconds(3));
      w->stop();
      return follow_with_cli(options, dir, w);
    });
  }
  std::error_code ec;
  fs::remove_all(options.dir, ec);

  const double writer_us_per_1k = writer_rows > 0 ? 1e6 * writer_cpu / (writer_rows / 1e3) : 0;
  std::printf("data rate: %.0f rows/s appended (all writers; %.0f%% of the asked %.0f)\n",
              writer_rows / writer_wall,
              100 * writer_rows / writer_wall / (options.rate * options.writers),
              options.rate * options.writers);
  std::printf("%-28s %7.2f%% of one core  %8.3f CPU-us per 1,000 rows  (the baseline)\n",
              "writers (run store)", 100 * writer_cpu / writer_wall, writer_us_per_1k);
  for (const auto& [name, figure] : figures) {
    const std::string phase_name = name;
    print_figure(phase_name == "cli"        ? "trainscope top (pty, 1 Hz)"
                 : phase_name == "serve"    ? "serve --prometheus, 1 Hz"
                 : phase_name == "cli-idle" ? "trainscope top, idle run"
                                            : "Follower poll+diagnose 1 Hz",
                 figure, writer_us_per_1k);
  }
  if (options.cli.empty()) {
    std::printf("(set TRAINSCOPE_CLI or --cli to measure the `trainscope top` process too)\n");
  }
  return 0;
}
