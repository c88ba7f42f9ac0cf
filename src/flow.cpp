// Compiled mode: the enforcement (flow controller) layer's implementation
// (include/holdback/flow/*-inl.hpp), one translation unit per layer. In header-only mode the
// public headers include the same files.
#include "holdback/flow/admission-inl.hpp"
#include "holdback/flow/band_scheduling-inl.hpp"
#include "holdback/flow/engine_priority-inl.hpp"
#include "holdback/flow/eviction-inl.hpp"
#include "holdback/flow/fairness-inl.hpp"
#include "holdback/flow/flow_controller-inl.hpp"
#include "holdback/flow/outcome-inl.hpp"
#include "holdback/flow/plugins/program_aware_fairness-inl.hpp"
#include "holdback/flow/plugins/slo_deadline_ordering-inl.hpp"
#include "holdback/flow/plugins/vtc_fairness-inl.hpp"
#include "holdback/flow/pool_pressure-inl.hpp"
#include "holdback/flow/replica_port-inl.hpp"
#include "holdback/flow/request_headers-inl.hpp"
#include "holdback/flow/runner-inl.hpp"
