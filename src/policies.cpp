// Compiled mode: the implementation is in include/holdback/policies-inl.hpp.
#include "holdback/policies-inl.hpp"
