// Compiled mode: the implementation is in include/holdback/config/detector_config-inl.hpp.
#include "holdback/config/detector_config-inl.hpp"
