// A loopback port nothing listens on: a stopped server, for the MLflow tests
// and benchmarks (a connection to it is refused at once).
#ifndef TRAINSCOPE_TESTS_SUPPORT_CLOSED_PORT_HPP_
#define TRAINSCOPE_TESTS_SUPPORT_CLOSED_PORT_HPP_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace trainscope::testing {

inline int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);  // the port was free a moment ago, and nothing listens there now
  return ntohs(addr.sin_port);
}

}  // namespace trainscope::testing

#endif  // TRAINSCOPE_TESTS_SUPPORT_CLOSED_PORT_HPP_
