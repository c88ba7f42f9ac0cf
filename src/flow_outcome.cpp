// Compiled mode: the implementation is in include/holdback/flow_outcome-inl.hpp.
#include "holdback/flow_outcome-inl.hpp"
