// Compiled mode: the implementation is in include/holdback/config/json-inl.hpp.
#include "holdback/config/json-inl.hpp"
