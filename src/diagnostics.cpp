// Compiled mode: the implementation is in include/holdback/diagnostics-inl.hpp.
#include "holdback/diagnostics-inl.hpp"
