// Compiled mode: the ceilings (usage-limit policy) layer's implementation
// (include/holdback/policy/*-inl.hpp), one translation unit per layer. In header-only mode the
// public headers include the same files.
#include "holdback/policy/poisson_reserve-inl.hpp"
#include "holdback/policy/policies-inl.hpp"
#include "holdback/policy/reservation-inl.hpp"
