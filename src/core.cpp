// Compiled mode: the vocabulary layer's implementation (include/holdback/core/*-inl.hpp), one
// translation unit per layer. In header-only mode the public headers include the same files.
#include "holdback/core/diagnostics-inl.hpp"
#include "holdback/core/duration-inl.hpp"
#include "holdback/core/endpoint-inl.hpp"
#include "holdback/core/field_table-inl.hpp"
#include "holdback/core/text-inl.hpp"
