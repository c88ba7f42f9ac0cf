// Compiled mode: the implementation is in include/holdback/flow_controller-inl.hpp.
#include "holdback/flow_controller-inl.hpp"
