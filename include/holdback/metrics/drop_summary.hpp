// Bounded request-drop summaries (upstream #2132): one log line, at most once per interval,
// aggregating the requests that ended without a dispatch since the previous line, by outcome and
// priority band, instead of one line per dropped request. Built from stats() snapshots, so it
// needs nothing from the controller's hot paths; a host calls it from its expiry tick or its
// metrics scrape.
//
//   DropSummary summary;                                 // interval 1 s by default
//   if (auto line = summary.update(controller.stats(), now)) log(*line);
//   // "dropped 17 requests in 1.2s: RejectedCapacity priority=-10: 15, EvictedTTL priority=0: 2"
//
// Bounded: at most maxEntries (outcome, priority) pairs, largest first, then "+N more"; the line
// never names flows. Counters of removed bands are kept by stats(), so no drop is lost.
//
// Thread safety: thread-compatible (one owner, e.g. the thread that runs expire()).
#pragma once

#include "holdback/abi.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "holdback/flow/flow_controller.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

class HOLDBACK_API DropSummary {
 public:
  explicit DropSummary(Duration interval = std::chrono::seconds(1), std::size_t maxEntries = 8);

  // The line for the drops since the last line, or nullopt when there were none or the last line
  // is younger than the interval (the drops are then reported by a later call). The first call
  // only takes the baseline.
  std::optional<std::string> update(const FlowControllerStats& stats, TimePoint now);

 private:
  using Counts = std::array<std::uint64_t, kNumQueueOutcomes>;
  Duration interval_;
  std::size_t max_entries_;
  bool has_baseline_ = false;
  TimePoint last_line_{};
  std::map<Priority, Counts> reported_;  // per band: the counts already reported
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/metrics/drop_summary-inl.hpp"
#endif
