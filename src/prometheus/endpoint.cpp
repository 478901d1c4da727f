#include "trainscope/prometheus/endpoint.hpp"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/files.hpp"
#include "fmt/format.h"
#include "trainscope/diagnosis/diagnosis.hpp"
#include "trainscope/run/run_dirs.hpp"
#include "trainscope/run/run_reader.hpp"

#if TRAINSCOPE_HAVE_HTTPLIB
#include <httplib.h>
#endif

namespace trainscope::prometheus {
namespace {

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Roots are looked for new runs at most this often (a scrape a second of a
// root with many ended runs lists it, never opens them again).
constexpr std::int64_t kRootScanMs = 2000;
// A run's named params are read again until all are found, this often.
constexpr std::int64_t kParamsReadMs = 5000;

struct Followed {
  std::string dir;
  bool from_root = false;
  std::optional<diagnosis::Follower> follower;
  std::optional<diagnosis::Diagnosis> last;  // the last diagnosis (kept across a failed poll)
  std::string error;
  std::vector<std::pair<std::string, std::string>> params;
  bool params_complete = false;
  std::int64_t params_read_ms = -kParamsReadMs;
  std::int64_t ended_ms = 0;  // steady ms the run was first seen ended; 0 while live
};

#if TRAINSCOPE_HAVE_HTTPLIB
// httplib's worker queue, bounded: `workers` threads, at most `max_waiting`
// accepted connections waiting for one; past that enqueue() waits, so the
// accept loop stops and the kernel's backlog (then refusal) holds the rest.
class BoundedQueue : public httplib::TaskQueue {
 public:
  BoundedQueue(std::size_t workers, std::size_t max_waiting) : max_waiting_(max_waiting) {
    for (std::size_t i = 0; i < std::max<std::size_t>(1, workers); ++i) {
      threads_.emplace_back([this] { work(); });
    }
  }
  ~BoundedQueue() override = default;

  void enqueue(std::function<void()> fn) override {
    std::unique_lock<std::mutex> lock(mutex_);
    space_.wait(lock, [&] { return jobs_.size() < max_waiting_ || shutdown_; });
    jobs_.push_back(std::move(fn));
    ready_.notify_one();
  }
  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      shutdown_ = true;
    }
    ready_.notify_all();
    space_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [&] { return !jobs_.empty() || shutdown_; });
        if (jobs_.empty()) return;  // shut down, nothing left
        fn = std::move(jobs_.front());
        jobs_.pop_front();
        space_.notify_one();
      }
      fn();
    }
  }

  const std::size_t max_waiting_;
  std::mutex mutex_;
  std::condition_variable ready_, space_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  bool shutdown_ = false;
};

void split_seconds(double seconds, time_t* sec, time_t* usec) {
  seconds = std::max(0.001, seconds);
  *sec = static_cast<time_t>(seconds);
  *usec = static_cast<time_t>((seconds - static_cast<double>(*sec)) * 1e6);
}
#endif

}  // namespace

struct Endpoint::Impl {
  EndpointOptions options;
  int port = 0;
  std::mutex mutex;  // the followers; one scrape at a time
  std::vector<Followed> runs;
  std::vector<std::string> roots;
  std::set<std::string> ended_unseen;  // run dirs under a root found ended: never followed
  std::int64_t roots_scanned_ms = -kRootScanMs;
#if TRAINSCOPE_HAVE_HTTPLIB
  std::unique_ptr<httplib::Server> server;
#endif
  std::thread thread;
  std::string this_host;  // options.this_host_only: detail::this_host()

  void scan_roots(std::int64_t now, std::vector<std::string>* notes) {
    if (roots.empty() || now - roots_scanned_ms < kRootScanMs) return;
    roots_scanned_ms = now;
    for (const std::string& root : roots) {
      absl::StatusOr<std::vector<std::string>> dirs = find_run_dirs({root});
      if (!dirs.ok()) {
        // A root with no run yet is no error: runs come later.
        if (!absl::IsNotFound(dirs.status()))
          notes->push_back(std::string(dirs.status().message()));
        continue;
      }
      for (const std::string& dir : *dirs) {
        if (ended_unseen.count(dir) != 0) continue;
        if (std::any_of(runs.begin(), runs.end(),
                        [&](const Followed& f) { return f.dir == dir; })) {
          continue;
        }
        absl::StatusOr<RunReader> reader = RunReader::Open(dir);
        if (!reader.ok()) continue;  // a run being created: looked at again next time
        if (!reader->in_progress()) {
          ended_unseen.insert(dir);
          continue;
        }
        Followed f;
        f.dir = dir;
        f.from_root = true;
        runs.push_back(std::move(f));
      }
    }
  }

  void read_params(Followed* f, std::int64_t now) {
    if (options.labels.empty() || f->params_complete || now - f->params_read_ms < kParamsReadMs) {
      return;
    }
    f->params_read_ms = now;
    absl::StatusOr<RunReader> reader = RunReader::Open(f->dir);
    if (!reader.ok()) return;
    const std::map<std::string, std::string>& params = reader->info().params;
    f->params.clear();
    f->params_complete = true;
    for (const ParamLabel& label : options.labels) {
      const auto it = params.find(label.param);
      f->params_complete = f->params_complete && it != params.end();
      f->params.emplace_back(label.label, it == params.end() ? std::string() : it->second);
    }
  }

  std::string scrape() {
    std::lock_guard<std::mutex> lock(mutex);
    const std::int64_t now = now_ms();
    std::vector<std::string> notes;
    scan_roots(now, &notes);
    std::vector<RunMetrics> metrics;
    for (auto it = runs.begin(); it != runs.end();) {
      Followed& f = *it;
      if (!f.follower) {
        absl::StatusOr<diagnosis::Follower> opened =
            diagnosis::Follower::Open(f.dir, diagnosis::live_options());
        if (!opened.ok()) {
          notes.push_back(std::string(opened.status().message()));
          ++it;
          continue;
        }
        f.follower.emplace(*std::move(opened));
      }
      if (absl::Status polled = f.follower->poll(); !polled.ok()) {
        notes.push_back(std::string(polled.message()));  // what was read before stays
      }
      f.last = f.follower->diagnose();
      if (f.follower->in_progress()) {
        f.ended_ms = 0;
      } else if (f.ended_ms == 0) {
        f.ended_ms = now;
      }
      if (f.from_root && f.ended_ms != 0 &&
          static_cast<double>(now - f.ended_ms) > options.grace_s * 1000.0) {
        ended_unseen.insert(f.dir);
        it = runs.erase(it);
        continue;
      }
      read_params(&f, now);
      RunMetrics m;
      m.diagnosis = *f.last;
      m.params = f.params;
      if (f.params.empty()) {
        for (const ParamLabel& label : options.labels) m.params.emplace_back(label.label, "");
      }
      m.only_host = this_host;
      metrics.push_back(std::move(m));
      ++it;
    }
    std::string text = exposition(metrics);
    // Comments: what could not be read this time (the text format allows them).
    for (std::string note : notes) {
      std::replace(note.begin(), note.end(), '\n', ' ');
      text += "# trainscope: " + note + "\n";
    }
    return text;
  }
};

Endpoint::Endpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Endpoint::~Endpoint() { stop(); }

absl::Status parse_listen_address(std::string_view text, EndpointOptions* options) {
  std::string_view port_text = text;
  std::string address = options->address;
  if (!text.empty() && text.front() == '[') {  // [IPv6]:PORT
    const std::size_t close = text.find("]:");
    if (close == std::string_view::npos) {
      return absl::InvalidArgumentError(
          fmt::format("'{}' is no [ADDR:]PORT ([IPv6]:PORT for an IPv6 address)", text));
    }
    address = std::string(text.substr(1, close - 1));
    port_text = text.substr(close + 2);
  } else if (const std::size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    address = std::string(text.substr(0, colon));
    port_text = text.substr(colon + 1);
    if (address.find(':') != std::string::npos) {
      return absl::InvalidArgumentError(
          fmt::format("'{}': write an IPv6 address in brackets, [ADDR]:PORT", text));
    }
  }
  int port = 0;
  const auto [end, error] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (error != std::errc() || end != port_text.data() + port_text.size() || port < 1 ||
      port > 65535) {
    return absl::InvalidArgumentError(fmt::format(
        "'{}' is no [ADDR:]PORT: the port '{}' is no number from 1 to 65535", text, port_text));
  }
  if (address.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("'{}' is no [ADDR:]PORT: the address is empty", text));
  }
  options->address = std::move(address);
  options->port = port;
  return absl::OkStatus();
}

bool is_loopback(std::string_view address) {
  return address == "localhost" || address == "::1" || address.rfind("127.", 0) == 0;
}

absl::StatusOr<std::unique_ptr<Endpoint>> Endpoint::Start(EndpointOptions options) {
#if !TRAINSCOPE_HAVE_HTTPLIB
  (void)options;
  return absl::FailedPreconditionError(
      "this trainscope was built without cpp-httplib (Debian: libcpp-httplib-dev), so it has no "
      "Prometheus endpoint");
#else
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  const EndpointOptions& o = impl->options;
  if (o.this_host_only) impl->this_host = detail::this_host();
  // httplib ignores SIGPIPE process-wide when a server is made; the command
  // the launcher starts would inherit that. The server's threads block it
  // instead (a send to a closed client then fails with EPIPE).
  struct sigaction pipe_action = {};
  ::sigaction(SIGPIPE, nullptr, &pipe_action);
  impl->server = std::make_unique<httplib::Server>();
  httplib::Server& server = *impl->server;
  const std::size_t workers = o.workers, max_waiting = o.max_waiting;
  server.new_task_queue = [workers, max_waiting] { return new BoundedQueue(workers, max_waiting); };
  time_t sec = 0, usec = 0;
  split_seconds(o.timeout_s, &sec, &usec);
  server.set_read_timeout(sec, usec);
  server.set_write_timeout(sec, usec);
  server.set_keep_alive_timeout(
      std::max<time_t>(1, static_cast<time_t>(std::lround(o.keep_alive_s))));
  server.set_payload_max_length(64 * 1024);
  // SO_REUSEADDR only (httplib's default adds SO_REUSEPORT, which would let a
  // second endpoint bind the same port and take half the scrapes); not
  // inherited by the command the launcher starts.
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    ::fcntl(sock, F_SETFD, FD_CLOEXEC);
  });
  Impl* self = impl.get();
  server.Get("/metrics", [self](const httplib::Request&, httplib::Response& res) {
    res.set_content(self->scrape(), kContentType);
  });
  // Anything but GET (or HEAD) /metrics: 404, whatever the method.
  server.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    if ((req.method == "GET" || req.method == "HEAD") && req.path == "/metrics") {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    res.status = 404;
    res.set_content("404 not found: this trainscope endpoint serves GET /metrics\n", "text/plain");
    return httplib::Server::HandlerResponse::Handled;
  });
  server.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.status == 404) {
      res.set_content("404 not found: this trainscope endpoint serves GET /metrics\n",
                      "text/plain");
    }
  });
  errno = 0;
  int port = o.port;
  bool bound = false;
  if (port == 0) {
    port = server.bind_to_any_port(o.address);
    bound = port > 0;
  } else {
    bound = server.bind_to_port(o.address, port);
  }
  const int bind_errno = errno;
  if (!bound) {
    ::sigaction(SIGPIPE, &pipe_action, nullptr);
    const std::string where = fmt::format("{}:{}", o.address, o.port);
    if (bind_errno == EADDRINUSE) {
      return absl::AlreadyExistsError(fmt::format(
          "cannot serve Prometheus metrics on {}: the port is in use (choose another with "
          "--prometheus [ADDR:]PORT)",
          where));
    }
    return absl::UnavailableError(
        fmt::format("cannot serve Prometheus metrics on {}: {}", where,
                    bind_errno != 0 ? ::strerror(bind_errno) : "no such address on this machine"));
  }
  impl->port = port;
  impl->thread = std::thread([&server] {
    sigset_t pipe_signal;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);  // its workers inherit it
    server.listen_after_bind();
  });
  // stop() before the loop runs would miss it: wait until it does.
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ::sigaction(SIGPIPE, &pipe_action, nullptr);
  return std::unique_ptr<Endpoint>(new Endpoint(std::move(impl)));
#endif
}

void Endpoint::follow(const std::string& run_dir) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  for (const Followed& f : impl_->runs) {
    if (f.dir == run_dir) return;
  }
  Followed f;
  f.dir = run_dir;
  impl_->runs.push_back(std::move(f));
}

void Endpoint::follow_root(const std::string& root) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->roots.push_back(root);
  impl_->roots_scanned_ms = -kRootScanMs;
}

std::string Endpoint::scrape() { return impl_->scrape(); }

void Endpoint::stop() {
  if (!impl_) return;
#if TRAINSCOPE_HAVE_HTTPLIB
  if (impl_->server) impl_->server->stop();
#endif
  if (impl_->thread.joinable()) impl_->thread.join();
}

int Endpoint::port() const { return impl_->port; }
const std::string& Endpoint::address() const { return impl_->options.address; }

absl::StatusOr<std::shared_ptr<Endpoint>> serve_launch(EndpointOptions options,
                                                       LaunchOptions* launch,
                                                       std::string* start_line) {
  absl::StatusOr<std::unique_ptr<Endpoint>> started = Endpoint::Start(std::move(options));
  if (!started.ok()) return started.status();
  std::shared_ptr<Endpoint> endpoint = *std::move(started);
  *start_line = fmt::format("Prometheus metrics at {}{}", metrics_url(*endpoint),
                            is_loopback(endpoint->address())
                                ? ""
                                : " (not a loopback address: other machines can read them)");
  launch->run_started = [endpoint](const std::string& run_dir) { endpoint->follow(run_dir); };
  return endpoint;
}

std::string metrics_url(const Endpoint& endpoint) {
  const std::string& address = endpoint.address();
  return address.find(':') != std::string::npos
             ? fmt::format("http://[{}]:{}/metrics", address, endpoint.port())
             : fmt::format("http://{}:{}/metrics", address, endpoint.port());
}

absl::Status serve_root(EndpointOptions options, const std::string& root,
                        const std::function<void(const Endpoint&)>& on_ready) {
  std::string runs_root = root;
  if (runs_root.empty()) {
    const char* variable = std::getenv("TRAINSCOPE_RUNS_ROOT");
    runs_root = variable != nullptr && *variable != '\0' ? variable : "trainscope-runs";
  }
  // Blocked before the server's threads start, so that they inherit it and
  // only sigwait below takes them.
  sigset_t stop_signals, old;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, &old);
  absl::StatusOr<std::unique_ptr<Endpoint>> endpoint = Endpoint::Start(std::move(options));
  if (!endpoint.ok()) {
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return endpoint.status();
  }
  (*endpoint)->follow_root(runs_root);
  if (on_ready) on_ready(**endpoint);
  int signal = 0;
  while (::sigwait(&stop_signals, &signal) != 0) {
  }
  (*endpoint)->stop();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return absl::OkStatus();
}

}  // namespace trainscope::prometheus
