// Telemetry: one coroutine per model server GETs its /metrics every --scrape-interval-ms over a
// kept-alive connection (1 s timeout per step, TCP_NODELAY), parses the Prometheus text
// (vllm_telemetry.hpp), and records the vLLM gauges in the Pool; a body larger than
// --max-scrape-bytes, a non-200, an unreachable server or missing gauges is a failed scrape.
// Every 100 scrapes (and on the first) it also reads /v1/models for GET /v1/models.
//
// Thread safety: runs on the executor it is started on; Gateway and Pool calls are thread-safe.
#pragma once

#include <cstddef>
#include <functional>

#include "gateway.hpp"
#include "net.hpp"

namespace holdback::gateway {

// Starts the scraper of endpoint `index` (address `target`) on `ex`. `firstRoundDone` is called
// once, after the first scrape (successful or not). Runs until the executor's context stops.
void startScraper(const asio::any_io_executor& ex, Gateway& gw, std::size_t index,
                  const tcp::endpoint& target, std::function<void()> firstRoundDone);

}  // namespace holdback::gateway
