// Compiled mode: the configuration layer's implementation (include/holdback/config/*-inl.hpp), one
// translation unit per layer. In header-only mode the public headers include the same files.
#include "holdback/config/detail/field_table-inl.hpp"
#include "holdback/config/detector_config-inl.hpp"
#include "holdback/config/dispatch_ledger_config-inl.hpp"
#include "holdback/config/document-inl.hpp"
#include "holdback/config/effective_config-inl.hpp"
#include "holdback/config/endpoint_picker_config-inl.hpp"
#include "holdback/config/flow_plugin_config-inl.hpp"
#include "holdback/config/json-inl.hpp"
#include "holdback/config/plugin-inl.hpp"
#include "holdback/config/policy_config-inl.hpp"
#include "holdback/config/quantity-inl.hpp"
#include "holdback/config/reference_profile-inl.hpp"
