// GET /metrics: the controller's metrics (renderPrometheus) followed by the gateway's own
// (responses by status, upstream failures and aborts, connection counts, per-endpoint telemetry).
// Names and meanings are listed in docs/reference/metrics.md.
//
// Thread safety: thread-safe (reads atomics and snapshots).
#pragma once

#include <string>

#include "gateway.hpp"

namespace holdback::gateway {

[[nodiscard]] std::string renderMetrics(Gateway& gw);

}  // namespace holdback::gateway
