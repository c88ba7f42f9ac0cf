// Compiled mode: the implementation is in include/holdback/config/policy_config-inl.hpp.
#include "holdback/config/policy_config-inl.hpp"
