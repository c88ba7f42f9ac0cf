// Deprecated include path, kept for one release (0.2): use "holdback/flow/flow_controller.hpp".
#pragma once
#include "holdback/flow/flow_controller.hpp"
// renderPrometheus was declared in this header in 0.1.
#include "holdback/metrics/prometheus.hpp"
