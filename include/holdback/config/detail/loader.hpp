// detail::Loader: the whole-file loader behind loadEndpointPickerConfig
// (config/endpoint_picker_config.hpp, which documents what is read). Internal.
//
// The algorithm
//   One pass over one parsed EndpointPickerConfig: the header (apiVersion, kind), the feature
//   gates, every plugin through the registries (a type no registry knows gets a warning, a type
//   two registries know an error), then flowControl: the detector and policy refs, the global
//   limits and TTLs, eviction, the band templates and the priority bands. Every problem goes
//   into the Diagnostics with its JSON path; reading never stops at the first one. The bundle is
//   filled in place; loadEndpointPickerConfig decides from the Diagnostics whether it is returned.
//
// Thread safety: thread-hostile (one Loader per load, used by one thread; it holds references to
// its inputs and its outputs, which must outlive run()).
// Allocation: yes (it builds the bundle); config loading is a cold path.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "holdback/config/endpoint_picker_config.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {
using namespace config;  // NOLINT(google-build-using-namespace): the config layer's internals

// The rule for a Go EndpointPickerConfig: every field of the Go schema loads. Flow-control fields
// (flowControl, the deprecated top-level saturationDetector, the flow-control plugins and the
// flowControl gate) are read strictly; the rest of the Go schema is accepted with a warning each.
// Top-level fields of the Go schema that mean nothing to holdback: the scheduler
// (schedulingProfiles), the data layer (dataLayer, and its pre-2026 name data), request handling
// (requestHandler and its deprecated top-level parser); metadata appears in Kubernetes manifests.
inline constexpr std::string_view kIgnoredTopLevel[] = {
    "metadata", "schedulingProfiles", "dataLayer", "data", "requestHandler", "parser"};
// Feature gates the Go gateway registers that do not concern flow control (their values are
// still checked). haPopulateNonLeaderDatastore is on by default upstream; the other three are
// the data-layer gates of earlier releases.
inline constexpr std::string_view kIgnoredFeatureGates[] = {
    "haPopulateNonLeaderDatastore", "dataLayer", "prepareDataPlugins", "enableLegacyMetrics"};

class Loader {
 public:
  // `json` is the document, `registries` the plugin types, `bundle` the output (filled in
  // place), `d` receives every error and warning. All four must outlive run().
  Loader(const Json& json, const Registries& registries, ConfigBundle& bundle, Diagnostics& d)
      : json_(json), registries_(registries), bundle_(bundle), d_(d) {}

  // Reads the whole document once; call it once.
  void run();

 private:
  // apiVersion (the deprecated one warns) and kind.
  void readHeader(ParamReader& top);
  // featureGates: sets bundle_.flowControlEnabled; the Go gates of kIgnoredFeatureGates warn.
  void readFeatureGates(ParamReader& top);
  // Reads the plugin list into specs_ and builds every plugin through its registry.
  void buildAllPlugins();
  // The one plugin of an eviction kind in the file (upstream wires one of each, by type); null
  // when there is none (the built-in then) or more than one (an error at each extra one).
  template <class Interface>
  std::shared_ptr<const Interface> onlyPlugin(const PluginRegistry<Interface>& registry,
                                              std::string_view kind);
  // flowControl.eviction (holdback extension), after enableEviction.
  void readEviction(ParamReader& fc);
  // flowControl.eviction.restoreReserve: an object whose presence turns reserve restoration on
  // (as waitForReleasesTolerance turns wait-vs-evict on); `enabled: false` keeps it off. The
  // ranges are validateEvictionOptions' (same paths), except epsilon while it stays off, which
  // is checked here so that a wrong value is reported whether or not it is in use.
  void readRestoreReserve(ParamReader& ev, ReserveRestoreOptions& r);
  // flowControl.bandScheduling {schedule, activationThreshold} (flow/band_scheduling.hpp).
  void readBandScheduling(ParamReader& fc, BandSchedulingOptions& out);
  // A band's fairnessPolicyRef / orderingPolicyRef. A name that is no plugin but is a built-in
  // type resolves to that type with defaults (the reference auto-injects fcfs and global-strict;
  // holdback also the other built-ins, so the reference's JSON example loads), one instance per
  // type for the whole file.
  template <class Interface>
  std::shared_ptr<const Interface> resolveBandPolicy(
      ParamReader& reader, std::string_view key,
      std::map<std::string, std::shared_ptr<const Interface>, std::less<>>& built,
      const PluginRegistry<Interface>& registry, std::shared_ptr<const Interface> fcfs_or_strict,
      std::string_view kind);
  // One band object; `label` names it in messages ("priority band 100", "default priority band").
  // `priority` receives the band's priority when it is valid, even if another field is not (so
  // that duplicates are still found).
  std::optional<BandOptions> readBand(const Json& object, const std::string& path,
                                      bool needsPriority, const std::string& label,
                                      std::optional<Priority>* priority_out = nullptr);
  static BandTemplate toTemplate(const BandOptions& b);
  // A ref string; an empty one is absent.
  std::optional<std::string> readRef(ParamReader& reader, std::string_view key);
  // The flowControl block (config/detail/flow_control_fields.hpp): refs, limits, TTLs, eviction,
  // templates, bands; with the gate off, the defaults (the block is still checked and what was
  // set is named in a warning).
  void readFlowControl();
  // The row `key` of the flowControl table that is read by hand (a ref, a block, the profile).
  void readFlowControlKey(ParamReader& fc, std::string_view key);
  // flowControl.priorityBands: each entry a band, each priority once.
  void readPriorityBands(ParamReader& fc);

  const Json& json_;
  const Registries& registries_;
  ConfigBundle& bundle_;
  Diagnostics& d_;
  std::vector<PluginSpec> specs_;
  std::shared_ptr<const EvictionFilter> eviction_filter_;
  std::shared_ptr<const EvictionOrderPolicy> eviction_order_;
};

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
