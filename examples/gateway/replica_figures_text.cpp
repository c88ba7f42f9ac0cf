#include "replica_figures_text.hpp"

#include <chrono>
#include <cstdio>
#include <limits>
#include <vector>

#include "holdback/core/types.hpp"

namespace holdback::gateway {

double wallMinusSteadySeconds() {
  const auto wall = std::chrono::system_clock::now().time_since_epoch();
  const auto steady = Clock::now().time_since_epoch();
  return std::chrono::duration<double>(wall).count() -
         std::chrono::duration<double>(steady).count();
}

namespace {

// `x` within [0, hi]; NaN: 0.
double bounded(double x, double hi) {
  return x > 0.0 ? (x < hi ? x : hi) : 0.0;
}

// The text's tokens (single spaces between them); false when it has empty ones (leading,
// trailing or doubled spaces, an empty text) or more than `max`.
bool tokens(std::string_view text, std::vector<std::string_view>& out, std::size_t max,
            RejectReason& why) {
  out.clear();
  std::size_t at = 0;
  for (;;) {
    const std::size_t space = text.find(' ', at);
    const std::string_view token =
        text.substr(at, space == std::string_view::npos ? std::string_view::npos : space - at);
    if (token.empty()) {
      why = RejectReason::kMalformed;
      return false;
    }
    if (out.size() == max) {
      why = RejectReason::kTooMany;
      return false;
    }
    out.push_back(token);
    if (space == std::string_view::npos) return true;
    at = space + 1;
  }
}

}  // namespace

std::string formatRestoreFigures(const ReplicaRestoreFigures& f, double wallMinusSteady) {
  constexpr double kMax = ReplicaInputLimits::kMaxFigure;
  char buf[160];
  std::snprintf(buf, sizeof buf, "%.9g %.9g %.9g %.9g %.9g %zu",
                bounded(f.protectedArrivalRate, kMax), bounded(f.completionRate, kMax),
                bounded(f.pendingRevocations, kMax), bounded(f.leases, kMax),
                bounded(f.victimLists, 1.0), f.victimsUsed());
  std::string text = buf;
  for (std::size_t k = 0; k < f.victimsUsed(); ++k) {
    std::snprintf(buf, sizeof buf, " %.6f", f.victimDispatchTimes[k] + wallMinusSteady);
    text += buf;
  }
  std::snprintf(buf, sizeof buf, " %zu", f.headsUsed());
  text += buf;
  for (std::size_t k = 0; k < f.headsUsed(); ++k) {
    std::snprintf(buf, sizeof buf, " %lld %.6f", static_cast<long long>(f.headPriorities[k]),
                  f.headEnqueueTimes[k] + wallMinusSteady);
    text += buf;
  }
  return text;
}

bool parseRestoreFigures(std::string_view text, double wallMinusSteady, double nowWall,
                         ReplicaRestoreFigures& out, RejectReason& why) {
  using L = ReplicaInputLimits;
  if (text.size() > L::kMaxFiguresBytes) {
    why = RejectReason::kTooLong;
    return false;
  }
  constexpr std::size_t kMaxTokens =
      4 + 2 + ReplicaRestoreFigures::kVictims + 1 + 2 * ReplicaRestoreFigures::kHeads;
  std::vector<std::string_view> t;
  t.reserve(kMaxTokens);
  if (!tokens(text, t, kMaxTokens, why)) return false;
  if (t.size() < 4) {
    why = RejectReason::kMalformed;
    return false;
  }
  double f[4] = {};
  for (int i = 0; i < 4; ++i) {
    if (!parseBoundedDouble(t[i], 0.0, L::kMaxFigure, f[i], why)) return false;
  }
  ReplicaRestoreFigures read{f[0], f[1], f[2], f[3]};
  // A wall-clock time in the window around now, on this controller's clock.
  const auto time = [&](std::string_view token, double& seconds) {
    double wall = 0.0;
    if (!parseBoundedDouble(token, -std::numeric_limits<double>::max(),
                            std::numeric_limits<double>::max(), wall, why)) {
      return false;
    }
    if (wall < nowWall - L::kMaxTimeBehind || wall > nowWall + L::kMaxTimeAhead) {
      why = RejectReason::kTime;
      return false;
    }
    seconds = wall - wallMinusSteady;
    return true;
  };
  std::size_t at = 4;
  if (at < t.size()) {  // the victim list
    std::int64_t count = 0;
    if (t.size() < at + 2) {
      why = RejectReason::kMalformed;
      return false;
    }
    if (!parseBoundedDouble(t[at], 0.0, 1.0, read.victimLists, why) ||
        !parseBoundedInt(t[at + 1], 0, std::numeric_limits<std::int64_t>::max(), count, why)) {
      return false;
    }
    if (count > static_cast<std::int64_t>(ReplicaRestoreFigures::kVictims)) {
      why = RejectReason::kTooMany;
      return false;
    }
    at += 2;
    if (t.size() < at + static_cast<std::size_t>(count)) {
      why = RejectReason::kMalformed;
      return false;
    }
    for (std::int64_t k = 0; k < count; ++k) {
      double seconds = 0.0;
      if (!time(t[at++], seconds)) return false;
      read.addVictim(seconds);
    }
  }
  if (at < t.size()) {  // the queue heads
    std::int64_t heads = 0;
    if (!parseBoundedInt(t[at], 0, std::numeric_limits<std::int64_t>::max(), heads, why)) {
      return false;
    }
    if (heads > static_cast<std::int64_t>(ReplicaRestoreFigures::kHeads)) {
      why = RejectReason::kTooMany;
      return false;
    }
    ++at;
    if (t.size() != at + 2 * static_cast<std::size_t>(heads)) {
      why = RejectReason::kMalformed;
      return false;
    }
    for (std::int64_t h = 0; h < heads; ++h) {
      std::int64_t priority = 0;
      double seconds = 0.0;
      if (!parseBoundedInt(t[at], std::numeric_limits<Priority>::min(),
                           std::numeric_limits<Priority>::max(), priority, why) ||
          !time(t[at + 1], seconds)) {
        return false;
      }
      at += 2;
      read.addHead(priority, seconds);
    }
  }
  if (at != t.size()) {
    why = RejectReason::kMalformed;
    return false;
  }
  out = read;
  return true;
}

}  // namespace holdback::gateway
