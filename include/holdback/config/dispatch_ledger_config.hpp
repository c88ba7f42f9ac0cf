// JSON configuration of the host's dispatch ledger (detector/dispatch_ledger.hpp): the block
// flowControl.dispatchLedger of an EndpointPickerConfig, loaded into ConfigBundle::dispatchLedger.
//
// The ledger is the host's (the example gateway's Pool, `holdback saturation`): it corrects the
// scraped telemetry it hands to whichever saturation detector the file names. Keys (strict: an
// unknown key, a wrong type or an out-of-range value is an error with its JSON path):
//   correction (bool, default true), scrapeMarginRequests (int >= 0, default 0), dispatchBudget
//   (bool, default false), budgetQueueDepth (int > 0, default: the utilization detector's
//   queueDepthThreshold when the file's detector is one, else 5), replicas (int in [1, 1024],
//   default 1), slotCountFromScrapes (bool, default true), creditCompletions (bool, default
//   false), reconcileInFlight (bool, default true).
//
// The deprecated place: the same block as the utilization detector's parameters.dispatchLedger
// still loads, with a warning naming its path and the new place. Both places given for the
// file's detector is an error naming both paths. A utilization detector that is not the file's
// detector keeps its old block's warning (its settings configure nothing, as before).
//
// Thread safety: thread-safe (pure functions over immutable inputs).
#pragma once

#include "holdback/abi.hpp"

#include <optional>
#include <string>

#include "holdback/config/json.hpp"
#include "holdback/core/diagnostics.hpp"
#include "holdback/detector/dispatch_ledger.hpp"
#include "holdback/detector/saturation_detector.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace config {

// The ledger's defaults beside `detector` (may be null): DispatchLedgerOptions{} with
// budgetQueueDepth = the utilization detector's queueDepthThreshold when it is one.
[[nodiscard]] HOLDBACK_API DispatchLedgerOptions
dispatchLedgerDefaults(const SaturationDetector* detector);

// Parses one dispatchLedger block over `defaults` (null or absent: the defaults). Every problem
// is appended at `path` (the block's JSON pointer); nullopt when there is one.
HOLDBACK_API std::optional<DispatchLedgerOptions> parseDispatchLedgerOptions(
    const Json* block, const std::string& path, Diagnostics& diagnostics,
    DispatchLedgerOptions defaults = {});

// The ledger options a document sets beside `detector`, the detector loaded from it:
//   an EndpointPickerConfig: flowControl.dispatchLedger, else the deprecated
//     parameters.dispatchLedger of the plugin named detector->name() when it is a
//     utilization-detector; both given: an error at /flowControl/dispatchLedger naming both;
//   one plugin object: its parameters.dispatchLedger (the deprecated place).
// Problems of flowControl.dispatchLedger are appended to `diagnostics`; those of the deprecated
// block are not (the detector's parameter parser reports them, with the deprecation warning).
// Invalid blocks leave the defaults.
[[nodiscard]] HOLDBACK_API DispatchLedgerOptions loadDispatchLedgerOptions(
    const Json& document, const SaturationDetector* detector, Diagnostics& diagnostics);

// The deprecation warning of the old block at `path` (the detector's parser adds it).
[[nodiscard]] HOLDBACK_API std::string dispatchLedgerDeprecation();

}  // namespace config
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/config/dispatch_ledger_config-inl.hpp"
#endif
