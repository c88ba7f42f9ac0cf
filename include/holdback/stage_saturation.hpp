// Deprecated include path, kept for one release (0.2): use "holdback/detector/stage_saturation.hpp".
#pragma once
#include "holdback/detector/stage_saturation.hpp"
