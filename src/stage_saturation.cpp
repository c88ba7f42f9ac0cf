// Compiled mode: the implementation is in include/holdback/stage_saturation-inl.hpp.
#include "holdback/stage_saturation-inl.hpp"
