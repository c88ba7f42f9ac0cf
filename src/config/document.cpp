// Compiled mode: the implementation is in include/holdback/config/document-inl.hpp.
#include "holdback/config/document-inl.hpp"
