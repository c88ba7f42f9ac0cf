// Deprecated include path, kept for one release (0.2): use "holdback/detector/detectors.hpp".
#pragma once
#include "holdback/detector/detectors.hpp"
