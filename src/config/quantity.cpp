// Compiled mode: the implementation is in include/holdback/config/quantity-inl.hpp.
#include "holdback/config/quantity-inl.hpp"
