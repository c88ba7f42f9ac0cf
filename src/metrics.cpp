// Compiled mode: the metrics layer's implementation (include/holdback/metrics/*-inl.hpp), one
// translation unit per layer. In header-only mode the public headers include the same files.
#include "holdback/metrics/drop_summary-inl.hpp"
#include "holdback/metrics/metric_dialect-inl.hpp"
#include "holdback/metrics/metric_dialect_config-inl.hpp"
#include "holdback/metrics/prometheus-inl.hpp"
#include "holdback/metrics/prometheus_parser-inl.hpp"
#include "holdback/metrics/stale_endpoints-inl.hpp"
