// Compiled mode: the implementation is in include/holdback/flow_prometheus-inl.hpp.
#include "holdback/flow_prometheus-inl.hpp"
