// Implementation of holdback/policy/policies.hpp: compiled into libholdback by src/policy.cpp, or
// included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY, holdback::header_only).
#pragma once

#include "holdback/policy/policies.hpp"

#include <algorithm>

#include "holdback/core/text.hpp"
#include "holdback/policy/detail/policies_fields.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

HOLDBACK_INLINE bool inClosed(double v, double lo, double hi) {
  return v >= lo && v <= hi;
}

}  // namespace detail

HOLDBACK_INLINE std::string_view toString(HoldbackStrategy strategy) noexcept {
  switch (strategy) {
    case HoldbackStrategy::kStepwiseSpread:
      return "stepwise-spread";
    case HoldbackStrategy::kLinearProportional:
      return "linear-proportional";
    case HoldbackStrategy::kSigmoidSmoothed:
      return "sigmoid-smoothed";
    case HoldbackStrategy::kStatic:
      return "static";
  }
  return "unknown";
}

HOLDBACK_INLINE std::string_view toString(SigmoidDomain domain) noexcept {
  return domain == SigmoidDomain::kRank ? "rank" : "value";
}

// ---------------------------------------------------------------------------------------------

HOLDBACK_INLINE void StaticUsageLimitPolicy::validate(const StaticUsageLimitOptions& options,
                                                      const std::string& path,
                                                      Diagnostics& diagnostics) {
  checkFields<StaticUsageLimitOptions>(kStaticUsageLimitFields, options, path, diagnostics);
}

HOLDBACK_INLINE Result<std::unique_ptr<StaticUsageLimitPolicy>> StaticUsageLimitPolicy::create(
    StaticUsageLimitOptions options, std::string name) {
  Diagnostics diagnostics;
  validate(options, "", diagnostics);
  return makeIfValid<std::unique_ptr<StaticUsageLimitPolicy>>(std::move(diagnostics), [&] {
    return std::unique_ptr<StaticUsageLimitPolicy>(
        new StaticUsageLimitPolicy(options, std::move(name)));
  });
}

// ---------------------------------------------------------------------------------------------

HOLDBACK_INLINE void PriorityHoldbackPolicy::validate(const PriorityHoldbackOptions& options,
                                                      const std::string& path,
                                                      Diagnostics& diagnostics) {
  const FieldTable<PriorityHoldbackOptions> fields = kPriorityHoldbackFields;
  checkFields(fields, options, path, diagnostics);
  const bool is_static = options.strategy == HoldbackStrategy::kStatic;
  const std::string strategy = "\"" + std::string(toString(options.strategy)) + "\"";

  if (!is_static) {
    if (!options.minCeiling) {
      diagnostics.error(
          joinPath(path, "minCeiling"),
          "missing; strategy " + strategy + " requires minCeiling, a number in [0.0, 1.0)");
    } else if (!(*options.minCeiling < options.maxCeiling) && !std::isnan(options.maxCeiling)) {
      diagnostics.error(joinPath(path, "minCeiling"),
                        formatNumber(*options.minCeiling) + " is not below maxCeiling " +
                            formatNumber(options.maxCeiling) +
                            "; minCeiling must be strictly less than maxCeiling");
    }
  }

  if (!is_static) return;

  const std::string ceilings_path = joinPath(path, "ceilings");
  if (options.ceilings.empty()) {
    diagnostics.error(ceilings_path,
                      "missing or empty; strategy \"static\" requires ceilings, a non-empty map "
                      "from priority to a ceiling in [0.0, 1.0]");
  }
  std::vector<StaticCeiling> sorted = options.ceilings;
  std::stable_sort(
      sorted.begin(), sorted.end(),
      [](const StaticCeiling& a, const StaticCeiling& b) { return a.priority > b.priority; });
  bool all_valid = true;
  std::vector<StaticCeiling> valid;  // entries that passed their own checks
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const StaticCeiling& entry = sorted[i];
    const std::string entry_path = joinPath(ceilings_path, std::to_string(entry.priority));
    bool ok = true;
    if (!detail::inClosed(entry.ceiling, 0.0, 1.0)) {
      diagnostics.error(entry_path, formatNumber(entry.ceiling) + " is outside [0.0, 1.0]");
      ok = false;
    }
    if (i > 0 && sorted[i - 1].priority == entry.priority) {
      diagnostics.error(entry_path,
                        "priority " + std::to_string(entry.priority) + " is listed more than once");
      ok = false;
    }
    if (ok) valid.push_back(entry);
    all_valid = all_valid && ok;
  }
  // The boot-time priority-inversion check, over the entries that are valid on their own: every
  // offending adjacent pair is reported.
  for (std::size_t i = 1; i < valid.size(); ++i) {
    const StaticCeiling& higher = valid[i - 1];
    const StaticCeiling& lower = valid[i];
    if (lower.ceiling > higher.ceiling) {
      diagnostics.error(joinPath(ceilings_path, std::to_string(lower.priority)),
                        formatNumber(lower.ceiling) + " is above " + formatNumber(higher.ceiling) +
                            ", the ceiling of the higher priority " +
                            std::to_string(higher.priority) +
                            "; ceilings must not increase as priority decreases (priority "
                            "inversion)");
    }
  }
  if (options.defaultCeiling && fieldValid(fields, "defaultCeiling", options)) {
    const double d = *options.defaultCeiling;
    if (all_valid && !sorted.empty() && d > sorted.back().ceiling) {
      diagnostics.warning(
          joinPath(path, "defaultCeiling"),
          formatNumber(d) + " is above the lowest listed ceiling " +
              formatNumber(sorted.back().ceiling) + " (priority " +
              std::to_string(sorted.back().priority) +
              "); an unlisted priority below a listed one will lift that listed ceiling through "
              "the monotonizing sweep");
    }
  }
}

HOLDBACK_INLINE PriorityHoldbackPolicy::PriorityHoldbackPolicy(PriorityHoldbackOptions options,
                                                               std::string name)
    : UsageLimitPolicy(std::move(name)), options_(std::move(options)) {
  std::stable_sort(
      options_.ceilings.begin(), options_.ceilings.end(),
      [](const StaticCeiling& a, const StaticCeiling& b) { return a.priority > b.priority; });
  c_max_ = options_.maxCeiling;
  c_min_ = options_.minCeiling.value_or(0.0);
  sigmoid_lo_ = logistic(0.0, options_.sigmoidSteepness, options_.sigmoidMidpoint);
  sigmoid_span_ = logistic(1.0, options_.sigmoidSteepness, options_.sigmoidMidpoint) - sigmoid_lo_;
  const bool rank_domain = options_.strategy == HoldbackStrategy::kStepwiseSpread ||
                           (options_.strategy == HoldbackStrategy::kSigmoidSmoothed &&
                            options_.sigmoidDomain == SigmoidDomain::kRank);
  if (rank_domain) {
    // Rank strategies read only the list's length, so the rows are computed over dummy
    // priorities (by compute(), while rank_table_ is still empty) and swept as computeLimit()
    // would sweep them.
    std::vector<double> table(rankTableOffset(kRankTableMax + 1));
    const std::vector<Priority> dummy(kRankTableMax, 0);
    for (std::size_t n = 2; n <= kRankTableMax; ++n) {
      const std::span<double> row(table.data() + rankTableOffset(n), n);
      compute(0.0, std::span<const Priority>(dummy.data(), n), row);
      monotonize(row);
    }
    rank_table_ = std::move(table);
  }
  computes_swept_ = true;  // computeSwept(): the table, the memo, else compute() + the sweep
  if (options_.strategy == HoldbackStrategy::kStatic && !options_.ceilings.empty()) {
    const auto& entries = options_.ceilings;
    for (const StaticCeiling& e : entries) {
      static_key_.push_back(e.priority);
      static_hit_.push_back(e.ceiling);
      static_miss_.push_back(options_.defaultCeiling.value_or(e.ceiling));
    }
    static_key_.push_back(INT64_MIN);
    static_hit_.push_back(entries.back().ceiling);
    static_miss_.push_back(options_.defaultCeiling.value_or(entries.back().ceiling));
  }
}

HOLDBACK_INLINE Result<std::unique_ptr<PriorityHoldbackPolicy>> PriorityHoldbackPolicy::create(
    PriorityHoldbackOptions options, std::string name) {
  Diagnostics diagnostics;
  validate(options, "", diagnostics);
  return makeIfValid<std::unique_ptr<PriorityHoldbackPolicy>>(std::move(diagnostics), [&] {
    return std::unique_ptr<PriorityHoldbackPolicy>(
        new PriorityHoldbackPolicy(std::move(options), std::move(name)));
  });
}

// ---------------------------------------------------------------------------------------------

HOLDBACK_INLINE Result<std::unique_ptr<SoftReflectiveCeilingPolicy>>
SoftReflectiveCeilingPolicy::create(std::string name) {
  return Result<std::unique_ptr<SoftReflectiveCeilingPolicy>>(
      std::unique_ptr<SoftReflectiveCeilingPolicy>(
          new SoftReflectiveCeilingPolicy(std::move(name))));
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
