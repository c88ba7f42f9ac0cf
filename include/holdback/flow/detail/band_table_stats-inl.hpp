// Implementation of holdback/flow/detail/band_table.hpp, the stats snapshot (BandTable::fillStats:
// the per-band counters and the per-flow queue figures). Included by band_table-inl.hpp.
#pragma once

#include "holdback/flow/detail/band_table.hpp"

#include <algorithm>
#include <cstddef>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

HOLDBACK_INLINE const Band* BandTable::placementOf(Priority p) const noexcept {
  const auto it = bands_.find(p);
  if (it != bands_.end()) return it->second.get();
  if (topology_.provisionOnFirstUse && bands_.size() < topology_.maxBands) return nullptr;
  return bands_.at(0).get();
}

HOLDBACK_INLINE void BandTable::fillStats(FlowControllerStats& out,
                                          std::size_t fairness_id_labels) const {
  out.queuedRequests = total_requests_;
  out.queuedBytes = total_bytes_;
  out.outcomes = outcomes_;
  out.untrackedRequestedOutcomes = requested_outcomes_.untracked;
  out.fairnessIdLabelLimit = fairness_id_labels;
  out.bands.reserve(counters_.size());
  for (auto it = counters_.rbegin(); it != counters_.rend(); ++it) {  // highest first
    const auto& [p, c] = *it;
    BandStats b;
    b.priority = p;
    b.gatedCycles = c.gated_cycles;
    b.outcomes = c.outcomes;
    b.queueDurationBuckets = c.queue_duration_buckets;
    b.queueDurationSumSeconds = c.queue_duration_sum;
    for (std::size_t i = 0; i < requested_outcomes_.size; ++i) {
      const std::uint64_t k = requested_outcomes_.keys[i];
      if (static_cast<Priority>(static_cast<std::uint32_t>(k >> 32)) != p) continue;
      b.requestedOutcomes.push_back(
          {static_cast<Priority>(static_cast<std::uint32_t>(k)), requested_outcomes_.counts[i]});
    }
    std::sort(b.requestedOutcomes.begin(), b.requestedOutcomes.end(),
              [](const RequestedPriorityOutcomes& x, const RequestedPriorityOutcomes& y) {
                return x.requestedPriority < y.requestedPriority;
              });
    auto band_it = bands_.find(p);
    b.provisioned = band_it != bands_.end();
    if (b.provisioned) {
      const Band& band = *band_it->second;
      b.queuedRequests = band.queued_requests;
      b.queuedBytes = band.queued_bytes;
      b.maxRequests = band.maxRequests;
      b.maxBytes = band.maxBytes;
      b.flows = band.flows.size();
      b.activeFlows = band.active_count;
      b.lastCeiling = band.last_ceiling;
    }
    out.bands.push_back(std::move(b));
  }
  if (fairness_id_labels > 0) fillFlowQueues(out, fairness_id_labels);
}

HOLDBACK_INLINE void BandTable::fillFlowQueues(FlowControllerStats& out, std::size_t limit) const {
  // Each band's non-empty flows in id order, without a sort: the by-id index of the non-empty
  // flows when the band keeps one, else every flow (by id) skipping the empty ones.
  const auto forEachNonEmpty = [](const Band& band, auto&& fn) {
    if (band.track_active) {
      for (const Flow* f : band.active) {
        if (!f->items.empty()) fn(f);
      }
    } else {
      for (const auto& [id, f] : band.flows) {
        if (!f->items.empty()) fn(f.get());
      }
    }
  };
  // Each flow id's totals over the bands.
  struct Total {
    std::size_t requests = 0;
    std::uint64_t bytes = 0;
    bool named = false;
  };
  std::unordered_map<std::string_view, Total> totals;
  std::size_t entries = 0;
  for (const Band* band : ordered_) entries += band->active_count;
  totals.reserve(entries);
  for (const Band* band : ordered_) {
    forEachNonEmpty(*band, [&totals](const Flow* f) {
      Total& t = totals[f->id];
      t.requests += f->items.size();
      t.bytes += f->queued_bytes;
    });
  }
  // The `limit` ids with the most queued requests (then bytes, then the smaller id) get a label;
  // a flow named like the bucket is always folded into it.
  std::vector<std::pair<std::string_view, Total*>> ranked;
  ranked.reserve(totals.size());
  for (auto& [id, t] : totals) {
    if (id != kOtherFairnessIdLabel) ranked.emplace_back(id, &t);
  }
  if (ranked.size() > limit) {
    std::nth_element(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(limit),
                     ranked.end(), [](const auto& a, const auto& b) {
                       if (a.second->requests != b.second->requests) {
                         return a.second->requests > b.second->requests;
                       }
                       if (a.second->bytes != b.second->bytes) {
                         return a.second->bytes > b.second->bytes;
                       }
                       return a.first < b.first;
                     });
    ranked.resize(limit);
  }
  for (auto& [id, t] : ranked) t->named = true;
  for (BandStats& b : out.bands) {
    if (!b.provisioned) continue;
    const Band& band = *bands_.at(b.priority);
    b.flowQueues.reserve(std::min(band.active_count, limit));
    forEachNonEmpty(band, [&](const Flow* f) {
      if (totals.at(f->id).named) {
        b.flowQueues.push_back({f->id, f->items.size(), f->queued_bytes});
      } else {
        b.otherFlowsQueuedRequests += f->items.size();
        b.otherFlowsQueuedBytes += f->queued_bytes;
      }
    });
  }
}

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
