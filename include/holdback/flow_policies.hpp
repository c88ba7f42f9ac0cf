// Deprecated include path, kept for one release (0.2): use "holdback/flow/fairness.hpp".
#pragma once
#include "holdback/flow/fairness.hpp"
