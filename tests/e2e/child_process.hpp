// Helpers for the end-to-end tests: a child process guard and a small HTTP client wrapper.
//
// ChildProcess runs a program (fork + exec), reads the `listening on http://HOST:PORT` line from
// its stdout, and always kills and reaps it: the destructor sends SIGTERM, waits up to a grace
// period, then SIGKILLs. The child also gets PR_SET_PDEATHSIG(SIGKILL), so it dies with the test
// process even if the test itself is killed (CTest timeout). Its stderr goes to a log file whose
// tail the test prints on failure.
//
// Thread safety: thread-compatible (one owner thread; the stdout drain thread is internal).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace holdback_e2e {

class ChildProcess {
 public:
  // Starts `argv` (argv[0] is the path) and waits up to `timeout` for the listening line.
  // On failure the process is killed and `error` says why (startedOk() is false).
  ChildProcess(std::string name, std::vector<std::string> argv, const std::string& logDir,
               std::chrono::milliseconds timeout = std::chrono::milliseconds(15000));
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  [[nodiscard]] bool startedOk() const { return !url_.empty(); }
  [[nodiscard]] const std::string& error() const { return error_; }
  // "http://HOST:PORT" as printed by the child.
  [[nodiscard]] const std::string& url() const { return url_; }
  [[nodiscard]] std::string host() const;
  [[nodiscard]] int port() const;
  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] const std::string& name() const { return name_; }
  // The lines the child printed to stdout before its listening line.
  [[nodiscard]] const std::vector<std::string>& linesBeforeListening() const { return before_; }

  // Sends `sig`; no-op once reaped.
  void signal(int sig);
  // Waits up to `timeout` for the child to exit; returns its wait status once reaped.
  std::optional<int> waitExit(std::chrono::milliseconds timeout);
  // SIGTERM, wait up to `grace`, then SIGKILL; always reaps. Returns the wait status.
  int stop(std::chrono::milliseconds grace = std::chrono::milliseconds(3000));
  // The last `bytes` of the child's stderr log.
  [[nodiscard]] std::string stderrTail(std::size_t bytes = 2000) const;

 private:
  std::string name_;
  std::string log_path_;
  pid_t pid_ = -1;
  std::optional<int> status_;
  int stdout_fd_ = -1;
  std::string url_;
  std::vector<std::string> before_;
  std::string error_;
  std::thread drain_;
};

}  // namespace holdback_e2e
