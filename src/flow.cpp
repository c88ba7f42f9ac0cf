// Compiled mode: the enforcement (flow controller) layer's implementation (include/holdback/flow/*-inl.hpp), one
// translation unit per layer. In header-only mode the public headers include the same files.
#include "holdback/flow/flow_controller-inl.hpp"
#include "holdback/flow/outcome-inl.hpp"
#include "holdback/flow/fairness-inl.hpp"
