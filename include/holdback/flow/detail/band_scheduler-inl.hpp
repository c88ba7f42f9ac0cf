// Implementation of holdback/flow/detail/band_scheduler.hpp (compiled by src/flow.cpp, or
// included by flow_controller-inl.hpp in header-only mode).
#pragma once

#include "holdback/flow/detail/band_scheduler.hpp"

#include <algorithm>
#include <string>

#include "holdback/flow/detail/band_table.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

HOLDBACK_INLINE void validateBandSchedulingOptions(const FlowControllerOptions& o, Diagnostics& d) {
  validateBandScheduling(o.bandScheduling, "/bandScheduling", d);
  for (std::size_t i = 0; i < o.bands.size(); ++i) {
    validateBandWeight(o.bands[i].weight, "/bands/" + std::to_string(i) + "/weight", d);
  }
  validateBandWeight(o.defaultBand.weight, "/defaultBand/weight", d);
  if (o.defaultNegativeBand) {
    validateBandWeight(o.defaultNegativeBand->weight, "/defaultNegativeBand/weight", d);
  }
}

HOLDBACK_INLINE BandScheduler::Config BandScheduler::Config::of(const FlowControllerOptions& o) {
  Config c;
  c.options = o.bandScheduling;
  for (const BandOptions& b : o.bands) c.declared.emplace_back(b.priority, b.weight);
  std::sort(c.declared.begin(), c.declared.end());
  c.defaultWeight = o.defaultBand.weight;
  if (o.defaultNegativeBand) c.negativeWeight = o.defaultNegativeBand->weight;
  return c;
}

HOLDBACK_INLINE double BandScheduler::Config::weightOf(Priority p, std::size_t position,
                                                       std::size_t bands) const noexcept {
  double w = p < 0 && negativeWeight ? *negativeWeight : defaultWeight;
  const auto it = std::lower_bound(declared.begin(), declared.end(), p,
                                   [](const auto& e, Priority q) { return e.first < q; });
  if (it != declared.end() && it->first == p) w = it->second;
  if (w >= kMinBandWeight && w <= kMaxBandWeight) return w;
  return static_cast<double>(bands - position);  // derived: lowest 1, ..., highest n
}

HOLDBACK_INLINE void BandScheduler::planActive(const Config& config, double s,
                                               std::span<Band* const> domain,
                                               std::span<const double> ceilings,
                                               std::span<Band* const> all) noexcept {
  config_ = &config;
  domain_ = domain;
  if (virtual_time_ > (std::uint64_t{1} << 62)) rebase(all);
  const std::size_t n = std::min(domain.size(), ceilings.size());
  std::size_t gate = n;  // the first gated band: strict priority stops there
  for (std::size_t i = 0; i < n; ++i) {
    if (isGated(s, ceilings[i])) {
      gate = i;
      break;
    }
  }
  order_.clear();  // capacity from reserve(): no allocation
  for (std::size_t i = 0; i < gate; ++i) {
    Band* band = domain[i];
    if (band->queued_requests == 0) continue;
    band->wfq_pass = std::max(band->wfq_pass, virtual_time_);  // no banked credit
    // Insertion by (pass, index): equal passes go to the higher band.
    std::size_t k = order_.size();
    order_.push_back(i);
    while (k > 0 && domain[order_[k - 1]]->wfq_pass > band->wfq_pass) {
      order_[k] = order_[k - 1];
      --k;
    }
    order_[k] = i;
  }
  for (std::size_t i = 0; i < domain.size(); ++i) {
    if (i >= gate || domain[i]->queued_requests == 0) order_.push_back(i);
  }
}

HOLDBACK_INLINE void BandScheduler::advance(std::size_t i) noexcept {
  if (i >= domain_.size()) return;
  Band* band = domain_[i];
  virtual_time_ = std::max(virtual_time_, band->wfq_pass);
  const double w = config_->weightOf(band->prio, i, domain_.size());
  band->wfq_pass += static_cast<std::uint64_t>(static_cast<double>(kPassScale) / w);
}

HOLDBACK_INLINE void BandScheduler::rebase(std::span<Band* const> all) noexcept {
  // Every pass a candidate can have is >= V after its lift: shifting all by V keeps the order.
  const std::uint64_t base = virtual_time_;
  for (Band* band : all) band->wfq_pass = band->wfq_pass > base ? band->wfq_pass - base : 0;
  virtual_time_ = 0;
}

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
