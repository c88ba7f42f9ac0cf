// Compiled mode: the implementation is in include/holdback/saturation_detector-inl.hpp.
#include "holdback/saturation_detector-inl.hpp"
