// Which metric dialect (holdback/metrics/metric_dialect.hpp) the gateway reads an endpoint's
// /metrics with: chosen on the command line (--dialect, --endpoint-dialect, --metric-*) or
// detected from the names the server exposes, and re-detected when a server stops matching the
// dialect it had (restarted as another engine).
//
//   DialectChoices choices = resolveDialects(options, &errors);   // once, at start-up
//   EndpointDialect ed(choices.forEndpoint(i), url);              // one per scraper
//   std::optional<VllmTelemetry> t = ed.read(parsed);              // every scrape
//
// Thread safety: DialectChoices is immutable after resolveDialects (thread-safe to read);
// EndpointDialect is thread-compatible (one per scraper coroutine).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "holdback/metrics/metric_dialect.hpp"
#include "holdback/metrics/metric_dialect_config.hpp"
#include "options.hpp"
#include "vllm_telemetry.hpp"

namespace holdback::gateway {

// One endpoint's configured dialect: `dialect` nullptr means detect; `path` says where it was
// configured ("--dialect", "--endpoint-dialect http://h:1", "--metric-waiting").
struct DialectChoice {
  const MetricDialect* dialect = nullptr;
  std::string path;
};

struct DialectChoices {
  std::vector<DialectChoice> perEndpoint;  // same order as Options::endpointUrls
  std::unique_ptr<MetricDialect> custom;   // the --metric-* dialect, when given
  std::vector<MetricDialect> fromFile;     // --dialect-file's; not resized once resolved

  [[nodiscard]] const DialectChoice& forEndpoint(std::size_t i) const { return perEndpoint[i]; }
};

// Resolves --dialect, --endpoint-dialect and --metric-* against --dialect-file's dialects and the
// built-in ones (a file dialect is chosen by name; detection uses the built-in ones). Every
// problem is appended to `errors` (flag, value, what is allowed); the result is only meaningful
// when none was.
[[nodiscard]] DialectChoices resolveDialects(const Options& o, std::vector<std::string>& errors);

class EndpointDialect {
 public:
  EndpointDialect(DialectChoice choice, std::string url);

  // The telemetry of one scrape, or nullopt (a failed scrape). Logs to stderr when the dialect
  // is first detected, when it changes, when the server matches none (with the names it
  // exposes) and when a configured dialect names metrics the server lacks (with the path); each
  // once per change of state.
  [[nodiscard]] std::optional<VllmTelemetry> read(const ParsedPrometheusText& metrics);

  // The dialect now in use ("" before one was chosen or detected).
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  // A configured dialect whose required metrics the last scrape lacked: the messages (each with
  // its path); empty otherwise.
  [[nodiscard]] const std::vector<std::string>& mappingErrors() const noexcept {
    return mapping_errors_;
  }

 private:
  DialectChoice choice_;
  std::string url_;
  const MetricDialect* current_ = nullptr;
  std::string name_;
  std::vector<std::string> mapping_errors_;
  bool reported_unknown_ = false;
};

}  // namespace holdback::gateway
