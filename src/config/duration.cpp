// Compiled mode: the implementation is in include/holdback/config/duration-inl.hpp.
#include "holdback/config/duration-inl.hpp"
