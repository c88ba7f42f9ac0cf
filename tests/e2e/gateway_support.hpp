// Shared helpers of the gateway end-to-end tests (http_client.hpp clients against ChildProcess
// servers).
#pragma once

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "e2e_support.hpp"
#include "http_client.hpp"

namespace holdback_e2e {

// True when `body` is the gateway's OpenAI-style error: {"error": {"message": string, "type":
// string, "code": ...}}.
inline bool isOpenAiErrorBody(const std::string& body) {
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("error")) return false;
  const auto& e = j["error"];
  return e.is_object() && e.contains("message") && e["message"].is_string() && e.contains("type") &&
         e["type"].is_string() && e.contains("code");
}

inline double msSince(std::chrono::steady_clock::time_point t0,
                      std::chrono::steady_clock::time_point t = std::chrono::steady_clock::now()) {
  return std::chrono::duration<double, std::milli>(t - t0).count();
}

// A keep-alive client with TCP_NODELAY; `readTimeout` bounds each response.
inline HttpClient clientFor(const ChildProcess& p,
                            std::chrono::seconds readTimeout = std::chrono::seconds(30)) {
  return HttpClient(p.host(), p.port(),
                    {.connectTimeout = std::chrono::seconds(5),
                     .readTimeout = readTimeout,
                     .writeTimeout = std::chrono::seconds(5)});
}

// `promtool check metrics` (Debian package prometheus) over `text`, written to DIR/metrics.txt:
// its exit status and everything it printed (lint findings included), or nullopt when promtool
// is not installed.
struct PromtoolResult {
  int status = 0;
  std::string report;
};
inline std::optional<PromtoolResult> promtoolCheck(const std::string& text,
                                                   const std::string& dir) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) return std::nullopt;
  const std::string file = dir + "/metrics.txt";
  std::ofstream(file) << text;
  const std::string out = dir + "/promtool.txt";
  PromtoolResult r;
  r.status = std::system(("promtool check metrics < '" + file + "' > '" + out + "' 2>&1").c_str());
  std::ifstream in(out);
  std::stringstream report;
  report << in.rdbuf();
  r.report = report.str();
  return r;
}

// GET /metrics, or "" when it fails.
inline std::string getMetrics(const ChildProcess& p) {
  auto c = clientFor(p, std::chrono::seconds(5));
  auto r = c.get("/metrics");
  return r && r->status == 200 ? r->body : std::string();
}

// Waits until every model server reports nothing running or waiting; false on the timeout.
inline bool waitServersIdle(std::initializer_list<const ChildProcess*> servers,
                            std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    bool idle = true;
    for (const ChildProcess* s : servers) {
      const std::string m = getMetrics(*s);
      if (metricValue(m, "vllm:num_requests_running").value_or(1) != 0 ||
          metricValue(m, "vllm:num_requests_waiting").value_or(1) != 0) {
        idle = false;
      }
    }
    if (idle) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// The fake model server of the gateway tests: 4 slots, 10 ms per token, 20 ms prefill.
inline std::unique_ptr<ChildProcess> startModelServer(const std::string& name,
                                                      const std::string& dir,
                                                      int kvCapacityTokens) {
  return std::make_unique<ChildProcess>(
      name,
      std::vector<std::string>{HOLDBACK_MODEL_SERVER, "--port", "0", "--slots", "4", "--token-ms",
                               "10", "--prefill-ms", "20", "--kv-capacity-tokens",
                               std::to_string(kvCapacityTokens), "--model", "fake-model"},
      dir);
}

// holdback-gateway in front of `servers` with `config` (written to DIR/NAME.json), scraping
// every 25 ms.
inline std::unique_ptr<ChildProcess> startGatewayWith(
    const std::string& name, const std::string& dir, const std::string& config,
    std::initializer_list<const ChildProcess*> servers) {
  const std::string file = dir + "/" + name + ".json";
  std::ofstream(file) << config;
  std::vector<std::string> argv{HOLDBACK_GATEWAY};
  for (const ChildProcess* s : servers) {
    argv.push_back("--endpoint");
    argv.push_back(s->url());
  }
  for (const char* a :
       {"--config", file.c_str(), "--listen", "127.0.0.1:0", "--scrape-interval-ms", "25"}) {
    argv.emplace_back(a);
  }
  return std::make_unique<ChildProcess>(name, std::move(argv), dir);
}

}  // namespace holdback_e2e
