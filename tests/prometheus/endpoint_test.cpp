// The endpoint over real sockets (a raw HTTP client here): GET /metrics of a
// followed run, 404 for anything else, a port in use refused by name before
// anything is served, idle clients that neither stop the scrape nor the
// caller, and `serve`'s root: live runs appear, ended ones leave after the
// grace period.
#include "trainscope/prometheus/endpoint.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/run_files.hpp"
#include "support/temp_dir.hpp"

namespace trainscope::prometheus {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using trainscope::testing::RankJson;
using trainscope::testing::RunJson;
using trainscope::testing::TempDir;
using trainscope::testing::write_file;
using trainscope::testing::write_run_dir;

constexpr std::int64_t kT0 = 1'700'000'000'000'000'000;  // ns
constexpr std::int64_t kMs = 1'000'000;

int connect_to(int port, bool blocking = true) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (!blocking) ::fcntl(fd, F_SETFL, O_NONBLOCK);
  timeval tv{10, 0};  // a test that goes wrong fails, never hangs
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  return fd;
}

// The whole response ("" when the connection gave nothing).
std::string request(int port, const std::string& method, const std::string& path) {
  const int fd = connect_to(port);
  const std::string text =
      method + " " + path +
      " HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
  (void)!::send(fd, text.data(), text.size(), MSG_NOSIGNAL);
  std::string out;
  char buffer[65536];
  ssize_t n = 0;
  while ((n = ::recv(fd, buffer, sizeof buffer, 0)) > 0)
    out.append(buffer, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

std::string row(const std::string& key, std::int64_t start, std::int64_t ns, std::uint32_t rank) {
  return key + ",CPU," + std::to_string(rank) + ",0," + std::to_string(start) + "," +
         std::to_string(ns) + ",0,0\n";
}

// A finished run: two ranks of 10 ms (IO 4 ms) and 20 ms steps.
std::filesystem::path finished_run(const TempDir& tmp, const std::string& name) {
  RankJson r0, r1;
  r1.rank = 1;
  for (RankJson* r : {&r0, &r1}) {
    r->world_size = 2;
    r->status = "FINISHED";
    r->end_time_ms = 2;
    r->heartbeat_ms = 2;
  }
  RunJson run;
  run.params = {{"lr", "0.5"}};
  const auto dir = write_run_dir(tmp.file(name), run, {r0, r1});
  for (std::uint32_t rank : {0u, 1u}) {
    std::string rows;
    const std::int64_t step = (rank + 1) * 10 * kMs;
    for (int i = 0; i < 30; ++i) {
      rows += row("IO", kT0 + i * step, 4 * kMs, rank);
      rows += row("BATCH", kT0 + i * step, step, rank);
    }
    write_file(dir / ("regions-" + std::to_string(rank) + ".csv"), rows, /*append=*/true);
  }
  return dir;
}

std::unique_ptr<Endpoint> start(EndpointOptions options = {}) {
  absl::StatusOr<std::unique_ptr<Endpoint>> e = Endpoint::Start(std::move(options));
  if (absl::IsFailedPrecondition(e.status())) return nullptr;  // built without cpp-httplib
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *std::move(e) : nullptr;
}

#define START_OR_SKIP(var, options)               \
  std::unique_ptr<Endpoint> var = start(options); \
  if (!var) GTEST_SKIP() << "built without cpp-httplib (libcpp-httplib-dev)"

TEST(Endpoint, ServesTheFollowedRunAtGetMetrics) {
  TempDir tmp;
  const auto dir = finished_run(tmp, "run");
  EndpointOptions options;
  options.labels = *parse_param_labels("lr");
  START_OR_SKIP(endpoint, options);
  ASSERT_GT(endpoint->port(), 0);
  // httplib ignores SIGPIPE when it makes a server: the command a launcher
  // starts would inherit that. The disposition is as it was.
  struct sigaction pipe_action = {};
  ::sigaction(SIGPIPE, nullptr, &pipe_action);
  EXPECT_EQ(pipe_action.sa_handler, SIG_DFL);
  endpoint->follow(dir.string());
  const std::string response = request(endpoint->port(), "GET", "/metrics");
  EXPECT_THAT(response, HasSubstr("HTTP/1.1 200"));
  EXPECT_THAT(response, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_THAT(response, HasSubstr(R"(lr="0.5",rank="0",host="h"} 0.01)"));
  EXPECT_THAT(response, HasSubstr(R"(lr="0.5",rank="1",host="h"} 0.02)"));
  EXPECT_THAT(response, HasSubstr(R"(rank="0",host="h",phase="data_wait"} 0.4)"));
  EXPECT_THAT(response, HasSubstr(R"(status="FINISHED"} 1)"));
}

TEST(Endpoint, AnythingButGetMetricsIs404) {
  START_OR_SKIP(endpoint, EndpointOptions{});
  for (const auto& [method, path] :
       std::vector<std::pair<std::string, std::string>>{{"GET", "/"},
                                                        {"GET", "/metrics/x"},
                                                        {"POST", "/metrics"},
                                                        {"PUT", "/metrics"},
                                                        {"DELETE", "/metrics"},
                                                        {"GET", "/../etc/passwd"}}) {
    const std::string response = request(endpoint->port(), method, path);
    EXPECT_THAT(response, HasSubstr("HTTP/1.1 404")) << method << " " << path;
    EXPECT_THAT(response, Not(HasSubstr("trainscope_"))) << method << " " << path;
  }
  EXPECT_THAT(request(endpoint->port(), "GET", "/metrics"), HasSubstr("HTTP/1.1 200"));
}

TEST(Endpoint, APortInUseIsAnErrorNamingIt) {
  START_OR_SKIP(first, EndpointOptions{});
  EndpointOptions again;
  again.port = first->port();
  absl::StatusOr<std::unique_ptr<Endpoint>> second = Endpoint::Start(again);
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(absl::IsAlreadyExists(second.status())) << second.status();
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr("127.0.0.1:" + std::to_string(first->port()) + ": the port is in use"));
  // The first one still serves.
  EXPECT_THAT(request(first->port(), "GET", "/metrics"), HasSubstr("HTTP/1.1 200"));
}

TEST(Endpoint, IdleClientsNeitherStopTheCallerNorLaterScrapes) {
  TempDir tmp;
  const auto dir = finished_run(tmp, "run");
  EndpointOptions options;
  options.workers = 2;
  options.max_waiting = 2;
  options.timeout_s = 0.2;
  START_OR_SKIP(endpoint, options);
  endpoint->follow(dir.string());
  // More silent clients than workers and waiting places together.
  std::vector<int> idle;
  for (int i = 0; i < 12; ++i) idle.push_back(connect_to(endpoint->port(), /*blocking=*/false));
  // The launcher's side (a scrape without HTTP) goes on.
  EXPECT_THAT(endpoint->scrape(), HasSubstr("trainscope_steps_total{"));
  // Once their timeouts dropped them, a client is served (some tries: the
  // backlog may refuse a connection meanwhile).
  std::string response;
  for (int attempt = 0; attempt < 100 && response.find("HTTP/1.1 200") == std::string::npos;
       ++attempt) {
    response = request(endpoint->port(), "GET", "/metrics");
    if (response.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_THAT(response, HasSubstr("HTTP/1.1 200"));
  for (int fd : idle) ::close(fd);
}

TEST(Endpoint, ServeFollowsLiveRunsUnderARootAndEndedOnesLeaveAfterTheGrace) {
  TempDir tmp;
  finished_run(tmp, "root/ended");  // ended before: never shown
  RankJson live;
  live.pid = ::getpid();
  const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
  live.start_time_ms = now_ms;
  live.heartbeat_ms = now_ms;
  live.flush_interval_ms = 60'000;
  RunJson run;
  run.id = "feedfeedfeedfeedfeedfeedfeedfeed";
  run.start_time_ms = now_ms;
  const auto dir = write_run_dir(tmp.file("root/live"), run, {live});
  EndpointOptions options;
  options.grace_s = 0;
  START_OR_SKIP(endpoint, options);
  endpoint->follow_root(tmp.file("root"));
  const std::string before = endpoint->scrape();
  EXPECT_THAT(before, HasSubstr("run=\"feedfeedfeedfeedfeedfeedfeedfeed\""));
  EXPECT_THAT(before, Not(HasSubstr("run=\"" + std::string(trainscope::testing::kRunId) + "\"")));
  // It ends: it leaves once the grace (0 s here) has passed.
  live.status = "FINISHED";
  live.end_time_ms = now_ms + 1;
  write_file(dir / live.file_name(), live.text());
  std::string after = endpoint->scrape();
  for (int i = 0; i < 100 && after.find("feedfeed") != std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    after = endpoint->scrape();
  }
  EXPECT_THAT(after, Not(HasSubstr("feedfeed")));
}

TEST(ListenAddress, PortAloneOrAddressAndPortAndErrorsNameTheText) {
  EndpointOptions o;
  ASSERT_TRUE(parse_listen_address("9464", &o).ok());
  EXPECT_EQ(o.address, "127.0.0.1");
  EXPECT_EQ(o.port, 9464);
  ASSERT_TRUE(parse_listen_address("0.0.0.0:9000", &o).ok());
  EXPECT_EQ(o.address, "0.0.0.0");
  EXPECT_EQ(o.port, 9000);
  ASSERT_TRUE(parse_listen_address("[::1]:9001", &o).ok());
  EXPECT_EQ(o.address, "::1");
  for (const char* bad : {"", "x", "0", "65536", "host:", ":80", "::1:80", "[::1]80", "9464x"}) {
    EndpointOptions b;
    const absl::Status s = parse_listen_address(bad, &b);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << bad;
    EXPECT_THAT(std::string(s.message()), HasSubstr(std::string("'") + bad + "'")) << bad;
  }
  EXPECT_TRUE(is_loopback("127.0.0.1"));
  EXPECT_TRUE(is_loopback("localhost"));
  EXPECT_TRUE(is_loopback("::1"));
  EXPECT_FALSE(is_loopback("0.0.0.0"));
  EXPECT_FALSE(is_loopback("10.1.2.3"));
}

}  // namespace
}  // namespace trainscope::prometheus
