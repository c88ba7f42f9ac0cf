// Deprecated include path, kept for one release (0.2): use "holdback/flow/outcome.hpp".
#pragma once
#include "holdback/flow/outcome.hpp"
