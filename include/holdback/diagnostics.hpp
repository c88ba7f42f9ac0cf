// Deprecated include path, kept for one release (0.2): use "holdback/core/diagnostics.hpp".
#pragma once
#include "holdback/core/diagnostics.hpp"
