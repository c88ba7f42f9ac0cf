// holdback-proxy-floor: the floor of a proxy, for the gateway's load figures
// (docs/performance/gateway.md, scripts/dev/gateway-load.sh FLOOR=1). A blind TCP relay: each
// accepted client connection gets its own upstream connection, and bytes are copied both ways as
// they come, one recv and one send per readiness event, on one thread with level-triggered epoll,
// TCP_NODELAY on both sides. It parses nothing, queues nothing and decides nothing, so whatever a
// real HTTP proxy in the same place costs beyond it (the gateway: parsing, holdback, pooling,
// timeouts, metrics) is measured against it in the same run, as the benchmarks' floors are.
//
//   holdback-proxy-floor --upstream HOST:PORT [--listen HOST:PORT]    (default 127.0.0.1:0)
//
// Prints "listening on http://HOST:PORT" once it accepts. Linux only (epoll). Not a product: no
// limits beyond a 4 MiB cap on bytes buffered for a slow reader (the pair is closed past it), and
// either side's EOF (a half-close included) or error closes both connections at once.
//
// Thread safety: a single-threaded program.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace {

constexpr std::size_t kMaxPending = 4u << 20;

struct Side {
  int fd = -1;
  Side* peer = nullptr;
  std::string pending;  // bytes read from the peer that this side's socket has not taken yet
  bool wantsOut = false;
};

int g_epoll = -1;

bool parseAddress(std::string_view text, sockaddr_in& out) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) return false;
  const std::string host(text.substr(0, colon));
  const std::string port(text.substr(colon + 1));
  char* end = nullptr;
  const long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p < 0 || p > 65535) return false;
  out = {};
  out.sin_family = AF_INET;
  out.sin_port = htons(static_cast<std::uint16_t>(p));
  return inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host.c_str(), &out.sin_addr) == 1;
}

void setNoDelayNonBlocking(int fd) {
  const int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

void watch(Side* s, int op) {
  epoll_event ev{};
  ev.events = EPOLLIN | (s->wantsOut ? EPOLLOUT : 0u);
  ev.data.ptr = s;
  (void)epoll_ctl(g_epoll, op, s->fd, &ev);
}

void closePair(Side* s) {
  Side* p = s->peer;
  ::close(s->fd);  // closing removes the descriptor from the epoll set
  ::close(p->fd);
  delete s;
  delete p;
}

// Sends `data` to `to`, buffering what the socket does not take. False: the pair must close.
bool forward(Side* to, const char* data, std::size_t n) {
  if (to->pending.empty()) {
    const ssize_t sent = ::send(to->fd, data, n, MSG_NOSIGNAL);
    if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return false;
    const std::size_t done = sent > 0 ? static_cast<std::size_t>(sent) : 0;
    data += done;
    n -= done;
  }
  if (n == 0) return true;
  if (to->pending.size() + n > kMaxPending) return false;
  to->pending.append(data, n);
  if (!to->wantsOut) {
    to->wantsOut = true;
    watch(to, EPOLL_CTL_MOD);
  }
  return true;
}

// The socket became writable: flush what was buffered for it. False: the pair must close.
bool flush(Side* s) {
  while (!s->pending.empty()) {
    const ssize_t sent = ::send(s->fd, s->pending.data(), s->pending.size(), MSG_NOSIGNAL);
    if (sent < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
    s->pending.erase(0, static_cast<std::size_t>(sent));
  }
  s->wantsOut = false;
  watch(s, EPOLL_CTL_MOD);
  return true;
}

void accept(int listener, const sockaddr_in& upstream) {
  for (;;) {
    const int client = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) return;
    // A non-blocking connect: a server slow to accept must not stall the one thread. Until it
    // completes, send() says EAGAIN and forward() buffers; EPOLLOUT then flushes.
    const int up = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (up < 0 ||
        (::connect(up, reinterpret_cast<const sockaddr*>(&upstream), sizeof upstream) != 0 &&
         errno != EINPROGRESS)) {
      std::fprintf(stderr, "proxy-floor: upstream connect failed: %s\n", std::strerror(errno));
      if (up >= 0) ::close(up);
      ::close(client);
      continue;
    }
    setNoDelayNonBlocking(client);
    setNoDelayNonBlocking(up);
    auto* a = new Side{client};
    auto* b = new Side{up};
    a->peer = b;
    b->peer = a;
    watch(a, EPOLL_CTL_ADD);
    watch(b, EPOLL_CTL_ADD);
  }
}

}  // namespace

int main(int argc, char** argv) {
  sockaddr_in listenAddr{};
  sockaddr_in upstream{};
  (void)parseAddress("127.0.0.1:0", listenAddr);
  bool haveUpstream = false;
  bool bad = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if ((flag == "--upstream" || flag == "--listen") && value != nullptr) {
      sockaddr_in& target = flag == "--upstream" ? upstream : listenAddr;
      if (!parseAddress(value, target)) {
        std::fprintf(stderr, "proxy-floor: %s: '%s' is not IPv4-HOST:PORT\n", argv[i], value);
        bad = true;
      }
      haveUpstream = haveUpstream || flag == "--upstream";
      ++i;
    } else {
      std::fprintf(stderr, "proxy-floor: unknown flag or missing value: '%s'\n", argv[i]);
      bad = true;
    }
  }
  if (!haveUpstream || bad) {
    std::fprintf(stderr, "usage: holdback-proxy-floor --upstream HOST:PORT [--listen HOST:PORT]\n");
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  const int one = 1;
  (void)setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (listener < 0 ||
      ::bind(listener, reinterpret_cast<const sockaddr*>(&listenAddr), sizeof listenAddr) != 0 ||
      ::listen(listener, SOMAXCONN) != 0) {
    std::fprintf(stderr, "proxy-floor: cannot listen: %s\n", std::strerror(errno));
    return 1;
  }
  socklen_t len = sizeof listenAddr;
  (void)getsockname(listener, reinterpret_cast<sockaddr*>(&listenAddr), &len);
  std::array<char, INET_ADDRSTRLEN> host{};
  (void)inet_ntop(AF_INET, &listenAddr.sin_addr, host.data(), host.size());
  std::printf("listening on http://%s:%u\n", host.data(), ntohs(listenAddr.sin_port));
  std::fflush(stdout);

  g_epoll = epoll_create1(EPOLL_CLOEXEC);
  epoll_event lev{};
  lev.events = EPOLLIN;
  lev.data.ptr = nullptr;  // nullptr: the listener
  (void)epoll_ctl(g_epoll, EPOLL_CTL_ADD, listener, &lev);

  std::array<epoll_event, 256> events{};
  std::array<char, 64 * 1024> buffer{};
  for (;;) {
    const int n = epoll_wait(g_epoll, events.data(), static_cast<int>(events.size()), -1);
    if (n < 0 && errno != EINTR) return 1;
    // A pair closed while handling this batch may still have an event later in it: remember
    // the closed sides and skip them (the batch is small; a linear scan is fine for a floor).
    std::array<void*, 512> closed{};
    std::size_t nClosed = 0;
    const auto isClosed = [&](void* p) {
      for (std::size_t i = 0; i < nClosed; ++i)
        if (closed[i] == p) return true;
      return false;
    };
    for (int i = 0; i < n; ++i) {
      auto* s = static_cast<Side*>(events[i].data.ptr);
      if (s == nullptr) {
        accept(listener, upstream);
        continue;
      }
      if (isClosed(s)) continue;
      bool ok = true;
      if ((events[i].events & EPOLLOUT) != 0) ok = flush(s);
      if (ok && (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0) {
        const ssize_t got = ::recv(s->fd, buffer.data(), buffer.size(), 0);
        if (got > 0) {
          ok = forward(s->peer, buffer.data(), static_cast<std::size_t>(got));
        } else if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          ok = false;
        }
      }
      if (!ok) {
        closed[nClosed++] = s;
        closed[nClosed++] = s->peer;
        closePair(s);
      }
    }
  }
}
