#include "replica_figures_text.hpp"

#include <chrono>
#include <cstdio>

#include "holdback/core/types.hpp"

namespace holdback::gateway {

double wallMinusSteadySeconds() {
  const auto wall = std::chrono::system_clock::now().time_since_epoch();
  const auto steady = Clock::now().time_since_epoch();
  return std::chrono::duration<double>(wall).count() -
         std::chrono::duration<double>(steady).count();
}

std::string formatRestoreFigures(const ReplicaRestoreFigures& f, double wallMinusSteady) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.9g %.9g %.9g %.9g %.9g %zu", f.protectedArrivalRate,
                f.completionRate, f.pendingRevocations, f.leases, f.victimLists, f.victimsUsed());
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

bool parseRestoreFigures(std::string_view view, double wallMinusSteady,
                         ReplicaRestoreFigures& out) {
  const std::string text(view);  // sscanf needs the terminating NUL
  const auto clean = [](double x) { return x > 0.0 && x < 1e300 ? x : 0.0; };  // also NaN
  double f[4] = {};
  int used = 0;
  if (std::sscanf(text.c_str(), "%lf %lf %lf %lf%n", &f[0], &f[1], &f[2], &f[3], &used) != 4) {
    return false;
  }
  out = ReplicaRestoreFigures{clean(f[0]), clean(f[1]), clean(f[2]), clean(f[3])};
  const char* p = text.c_str() + used;
  double lists = 0.0;
  unsigned count = 0;
  int n = 0;
  if (std::sscanf(p, "%lf %u%n", &lists, &count, &n) != 2) return true;  // no victim list
  p += n;
  out.victimLists = clean(lists);
  unsigned k = 0;
  for (; k < count && k < ReplicaRestoreFigures::kVictims; ++k) {
    double wall = 0.0;
    if (std::sscanf(p, "%lf%n", &wall, &n) != 1) break;
    p += n;
    out.addVictim(wall - wallMinusSteady);
  }
  // The queue heads follow a complete list only (where a list is cut short, its tail is unknown).
  unsigned heads = 0;
  if (k != count || std::sscanf(p, "%u%n", &heads, &n) != 1) return true;
  p += n;
  for (unsigned h = 0; h < heads; ++h) {  // ends at the text's end; addHead keeps kHeads
    long long priority = 0;
    double wall = 0.0;
    if (std::sscanf(p, "%lld %lf%n", &priority, &wall, &n) != 2) break;
    p += n;
    out.addHead(priority, wall - wallMinusSteady);  // a non-finite time is ignored
  }
  return true;
}

}  // namespace holdback::gateway
