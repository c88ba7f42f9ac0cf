// Compiled mode: the implementation is in include/holdback/config/endpoint_picker_config-inl.hpp.
#include "holdback/config/endpoint_picker_config-inl.hpp"
