// Telemetry: one coroutine per model server GETs its /metrics every --scrape-interval-ms over a
// kept-alive connection (1 s timeout per step, TCP_NODELAY), parses the Prometheus text
// and reads it through the endpoint's metric dialect (endpoint_dialect.hpp: configured or
// detected), and records the gauges in the Pool; a body larger than --max-scrape-bytes, a
// non-200, an unreachable server or missing gauges is a failed scrape.
// Every 100 scrapes (and on the first) it also reads /v1/models for GET /v1/models.
//
// Thread safety: runs on the executor it is started on; Gateway and Pool calls are thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "endpoint_dialect.hpp"
#include "gateway.hpp"
#include "net.hpp"

namespace holdback::gateway {

// Starts the scraper of endpoint `index` (address `target`) on `ex`, reading its metrics with
// `dialect`. `firstRoundDone` is called once, after the first scrape (successful or not), with
// the configured dialect's mapping errors (names the server does not expose; each with the
// flag that configured it). Runs until the executor's context stops.
void startScraper(const IoExecutor& ex, Gateway& gw, std::size_t index, const tcp::endpoint& target,
                  DialectChoice dialect,
                  std::function<void(const std::vector<std::string>&)> firstRoundDone);

}  // namespace holdback::gateway
