// Compiled mode: the implementation is in include/holdback/flow_policies-inl.hpp.
#include "holdback/flow_policies-inl.hpp"
