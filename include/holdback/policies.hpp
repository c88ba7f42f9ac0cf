// Deprecated include path, kept for one release (0.2): use "holdback/policy/policies.hpp".
#pragma once
#include "holdback/policy/policies.hpp"
