// Deprecated include path, kept for one release (0.2): use "holdback/policy/usage_limit_policy.hpp".
#pragma once
#include "holdback/policy/usage_limit_policy.hpp"
