// Mixed pools: the pool section's groups form and the PoolSpec helpers over groups
// (src/sim/scenario.hpp).
#include <array>
#include <string>
#include <string_view>

#include "sim/scenario.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {

std::vector<EndpointGroup> PoolSpec::endpointGroups() const {
  if (!groups.empty()) return groups;
  return {EndpointGroup{.endpoints = endpoints,
                        .slots = slots,
                        .kvCapacityTokens = kvCapacityTokens,
                        .timing = timing()}};
}

std::vector<EndpointGroup> PoolSpec::endpointSpecs() const {
  std::vector<EndpointGroup> out;
  for (EndpointGroup g : endpointGroups()) {
    const int n = g.endpoints;
    g.endpoints = 1;
    for (int i = 0; i < n; ++i) out.push_back(g);
  }
  return out;
}

std::int64_t PoolSpec::totalSlots() const {
  std::int64_t total = 0;
  for (const EndpointGroup& g : endpointGroups()) {
    total += static_cast<std::int64_t>(g.endpoints) * g.slots;
  }
  return total;
}

std::int64_t PoolSpec::totalKvCapacityTokens() const {
  std::int64_t total = 0;
  for (const EndpointGroup& g : endpointGroups()) {
    total += static_cast<std::int64_t>(g.endpoints) * g.kvCapacityTokens;
  }
  return total;
}

Scenario mixedPoolScenario() {
  Scenario s;
  // A built-in name: found by construction (a test runs every built-in scenario).
  [[maybe_unused]] const bool found = findScenario("burst-after-idle", s);
  s.name = "mixed-pool";
  // Two H100-like servers beside four L4-like ones: 176 slots, 73 % of them on the large two.
  s.pool.groups = {
      {.endpoints = 2,
       .slots = 64,
       .kvCapacityTokens = 131072,
       .timing = {.prefillBaseMs = 5.0,
                  .prefillPerTokenMs = 0.02,
                  .tpotBaseMs = 4.0,
                  .tpotPerRunningMs = 0.08}},
      {.endpoints = 4,
       .slots = 12,
       .kvCapacityTokens = 16384,
       .timing = {.prefillBaseMs = 10.0,
                  .prefillPerTokenMs = 0.1,
                  .tpotBaseMs = 10.0,
                  .tpotPerRunningMs = 0.5}},
  };
  const EndpointGroup& first = s.pool.groups.front();
  s.pool.endpoints = 6;
  s.pool.slots = first.slots;
  s.pool.kvCapacityTokens = first.kvCapacityTokens;
  s.pool.prefillBaseMs = first.timing.prefillBaseMs;
  s.pool.prefillPerTokenMs = first.timing.prefillPerTokenMs;
  s.pool.tpotBaseMs = first.timing.tpotBaseMs;
  s.pool.tpotPerRunningMs = first.timing.tpotPerRunningMs;
  // The burst-after-idle story scaled to the pool: bursts of 56 req/s (about 40 % of what it
  // serves of interactive alone), standard 7 req/s, a batch backlog of 1100.
  for (TrafficClass& c : s.classes) {
    if (c.name == "interactive") c.arrival.rate = 56.0;
    if (c.name == "interactive") c.arrival.offRate = 2.0;
    if (c.name == "standard") c.arrival.rate = 7.0;
    if (c.name == "batch") c.arrival.backlog = 1100;
  }
  return s;
}

std::string describePool(const PoolSpec& pool) {
  std::string out;
  for (const EndpointGroup& g : pool.endpointGroups()) {
    if (!out.empty()) out += " + ";
    out += std::to_string(g.endpoints) + " endpoints x " + std::to_string(g.slots) + " slots";
  }
  return out;
}

namespace {

// The single-group keys the groups form replaces.
constexpr std::array<std::string_view, 7> kGroupKeys = {
    "endpoints",         "slots",      "kvCapacityTokens", "prefillBaseMs",
    "prefillPerTokenMs", "tpotBaseMs", "tpotPerRunningMs"};

void readTime(config::ParamReader& r, std::string_view key, double& out, bool allowZero) {
  if (auto v = r.number(key)) {
    if (!((allowZero ? *v >= 0.0 : *v > 0.0) && *v <= 1e6)) {
      r.error(key, config::formatNumber(*v) + " is out of range; expected a number " +
                       (allowZero ? ">= 0" : "> 0") + " and <= 1e6");
    } else {
      out = *v;
    }
  }
}

}  // namespace

void readPoolGroups(config::ParamReader& pool, PoolSpec& out) {
  const config::Json* groups = pool.value("groups");
  if (groups == nullptr) return;
  for (std::string_view key : kGroupKeys) {
    if (pool.has(key)) {
      pool.error(key,
                 "a pool has either groups or the single-group keys (endpoints, slots, "
                 "kvCapacityTokens and the service times), not both: move it into a group "
                 "of /pool/groups");
    }
  }
  if (!groups->is_array() || groups->empty()) {
    pool.error("groups", (groups->is_array() ? std::string("an empty list")
                                             : config::mismatch(*groups, "a list")) +
                             "; expected a non-empty list of endpoint groups, e.g. [{endpoints: "
                             "2, slots: 64, kvCapacityTokens: 131072}]");
    return;
  }
  std::vector<EndpointGroup> read;
  std::int64_t total = 0;
  bool ok = true;
  for (std::size_t i = 0; i < groups->size(); ++i) {
    config::ParamReader gr(&(*groups)[i], pool.pathOf("groups") + "/" + std::to_string(i),
                           pool.diagnostics());
    if (!gr.valid()) {
      ok = false;
      continue;
    }
    EndpointGroup g;
    if (auto v = gr.integer("endpoints", 1, 100'000)) {
      g.endpoints = static_cast<int>(*v);
    } else {
      if (!gr.has("endpoints"))
        gr.error("endpoints", "missing; expected an integer in [1, 100000]");
      ok = false;
    }
    if (auto v = gr.integer("slots", 1, 100'000)) g.slots = static_cast<int>(*v);
    if (auto v = gr.integer("kvCapacityTokens", 1, 1'000'000'000'000)) g.kvCapacityTokens = *v;
    readTime(gr, "prefillBaseMs", g.timing.prefillBaseMs, true);
    readTime(gr, "prefillPerTokenMs", g.timing.prefillPerTokenMs, true);
    readTime(gr, "tpotBaseMs", g.timing.tpotBaseMs, false);
    readTime(gr, "tpotPerRunningMs", g.timing.tpotPerRunningMs, true);
    gr.finish();
    total += g.endpoints;
    read.push_back(g);
  }
  if (total > 100'000) {
    pool.error("groups", std::to_string(total) +
                             " endpoints over all groups; expected at most 100000 in total");
    ok = false;
  }
  if (!ok || pool.diagnostics().hasErrors()) return;
  out.groups = std::move(read);
  const EndpointGroup& first = out.groups.front();
  out.endpoints = static_cast<int>(total);
  out.slots = first.slots;
  out.kvCapacityTokens = first.kvCapacityTokens;
  out.prefillBaseMs = first.timing.prefillBaseMs;
  out.prefillPerTokenMs = first.timing.prefillPerTokenMs;
  out.tpotBaseMs = first.timing.tpotBaseMs;
  out.tpotPerRunningMs = first.timing.tpotPerRunningMs;
}

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
