#include "child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <utility>

namespace holdback_e2e {

namespace {

constexpr std::string_view kListening = "listening on ";

}  // namespace

ChildProcess::ChildProcess(std::string name, std::vector<std::string> argv,
                           const std::string& logDir, std::chrono::milliseconds timeout)
    : name_(std::move(name)), log_path_(logDir + "/" + name_ + ".stderr.log") {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    error_ = std::string("pipe2: ") + std::strerror(errno);
    return;
  }
  const int log_fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const pid_t parent = getpid();

  pid_ = fork();
  if (pid_ == 0) {
    // Child: only async-signal-safe calls until exec.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before prctl
    dup2(out[1], STDOUT_FILENO);
    if (log_fd >= 0) dup2(log_fd, STDERR_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  ::close(out[1]);
  if (log_fd >= 0) ::close(log_fd);
  if (pid_ < 0) {
    error_ = std::string("fork: ") + std::strerror(errno);
    ::close(out[0]);
    return;
  }
  stdout_fd_ = out[0];

  // Read stdout until the listening line or the deadline.
  std::string buffer;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const auto nl = buffer.find('\n');
    if (nl != std::string::npos) {
      const std::string line = buffer.substr(0, nl);
      if (line.rfind(kListening, 0) == 0) {
        url_ = line.substr(kListening.size());
        break;
      }
      before_.push_back(line);
      buffer.erase(0, nl + 1);
      continue;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      error_ = name_ + ": no listening line within " + std::to_string(timeout.count()) + " ms";
      break;
    }
    pollfd p{stdout_fd_, POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char chunk[512];
    const ssize_t n = ::read(stdout_fd_, chunk, sizeof chunk);
    if (n <= 0) {
      error_ = name_ + ": exited before printing the listening line";
      break;
    }
    buffer.append(chunk, static_cast<std::size_t>(n));
  }
  if (url_.empty()) {
    stop(std::chrono::milliseconds(0));
    error_ += "\n" + stderrTail();
    return;
  }
  // Keep draining stdout so that a chatty child never blocks on a full pipe.
  drain_ = std::thread([fd = stdout_fd_] {
    char chunk[4096];
    while (true) {
      const ssize_t n = ::read(fd, chunk, sizeof chunk);
      if (n > 0) continue;
      if (n < 0 && errno == EINTR) continue;
      break;
    }
  });
}

ChildProcess::~ChildProcess() {
  stop();
  if (drain_.joinable()) drain_.join();  // the child is gone: EOF
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
}

std::string ChildProcess::host() const {
  const auto start = url_.find("://");
  const auto colon = url_.rfind(':');
  if (start == std::string::npos || colon == std::string::npos || colon < start + 3) return {};
  return url_.substr(start + 3, colon - start - 3);
}

int ChildProcess::port() const {
  const auto colon = url_.rfind(':');
  return colon == std::string::npos ? -1 : std::atoi(url_.c_str() + colon + 1);
}

void ChildProcess::signal(int sig) {
  if (pid_ > 0 && !status_) ::kill(pid_, sig);
}

std::optional<int> ChildProcess::waitExit(std::chrono::milliseconds timeout) {
  if (pid_ <= 0 || status_) return status_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      status_ = status;
      return status_;
    }
    if (r < 0 && errno != EINTR) {
      status_ = -1;
      return status_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

int ChildProcess::stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0) return -1;
  if (!status_) {
    signal(SIGTERM);
    if (!waitExit(grace)) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      status_ = status;
    }
  }
  return *status_;
}

std::string ChildProcess::stderrTail(std::size_t bytes) const {
  std::ifstream in(log_path_, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (all.size() > bytes) all = "..." + all.substr(all.size() - bytes);
  return "--- " + name_ + " stderr (" + log_path_ + ") ---\n" + all;
}

}  // namespace holdback_e2e
