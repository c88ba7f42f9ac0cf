// Compiled mode: the implementation is in include/holdback/detectors-inl.hpp.
#include "holdback/detectors-inl.hpp"
