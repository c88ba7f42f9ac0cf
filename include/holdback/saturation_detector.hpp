// Deprecated include path, kept for one release (0.2): use "holdback/detector/saturation_detector.hpp".
#pragma once
#include "holdback/detector/saturation_detector.hpp"
