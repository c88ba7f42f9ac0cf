// Deprecated include path, kept for one release (0.2): use "holdback/detector/in_flight_tracker.hpp".
#pragma once
#include "holdback/detector/in_flight_tracker.hpp"
