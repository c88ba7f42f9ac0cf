// Implementation of holdback/metrics/drop_summary.hpp: compiled into libholdback by
// src/metrics.cpp, or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY).
#pragma once

#include "holdback/metrics/drop_summary.hpp"

#include <algorithm>
#include <tuple>
#include <vector>

#include "holdback/core/text.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE DropSummary::DropSummary(Duration interval, std::size_t maxEntries)
    : interval_(interval), max_entries_(std::max<std::size_t>(1, maxEntries)) {}

HOLDBACK_INLINE std::optional<std::string> DropSummary::update(const FlowControllerStats& stats,
                                                               TimePoint now) {
  if (!has_baseline_) {
    for (const BandStats& b : stats.bands) reported_[b.priority] = b.outcomes;
    has_baseline_ = true;
    last_line_ = now;
    return std::nullopt;
  }
  if (now - last_line_ < interval_) return std::nullopt;
  // (count, outcome, priority) of every non-dispatch outcome since the last line.
  std::vector<std::tuple<std::uint64_t, QueueOutcome, Priority>> drops;
  std::uint64_t total = 0;
  for (const BandStats& b : stats.bands) {
    Counts& seen = reported_[b.priority];  // a new band starts at 0
    for (const QueueOutcome o : kAllQueueOutcomes) {
      const auto i = static_cast<std::size_t>(o);
      if (o == QueueOutcome::kDispatched || b.outcomes[i] <= seen[i]) continue;
      const std::uint64_t n = b.outcomes[i] - seen[i];
      drops.emplace_back(n, o, b.priority);
      total += n;
    }
    seen = b.outcomes;
  }
  if (total == 0) return std::nullopt;
  std::sort(drops.begin(), drops.end(), [](const auto& a, const auto& b) {
    if (std::get<0>(a) != std::get<0>(b)) return std::get<0>(a) > std::get<0>(b);
    if (std::get<1>(a) != std::get<1>(b)) return std::get<1>(a) < std::get<1>(b);
    return std::get<2>(a) > std::get<2>(b);
  });
  std::string line = "dropped " + std::to_string(total) + " request" + (total == 1 ? "" : "s") +
                     " in " + formatDuration(now - last_line_) + ":";
  for (std::size_t i = 0; i < drops.size() && i < max_entries_; ++i) {
    const auto& [n, o, p] = drops[i];
    line += (i == 0 ? " " : ", ") + std::string(toString(o)) + " priority=" + std::to_string(p) +
            ": " + std::to_string(n);
  }
  if (drops.size() > max_entries_) {
    line += ", +" + std::to_string(drops.size() - max_entries_) + " more";
  }
  last_line_ = now;
  return line;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
