// Compiled mode: the pool-pressure (saturation detector) layer's implementation
// (include/holdback/detector/*-inl.hpp), one translation unit per layer. In header-only mode the
// public headers include the same files.
#include "holdback/detector/concurrency_detector-inl.hpp"
#include "holdback/detector/detectors-inl.hpp"
#include "holdback/detector/dispatch_ledger-inl.hpp"
#include "holdback/detector/endpoint_picker-inl.hpp"
#include "holdback/detector/in_flight_tracker-inl.hpp"
#include "holdback/detector/reservation-inl.hpp"
#include "holdback/detector/stage_saturation-inl.hpp"
