// Compiled mode: the implementation is in include/holdback/in_flight_tracker-inl.hpp.
#include "holdback/in_flight_tracker-inl.hpp"
