// In-flight eviction (flow/eviction.hpp): upstream's reclamation vectors (upstream-reference.md
// §3.4) through the real FlowController, pacing, timeouts, the host contract, and the two
// improvements (wait-vs-evict, footprint-aware victims).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "alloc_counter.hpp"
#include "flow_controller_fixture.hpp"
#include "holdback/detector/detectors.hpp"
#include "holdback/flow/eviction.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/metrics/prometheus.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;
using testing::FlowControllerTest;
using testing::request;
using Kind = DispatchResult::Kind;

// Ceilings by priority (1.0 for the others).
class FixedCeilingPolicy final : public UsageLimitPolicy {
 public:
  explicit FixedCeilingPolicy(std::map<Priority, double> c)
      : UsageLimitPolicy("fixed"), c_(std::move(c)) {}
  [[nodiscard]] std::string_view type() const noexcept override { return "fixed"; }

 protected:
  void compute(double, std::span<const Priority> p, std::span<double> ceilings) noexcept override {
    for (std::size_t i = 0; i < p.size(); ++i) {
      auto it = c_.find(p[i]);
      ceilings[i] = it == c_.end() ? 1.0 : it->second;
    }
  }

 private:
  std::map<Priority, double> c_;
};

class EvictionTest : public FlowControllerTest {
 protected:
  std::vector<Revocation> revoked;  // the evict callback's calls, in order
  std::function<void(const Revocation&)> onEvict;

  FlowControllerOptions evicting(
      std::shared_ptr<UsageLimitPolicy> policy = testing::staticPolicy()) {
    auto o = options(std::move(policy));
    o.bands = {{.priority = 10}, {.priority = 0}, {.priority = -1}};
    o.eviction.enabled = true;
    o.eviction.confirmationGrace = 100ms;
    o.eviction.confirmationTimeout = 5s;
    o.eviction.evict = [this](const Revocation& r) {
      revoked.push_back(r);
      if (onEvict) onEvict(r);
    };
    return o;
  }

  // Dispatches `n` requests of `priority` at saturation 0; returns their ids (oldest first).
  std::vector<RequestId> preload(FlowController& fc, std::size_t n, Priority priority,
                                 TimePoint at) {
    detector->set(0.0);
    std::vector<RequestId> ids;
    for (std::size_t i = 0; i < n; ++i) {
      fc.enqueue(request("load" + std::to_string(priority), priority), at);
      const DispatchResult r = fc.dispatchCycle(at + std::chrono::milliseconds(i));
      EXPECT_EQ(r.kind, Kind::kDispatched);
      ids.push_back(r.id);
    }
    return ids;
  }
  std::vector<std::size_t> decisions;  // revocations per cycle that revoked any
  DispatchResult cycle(FlowController& fc, TimePoint at) {
    const std::size_t before = revoked.size();
    const DispatchResult r = fc.dispatchCycle(at);
    EXPECT_EQ(r.revoked, revoked.size() - before);
    if (r.revoked > 0) decisions.push_back(r.revoked);
    return r;
  }
};

// upstream reclamation_test vectors, cap 2: (inFlight, evictable, s, c) -> EvictN calls.
struct Vector {
  std::size_t inFlight;
  std::size_t evictable;
  double s;
  std::vector<std::size_t> calls;
};

TEST_F(EvictionTest, UpstreamSizingVectors) {
  const std::vector<Vector> vectors{
      {6, 6, 1.2, {1}},    // credit 0.2, target 0.2 -> 1
      {4, 4, 2.0, {2}},    // credit 0.5, target 1.0 -> 2 (cap 2)
      {4, 1, 2.0, {1}},    // capped by evictable
      {10, 10, 1.0, {1}},  // boundary s == c: at least one
      {0, 0, 1.5, {}},     // nothing in flight
  };
  for (const Vector& v : vectors) {
    SCOPED_TRACE(std::to_string(v.inFlight) + "/" + std::to_string(v.evictable) +
                 " s=" + std::to_string(v.s));
    revoked.clear();
    decisions.clear();
    auto fc = make(evicting());
    preload(*fc, v.evictable, -1, t0);
    preload(*fc, v.inFlight - v.evictable, 0, t0);  // in flight, not sheddable
    fc->enqueue(request("hp", 10), t0 + 1s);
    detector->set(v.s);
    EXPECT_EQ(cycle(*fc, t0 + 1s).kind, Kind::kGated);
    EXPECT_EQ(decisions, v.calls);
    for (const Revocation& r : revoked) {
      EXPECT_EQ(r.priority, -1);
      EXPECT_EQ(r.demandPriority, 10);
      EXPECT_EQ(r.disposition.status, 429);
      EXPECT_EQ(r.disposition.dropReason, "evicted");
    }
  }
}

TEST_F(EvictionTest, VictimsAreNewestFirstWithinTheLowestPriority) {
  auto fc = make(evicting());
  const auto minus1 = preload(*fc, 3, -1, t0);
  const auto minus5 = preload(*fc, 2, -5, t0 + 10ms);
  preload(*fc, 1, 0, t0 + 20ms);
  fc->enqueue(request("hp", 10), t0 + 1s);
  detector->set(2.0);  // credit 2/6, target 1.0 -> 3, cap 2
  cycle(*fc, t0 + 1s);
  ASSERT_EQ(revoked.size(), 2u);
  EXPECT_EQ(revoked[0].id, minus5[1]);  // lowest priority, newest
  EXPECT_EQ(revoked[1].id, minus5[0]);
}

TEST_F(EvictionTest, OnlyDemandStrictlyAboveTheVictimTriggers) {
  // Demand at -1 (the victims' own band) never revokes (no same-band churn).
  auto fc = make(evicting());
  preload(*fc, 6, -1, t0);
  fc->enqueue(request("same", -1), t0 + 1s);
  detector->set(1.2);
  EXPECT_EQ(cycle(*fc, t0 + 1s).kind, Kind::kGated);
  EXPECT_TRUE(revoked.empty());
  // A registered but empty high band does not either.
  fc->dispatchCycle(t0 + 2s);
  EXPECT_TRUE(revoked.empty());
  // Demand at 0 above victims at -1 does.
  fc->enqueue(request("mid", 0), t0 + 3s);
  cycle(*fc, t0 + 3s);
  EXPECT_EQ(revoked.size(), 1u);
}

TEST_F(EvictionTest, UnattainableOrUnblockedDemandBandsAreSkipped) {
  // upstream maybeReclaim: s = 1.0, one queued item, 6 in flight, victims at -1.
  for (double ceiling : {0.0, 0.9}) {
    revoked.clear();
    auto fc = make(evicting());
    preload(*fc, 6, -1, t0);
    auto fixed = evicting(std::make_shared<FixedCeilingPolicy>(
        std::map<Priority, double>{{10, ceiling}, {0, ceiling}, {-1, ceiling}}));
    fixed.eviction.evict = nullptr;  // the callback from create() stays
    ASSERT_FALSE(fc->reconfigure(std::move(fixed)).hasErrors());
    fc->enqueue(request("hp", 10), t0 + 1s);
    detector->set(1.0);
    cycle(*fc, t0 + 1s);
    EXPECT_EQ(revoked.size(), ceiling == 0.0 ? 0u : 1u) << "ceiling " << ceiling;
  }
}

TEST_F(EvictionTest, StopAndWaitPacingWithGrace) {
  auto fc = make(evicting());
  const auto ids = preload(*fc, 4, -1, t0);
  fc->enqueue(request("hp", 10), t0 + 1s);
  detector->set(2.0);
  cycle(*fc, t0 + 1s);
  ASSERT_EQ(revoked.size(), 2u);
  for (int i = 1; i <= 11; ++i) cycle(*fc, t0 + 1s + std::chrono::milliseconds(i));
  EXPECT_EQ(revoked.size(), 2u);                         // outstanding: gate closed
  EXPECT_TRUE(fc->release(revoked[0].id, t0 + 1100ms));  // confirmation
  cycle(*fc, t0 + 1101ms);
  EXPECT_EQ(revoked.size(), 2u);
  EXPECT_TRUE(fc->release(revoked[1].id, t0 + 1200ms));
  cycle(*fc, t0 + 1250ms);
  EXPECT_EQ(revoked.size(), 2u);                // cooling for the grace
  EXPECT_EQ(fc->stats().eviction.cooling, 1u);  // the first one cooled off at +1200 ms
  cycle(*fc, t0 + 1301ms);        // grace elapsed: open, still blocked -> the next decision
  EXPECT_EQ(revoked.size(), 3u);  // 2 leases left: credit 1.0, target 1.0 -> 1
  const EvictionStats st = fc->stats().eviction;
  EXPECT_EQ(st.issued, 3u);
  EXPECT_EQ(st.confirmed, 2u);
  EXPECT_EQ(st.timedOut, 0u);
  EXPECT_EQ(st.outstanding, 1u);
  EXPECT_EQ(st.leaseEnds[static_cast<std::size_t>(LeaseEnd::kRevokedConfirmed)], 2u);
  EXPECT_EQ(st.confirmationBuckets[6] + st.confirmationBuckets[5], 2u);  // 100 ms and 200 ms
  EXPECT_NEAR(st.confirmationSumSeconds, 0.3, 1e-9);
  (void)ids;
}

TEST_F(EvictionTest, UnconfirmedRevocationTimesOutThenCools) {
  auto fc = make(evicting());
  preload(*fc, 4, -1, t0);
  fc->enqueue(request("hp", 10), t0 + 1s);
  detector->set(2.0);
  cycle(*fc, t0 + 1s);
  ASSERT_EQ(revoked.size(), 2u);
  cycle(*fc, t0 + 6001ms);  // timeout + 1 ms: treated as confirmed, grace restarts
  EXPECT_EQ(revoked.size(), 2u);
  EvictionStats st = fc->stats().eviction;
  EXPECT_EQ(st.timedOut, 2u);
  EXPECT_EQ(st.cooling, 2u);
  EXPECT_EQ(st.leaseEnds[static_cast<std::size_t>(LeaseEnd::kRevokedTimedOut)], 2u);
  EXPECT_FALSE(fc->release(revoked[0].id, t0 + 6050ms));  // late confirm: a no-op
  cycle(*fc, t0 + 6102ms);
  EXPECT_EQ(revoked.size(), 3u);  // open again
  st = fc->stats().eviction;
  EXPECT_EQ(st.confirmed, 0u);
  EXPECT_EQ(st.leases, 2u);  // 4 - 2 timed out (one of the two left is outstanding)
  EXPECT_EQ(st.outstanding, 1u);
}

TEST_F(EvictionTest, PendingDebitsSuppressRepeatDecisions) {
  // Zero grace: the debit of a confirmed revocation expires at once; but while it is
  // outstanding, saturated cycles issue nothing more.
  auto o = evicting();
  o.eviction.confirmationGrace = 0ms;
  auto fc = make(std::move(o));
  preload(*fc, 6, -1, t0);
  fc->enqueue(request("hp", 10), t0 + 1s);
  detector->set(1.2);
  for (int i = 0; i < 11; ++i) cycle(*fc, t0 + 1s + std::chrono::milliseconds(i));
  EXPECT_EQ(decisions, (std::vector<std::size_t>{1}));
  EXPECT_NEAR(fc->stats().eviction.pendingReclaim, 0.2, 1e-12);
  EXPECT_NEAR(fc->stats().eviction.reclaimTarget, 0.2, 1e-12);
}

TEST_F(EvictionTest, EvictCallbackRunsWithoutTheLockAndMayConfirmAtOnce) {
  auto fc = make(evicting());
  preload(*fc, 4, -1, t0);
  onEvict = [&](const Revocation& r) {
    (void)fc->stats();  // would deadlock under the controller's lock
    EXPECT_TRUE(fc->release(r.id, r.issuedAt));
  };
  fc->enqueue(request("hp", 10), t0 + 1s);
  detector->set(2.0);
  cycle(*fc, t0 + 1s);
  EXPECT_EQ(revoked.size(), 2u);
  EXPECT_EQ(fc->stats().eviction.confirmed, 2u);
  EXPECT_EQ(fc->stats().eviction.confirmationBuckets[0], 2u);
}

TEST_F(EvictionTest, ReleasedLeasesAreNeverRevokedAndRevokedOnesOnlyOnce) {
  auto o = evicting();
  o.eviction.confirmationGrace = 0ms;
  auto fc = make(std::move(o));
  const auto ids = preload(*fc, 4, -1, t0);
  EXPECT_TRUE(fc->release(ids[3], t0 + 500ms));  // the newest ended on its own
  fc->enqueue(request("hp", 10), t0 + 1s);
  detector->set(1.0);  // 3 leases, boundary -> 1
  cycle(*fc, t0 + 1s);
  ASSERT_EQ(revoked.size(), 1u);
  EXPECT_EQ(revoked[0].id, ids[2]);
  EXPECT_TRUE(fc->release(ids[2], t0 + 1010ms));
  EXPECT_FALSE(fc->release(ids[2], t0 + 1020ms));
  cycle(*fc, t0 + 1030ms);
  ASSERT_EQ(revoked.size(), 2u);
  EXPECT_EQ(revoked[1].id, ids[1]);
}

TEST_F(EvictionTest, DisabledOrWithoutVictimsNothingHappens) {
  auto o = evicting();
  o.eviction.enabled = false;
  auto fc = make(std::move(o));
  preload(*fc, 4, -1, t0);
  fc->enqueue(request("hp", 10), t0 + 1s);
  detector->set(2.0);
  cycle(*fc, t0 + 1s);
  EXPECT_TRUE(revoked.empty());
  EXPECT_FALSE(fc->stats().eviction.enabled);

  // Turned on by reconfigure (the callback from create() stays).
  auto again = evicting();
  again.eviction.evict = nullptr;
  EXPECT_FALSE(fc->reconfigure(std::move(again)).hasErrors());
  cycle(*fc, t0 + 2s);
  EXPECT_TRUE(revoked.empty());  // the leases were dispatched while leases were not kept
  EXPECT_TRUE(fc->stats().eviction.enabled);
}

TEST_F(EvictionTest, ValidationNamesPathsAndValues) {
  auto o = evicting();
  o.eviction.maxRevocationsPerDecision = 0;
  o.eviction.confirmationTimeout = 0ms;
  o.eviction.confirmationGrace = -1ms;
  o.eviction.waitForReleases = {.enabled = true, .tolerance = 0ms};
  o.eviction.evict = nullptr;
  Diagnostics d;
  FlowController::validate(o, d);
  const std::string text = d.toString();
  EXPECT_NE(text.find("/eviction/maxRevocationsPerDecision"), std::string::npos) << text;
  EXPECT_NE(text.find("between 1 and 32, but got 0"), std::string::npos) << text;
  EXPECT_NE(text.find("/eviction/confirmationTimeout"), std::string::npos) << text;
  EXPECT_NE(text.find("/eviction/confirmationGrace"), std::string::npos) << text;
  EXPECT_NE(text.find("/eviction/waitForReleases/tolerance"), std::string::npos) << text;
  EXPECT_NE(text.find("/eviction/evict"), std::string::npos) << text;

  auto r = evicting();
  r.eviction.revokeOnBlock = false;  // and restoreReserve off: nothing could ever be revoked
  r.eviction.restoreReserve.epsilon = 0.7;
  r.eviction.restoreReserve.leadTime = -1ms;
  Diagnostics dr;
  FlowController::validate(r, dr);
  const std::string rtext = dr.toString();
  EXPECT_NE(rtext.find("/eviction/revokeOnBlock"), std::string::npos) << rtext;
  EXPECT_NE(rtext.find("/eviction/restoreReserve/leadTime"), std::string::npos) << rtext;
  r.eviction.restoreReserve.burstMemory = -1s;
  Diagnostics dm;
  FlowController::validate(r, dm);
  EXPECT_NE(dm.toString().find("/eviction/restoreReserve/burstMemory"), std::string::npos)
      << dm.toString();
  EXPECT_NE(dm.toString().find("cannot be negative, but got -1s"), std::string::npos)
      << dm.toString();
  r.eviction.restoreReserve.burstMemory = 0s;
  r.eviction.restoreReserve.enabled = true;
  Diagnostics dr2;
  FlowController::validate(r, dr2);
  const std::string rtext2 = dr2.toString();
  EXPECT_EQ(rtext2.find("/eviction/revokeOnBlock"), std::string::npos) << rtext2;
  EXPECT_NE(rtext2.find("/eviction/restoreReserve/epsilon"), std::string::npos) << rtext2;
  EXPECT_NE(rtext2.find("(0, 0.5], but got 0.7"), std::string::npos) << rtext2;

  // reconfigure cannot enable eviction on a controller created without a callback.
  auto plain = make(options());
  auto enable = evicting();
  EXPECT_TRUE(plain->reconfigure(std::move(enable)).hasErrors());
}

TEST_F(EvictionTest, GraceIsDerivedFromTheDetector) {
  auto conc = std::move(ConcurrencyDetector::create({})).value();
  auto util = std::move(UtilizationDetector::create({})).value();
  EXPECT_EQ(deriveEvictionGrace(conc.get()), 10ms);
  EXPECT_EQ(deriveEvictionGrace(util.get()), 500ms);  // 50 + 200 + 250
  EXPECT_EQ(deriveEvictionGrace(util.get(), 1s), 1450ms);
  EXPECT_EQ(deriveEvictionGrace(nullptr), kDefaultEvictionConfirmationGrace);
}

TEST_F(EvictionTest, BuiltInPolicies) {
  SheddableEvictionFilter filter;
  PriorityThenTimeEvictionOrder order;
  EXPECT_EQ(filter.name(), "sheddable-eviction-filter");
  EXPECT_EQ(order.name(), "priority-then-time-eviction-order-policy");
  EXPECT_TRUE(filter.accept({.priority = -1}));
  EXPECT_FALSE(filter.accept({.priority = 0}));
  EXPECT_TRUE(filter.mayAccept(-1));
  EXPECT_FALSE(filter.mayAccept(0));
  const EvictionCandidate oldLow{1, -5, t0, 0, 0}, newLow{2, -5, t0 + 1s, 0, 0},
      newHigh{3, -1, t0 + 2s, 0, 0};
  EXPECT_TRUE(order.less(newLow, oldLow));
  EXPECT_TRUE(order.less(oldLow, newHigh));
  EXPECT_FALSE(order.less(oldLow, oldLow));
  EXPECT_EQ(toString(LeaseEnd::kRevokedTimedOut), "revoked-timed-out");
}

TEST_F(EvictionTest, WaitForReleasesEvictsOnlyTheShortfall) {
  auto o = evicting();
  o.eviction.waitForReleases = {.enabled = true, .tolerance = 200ms};
  auto fc = make(std::move(o));
  // Measure a 1 s holding time at band -1.
  const auto first = preload(*fc, 1, -1, t0);
  ASSERT_TRUE(fc->release(first[0], t0 + 1s));
  // Four leases: two dispatched at t0+1s (due at t0+2s), two at t0+1.8s (due at t0+2.8s).
  preload(*fc, 2, -1, t0 + 1s - 1ms);
  preload(*fc, 2, -1, t0 + 1800ms);
  fc->enqueue(request("hp", 10), t0 + 1850ms);
  detector->set(1.5);       // credit 0.375, target 0.5 -> 2 needed
  cycle(*fc, t0 + 1850ms);  // the two old ones are due within 200 ms: wait
  EXPECT_TRUE(revoked.empty());
  EXPECT_EQ(fc->stats().eviction.deferred, 1u);
  // They do not end. At t0+2.04s 10 ms of tolerance are left; the two old leases are overdue
  // (memoryless beyond the mean: 1 - e^-0.01 each): 2 needed, none expected.
  cycle(*fc, t0 + 2040ms);
  EXPECT_EQ(revoked.size(), 2u);
}

TEST_F(EvictionTest, WaitForReleasesWithoutHoldingTimeEvictsLikeUpstream) {
  auto o = evicting();
  o.eviction.waitForReleases = {.enabled = true, .tolerance = 200ms};
  auto fc = make(std::move(o));
  preload(*fc, 4, -1, t0);
  fc->enqueue(request("hp", 10), t0 + 1s);
  detector->set(2.0);
  cycle(*fc, t0 + 1s);
  EXPECT_EQ(revoked.size(), 2u);  // nothing measured: nothing expected
}

TEST_F(EvictionTest, FootprintAwareCoversTheDeficitDestroyingFewestTokens) {
  auto o = evicting();
  o.eviction.footprintAware = true;
  o.eviction.maxRevocationsPerDecision = 4;
  auto fc = make(std::move(o));
  const auto ids = preload(*fc, 4, -1, t0);
  // Footprints 100, 100, 400, 400 (total 1000); generated 90, 10, 50, 300.
  ASSERT_TRUE(fc->ticket(ids[0]).updateLease(100, 90));
  ASSERT_TRUE(fc->ticket(ids[1]).updateLease(100, 10));
  ASSERT_TRUE(fc->ticket(ids[2]).updateLease(400, 50));
  ASSERT_TRUE(fc->ticket(ids[3]).updateLease(400, 300));
  EXPECT_FALSE(fc->ticket(999999).updateLease(1, 1));
  fc->enqueue(request("hp", 10), t0 + 1s);
  detector->set(1.3);  // target 0.3 saturation units: ids[2] alone frees 0.52 at 50 tokens
  cycle(*fc, t0 + 1s);
  ASSERT_EQ(revoked.size(), 1u);
  // Greedy by rate would take ids[1] (10 tokens for 0.13) and ids[2] (60 tokens in all); ids[2]
  // alone covers 0.3 for 50.
  EXPECT_EQ(revoked[0].id, ids[2]);
  EXPECT_NEAR(revoked[0].credit, 0.52, 1e-12);
  EXPECT_EQ(revoked[0].generatedTokens, 50u);
}

// A lease the host parked (held back from its server: Ticket::setParked) frees no slot when
// revoked, so no decision takes it; sent (unparked), it is a victim again.
TEST_F(EvictionTest, ParkedLeasesAreNoVictimsUntilSent) {
  auto fc = make(evicting());
  const auto ids = preload(*fc, 4, -1, t0);
  for (const RequestId id : ids) ASSERT_TRUE(fc->ticket(id).setParked(true));
  EXPECT_FALSE(fc->ticket(999999).setParked(true));
  fc->enqueue(request("hp", 10), t0 + 1s);
  detector->set(2.0);
  cycle(*fc, t0 + 1s);
  EXPECT_TRUE(revoked.empty());
  ASSERT_TRUE(fc->ticket(ids[1]).setParked(false));
  cycle(*fc, t0 + 1s + 1ms);
  ASSERT_EQ(revoked.size(), 1u);
  EXPECT_EQ(revoked[0].id, ids[1]);
}

// Reserve restoration (holdback): the victims' band is over its ceiling (the policy wants room
// kept free for band 10) and band 10's arrivals during the lead time need more room than is free:
// sheddable leases are revoked before band 10 ever blocks.
class ReserveRestoreTest : public EvictionTest {
 protected:
  std::unique_ptr<FlowController> restoring(bool onBlock = false, double batchCeiling = 0.5) {
    auto o = evicting(
        std::make_shared<FixedCeilingPolicy>(std::map<Priority, double>{{-1, batchCeiling}}));
    o.eviction.revokeOnBlock = onBlock;
    o.eviction.restoreReserve = {.enabled = true, .epsilon = 0.01, .leadTime = 200ms};
    return make(std::move(o));
  }
  // Band 10 requests arriving every `gap` from `from` to `to`, a cycle every millisecond;
  // returns the cycles that found band 10 blocked.
  std::size_t arrive(FlowController& fc, TimePoint from, TimePoint to, Duration gap) {
    std::size_t blocked = 0;
    TimePoint next = from;
    for (TimePoint t = from; t < to; t += 1ms) {
      if (t >= next) {
        fc.enqueue(request("hp", 10), t);
        next += gap;
      }
      const DispatchResult r = cycle(fc, t);
      if (r.kind == Kind::kGated && r.priority == 10) ++blocked;
    }
    return blocked;
  }
};

TEST_F(ReserveRestoreTest, RevokesBeforeTheHigherBandBlocks) {
  auto fc = restoring();
  // Each decision, seen from the actuator (after the cycle, no lock held): the revocations
  // outstanding never exceed the deficit of that decision, in requests of s / leases.
  std::size_t checked = 0;
  onEvict = [&](const Revocation&) {
    const EvictionStats e = fc->stats().eviction;
    const double unit = 0.9 / static_cast<double>(e.leases);
    EXPECT_LE(static_cast<double>(e.outstanding), e.reclaimTarget / unit + 1e-9);
    ++checked;
  };
  preload(*fc, 20, -1, t0);
  detector->set(0.9);  // 20 leases: one request = 0.045; batch over its 0.5 ceiling by 8.9
  // 20/s into band 10 (lead 200 ms: 4 expected, the 1 % quantile ~ 10 requests of room wanted,
  // 2.2 free): restoration revokes; band 10 itself is never blocked (s < 1).
  EXPECT_EQ(arrive(*fc, t0 + 1s, t0 + 3s, 50ms), 0u);
  ASSERT_FALSE(revoked.empty());
  EXPECT_EQ(checked, revoked.size());
  for (const Revocation& r : revoked) {
    EXPECT_EQ(r.priority, -1);
    EXPECT_EQ(r.demandPriority, 10);
  }
  for (std::size_t n : decisions) EXPECT_LE(n, 2u);  // the cap per decision
  const EvictionStats st = fc->stats().eviction;
  EXPECT_EQ(st.restored, st.issued);
  EXPECT_EQ(st.outstanding, revoked.size());  // nothing confirmed (the sensor stays at 0.9)
  // Pipelined, not stop-and-wait: later decisions while the first revocations are outstanding
  // (each debited, above).
  EXPECT_GT(decisions.size(), 1u);
  onEvict = nullptr;
}

TEST_F(ReserveRestoreTest, ReplicaShareSplitsThePoolDeficitAndFiguresArePublished) {
  // Two controllers with the same leases and arrivals, one alone and one of eight replicas whose
  // others hold as many leases each: the replica's request unit is 1/8 of the lone one's and it
  // takes its part of the pool's deficit, so over the same window it revokes less.
  auto alone = restoring();
  auto replica = restoring();
  std::vector<Revocation> aloneRevoked;
  preload(*alone, 20, -1, t0);
  preload(*replica, 20, -1, t0);
  detector->set(0.9);
  ReplicaShare share;
  share.replicas = 8;
  share.rank = 3;
  share.others.leases = 7 * 20.0;
  replica->replicaPort().setShare(share);
  EXPECT_EQ(arrive(*alone, t0 + 1s, t0 + 3s, 50ms), 0u);
  aloneRevoked = revoked;
  revoked.clear();
  EXPECT_EQ(arrive(*replica, t0 + 1s, t0 + 3s, 50ms), 0u);
  ASSERT_FALSE(aloneRevoked.empty());
  EXPECT_LT(revoked.size(), aloneRevoked.size());
  // What the replica publishes: its own figures (its leases: the 20 batch requests and the
  // band 10 ones dispatched since, its revocations not yet confirmed, the band's arrivals).
  const ReplicaRestoreFigures mine = replica->replicaPort().restoreFigures();
  EXPECT_EQ(mine.leases, static_cast<double>(replica->stats().eviction.leases));
  EXPECT_GT(mine.leases, 20.0);
  EXPECT_GT(mine.protectedArrivalRate, 0.0);
  EXPECT_EQ(mine.pendingRevocations, static_cast<double>(revoked.size()));
}

TEST_F(ReserveRestoreTest, ReplicasPublishingTheirVictimsRevokeTheirOwnAmongThePoolsYoungest) {
  // Two replicas, this one holding 20 batch requests and the other as many. The pool's need stays
  // under ReplicaRestoreFigures::kVictims here (about 5 requests: band 10's 1 % quantile over the
  // lead time less the room free). The other replica publishes its youngest victims' dispatch
  // times: all older than this replica's (it takes the pool's whole need, its own youngest
  // first), all younger (it takes none: they are the other's to revoke), or no list (need / R by
  // rank). Without pooled arrivals (no replica feed: the replicas' deficits may differ R-fold) the
  // published lists are not used: need / R by rank.
  const auto seconds = [](TimePoint t) {
    return std::chrono::duration<double>(t.time_since_epoch()).count();
  };
  const auto share = [](bool published, double dispatchedAt, bool pooled = true) {
    ReplicaShare s;
    s.replicas = 2;
    s.rank = 0;
    s.pooledArrivals = pooled;
    s.others.leases = 20.0;
    if (published) {
      s.others.victimLists = 1.0;
      for (std::size_t k = 0; k < ReplicaRestoreFigures::kVictims; ++k) {
        s.others.addVictim(dispatchedAt);
      }
    }
    return s;
  };
  std::map<std::string, std::vector<Revocation>> by;
  std::vector<RequestId> ids;
  for (const auto& [name, s] :
       {std::pair{"older", share(true, seconds(t0) - 1000.0)},
        std::pair{"younger", share(true, seconds(t0 + 10s))}, std::pair{"split", share(false, 0.0)},
        std::pair{"unpooled", share(true, seconds(t0) - 1000.0, false)}}) {
    SCOPED_TRACE(name);
    revoked.clear();
    auto fc = restoring();
    ids = preload(*fc, 20, -1, t0);
    detector->set(0.9);
    fc->replicaPort().setShare(s);
    EXPECT_EQ(arrive(*fc, t0 + 1s, t0 + 3s, 50ms), 0u);
    by[name] = revoked;
    // What it publishes: its own victims, youngest first (the 16 youngest of the 20 not revoked;
    // preload dispatched request i at t0 + i ms).
    const ReplicaRestoreFigures mine = fc->replicaPort().restoreFigures();
    EXPECT_EQ(mine.victimLists, 1.0);
    ASSERT_EQ(mine.victimCount, std::min(ReplicaRestoreFigures::kVictims, 20 - revoked.size()));
    const auto youngest = static_cast<int>(ids.size() - 1 - revoked.size());
    EXPECT_DOUBLE_EQ(mine.victimDispatchTimes[0],
                     seconds(t0 + std::chrono::milliseconds(youngest)));
    for (std::size_t k = 1; k < mine.victimCount; ++k) {
      EXPECT_GT(mine.victimDispatchTimes[k - 1], mine.victimDispatchTimes[k]);
    }
  }
  EXPECT_TRUE(by["younger"].empty());
  ASSERT_FALSE(by["split"].empty());
  EXPECT_GT(by["older"].size(), by["split"].size());
  EXPECT_EQ(by["unpooled"].size(), by["split"].size());
  // Its own youngest: the last ones dispatched, newest first.
  for (std::size_t k = 0; k < by["older"].size(); ++k) {
    EXPECT_EQ(by["older"][k].id, ids[ids.size() - 1 - k]);
  }
}

TEST_F(ReserveRestoreTest, ADeferredRevocationIsTakenOverWhenTheNextShareStillNeedsIt) {
  // The other replica's 16 published victims are all younger, so the pool's youngest are its
  // own: this replica leaves the revocations to it. Installed again (the next sync rounds) with
  // the same figures, the other has revoked nothing (its pending revocations are still 0) and the
  // pool is still short: this replica then leaves those victims out and revokes its own youngest
  // once they come next (and not before the first round).
  const auto seconds = [](TimePoint t) {
    return std::chrono::duration<double>(t.time_since_epoch()).count();
  };
  ReplicaShare s;
  s.replicas = 2;
  s.rank = 0;
  s.pooledArrivals = true;
  s.others.leases = 20.0;
  s.others.victimLists = 1.0;
  for (std::size_t k = 0; k < ReplicaRestoreFigures::kVictims; ++k) {
    s.others.addVictim(seconds(t0 + 10s));
  }
  auto fc = restoring();
  const std::vector<RequestId> ids = preload(*fc, 20, -1, t0);
  detector->set(0.9);
  fc->replicaPort().setShare(s);
  EXPECT_EQ(arrive(*fc, t0 + 1s, t0 + 2s, 50ms), 0u);
  EXPECT_TRUE(revoked.empty());  // left to the other replica
  // Round after round with the same figures: each leaves out the other's youngest `need` more,
  // until the next of the pool's youngest are this replica's (after the other's 16).
  TimePoint t = t0 + 2s;
  int rounds = 0;
  for (; rounds < 20 && revoked.empty(); ++rounds, t += 100ms) {
    fc->replicaPort().setShare(s);
    EXPECT_EQ(arrive(*fc, t, t + 100ms, 50ms), 0u);
  }
  ASSERT_FALSE(revoked.empty());
  EXPECT_GT(rounds, 1);                       // not at the first round after deferring
  EXPECT_EQ(revoked.front().id, ids.back());  // its own youngest
}

TEST_F(ReserveRestoreTest, QuietWithoutHigherBandArrivalsOrWhileTheReserveIsIntact) {
  auto fc = restoring();
  preload(*fc, 20, -1, t0);
  detector->set(0.9);  // over the batch ceiling, but nobody above arrives: room wanted 1 < 2.2
  for (int i = 0; i < 1000; ++i) cycle(*fc, t0 + 1s + std::chrono::milliseconds(i));
  EXPECT_TRUE(revoked.empty());
  detector->set(0.45);  // under the batch ceiling: the policy's reserve is intact
  EXPECT_EQ(arrive(*fc, t0 + 2s, t0 + 4s, 50ms), 0u);
  EXPECT_TRUE(revoked.empty());
  EXPECT_EQ(fc->stats().eviction.restored, 0u);
}

// Burst memory: after a burst into band 10 and 30 s without arrivals, the arrival estimate has
// fallen to about nothing, so plain restoration sees no need for room (as in the test above);
// with a memory of 60 s it restores room for about 60 % of the last burst's rate (20/s) and
// revokes; a memory of 1 s has forgotten the burst.
TEST_F(ReserveRestoreTest, BurstMemoryRestoresForTheLastBurstAfterTheEstimateHasFallen) {
  struct Case {
    Duration memory;
    bool revokes;
  };
  for (const Case c : {Case{0s, false}, Case{60s, true}, Case{1s, false}}) {
    SCOPED_TRACE(std::to_string(c.memory.count()) + " ns");
    revoked.clear();
    decisions.clear();
    auto o = evicting(std::make_shared<FixedCeilingPolicy>(std::map<Priority, double>{{-1, 0.5}}));
    o.eviction.revokeOnBlock = false;
    o.eviction.restoreReserve = {
        .enabled = true, .epsilon = 0.01, .leadTime = 200ms, .burstMemory = c.memory};
    auto fc = make(std::move(o));
    preload(*fc, 20, -1, t0);
    detector->set(0.45);  // under the batch ceiling: the reserve is intact, nothing to restore
    // The burst: 20/s into band 10 for 2 s, each request released 1 ms after its dispatch.
    TimePoint t = t0 + 1s;
    for (int i = 0; i < 2000; ++i, t += 1ms) {
      if (i % 50 == 0) fc->enqueue(request("hp", 10), t);
      const DispatchResult r = cycle(*fc, t);
      if (r.kind == Kind::kDispatched) {
        EXPECT_TRUE(fc->release(r.id, t + 1ms));
      }
    }
    for (int i = 0; i < 3000; ++i, t += 10ms) cycle(*fc, t);  // 30 s, no arrivals
    EXPECT_TRUE(revoked.empty());
    // Batch over its ceiling by 8.9 requests, 2.2 free for band 10.
    detector->set(0.9);
    for (int i = 0; i < 100; ++i, t += 1ms) cycle(*fc, t);
    EXPECT_EQ(!revoked.empty(), c.revokes);
    for (const Revocation& r : revoked) EXPECT_EQ(r.priority, -1);
    for (std::size_t n : decisions) EXPECT_LE(n, 2u);
  }
}

// The eviction budget: restoration revokes at most evictionBurst + evictionBudget per band 10
// request started (here 1 + 0.05 x 40), where without it the same arrivals revoke more; the
// decisions it cut short are counted.
TEST_F(ReserveRestoreTest, TheEvictionBudgetCapsRevocationsPerProtectedRequest) {
  auto run = [&](double budget) {
    revoked.clear();
    auto o = evicting(std::make_shared<FixedCeilingPolicy>(std::map<Priority, double>{{-1, 0.5}}));
    o.eviction.revokeOnBlock = false;
    o.eviction.restoreReserve = {.enabled = true, .epsilon = 0.01, .leadTime = 200ms};
    o.eviction.restoreReserve.evictionBudget = budget;
    o.eviction.restoreReserve.evictionBurst = 1.0;
    auto fc = make(std::move(o));
    preload(*fc, 20, -1, t0);
    detector->set(0.9);
    EXPECT_EQ(arrive(*fc, t0 + 1s, t0 + 3s, 50ms), 0u);
    return fc->stats().eviction;
  };
  const EvictionStats free = run(0.0);
  const std::size_t unbudgeted = revoked.size();
  EXPECT_EQ(free.budgetWithheld, 0u);
  const EvictionStats capped = run(0.05);
  const double protectedStarted = static_cast<double>(capped.leasesStarted) - 20.0;
  ASSERT_GE(protectedStarted, 30.0);
  EXPECT_GE(revoked.size(), 1u);
  EXPECT_LE(static_cast<double>(revoked.size()), 1.0 + 0.05 * protectedStarted);
  EXPECT_GT(unbudgeted, revoked.size() + 1);
  EXPECT_GT(capped.budgetWithheld, 0u);
  // The same count in the Prometheus text.
  FlowControllerStats shown;
  shown.eviction = capped;
  const std::string text = renderPrometheus(shown, "p");
  EXPECT_NE(
      text.find("holdback_flow_control_restoration_budget_withheld_total{inference_pool=\"p\"} " +
                std::to_string(capped.budgetWithheld) + "\n"),
      std::string::npos)
      << text;
}

// The waste budget: a bucket of 1 ms of slot time allows one revocation (its victim held its slot
// for about a second, which overdraws it); nothing more is revoked until batch requests that
// end on their own pay the overdraft back (0.5 x their slot time), and then restoration resumes.
TEST_F(ReserveRestoreTest, TheWasteBudgetWaitsForCompletedSheddableWork) {
  auto o = evicting(std::make_shared<FixedCeilingPolicy>(std::map<Priority, double>{{-1, 0.5}}));
  o.eviction.revokeOnBlock = false;
  o.eviction.restoreReserve = {.enabled = true, .epsilon = 0.01, .leadTime = 200ms};
  o.eviction.restoreReserve.wasteBudget = 0.5;
  o.eviction.restoreReserve.wasteBurst = 1ms;
  auto fc = make(std::move(o));
  const std::vector<RequestId> batch = preload(*fc, 20, -1, t0);
  detector->set(0.9);
  EXPECT_EQ(arrive(*fc, t0 + 1s, t0 + 3s, 50ms), 0u);
  ASSERT_EQ(revoked.size(), 1u);
  EXPECT_GT(fc->stats().eviction.budgetWithheld, 0u);
  // Four batch requests end on their own after 3 s each: 6 s earned, capped at 1 ms (> 0).
  std::size_t ended = 0;
  for (const RequestId id : batch) {
    if (ended == 4) break;
    if (id == revoked.front().id) continue;
    EXPECT_TRUE(fc->release(id, t0 + 3s));
    ++ended;
  }
  EXPECT_EQ(arrive(*fc, t0 + 3s, t0 + 4s, 50ms), 0u);
  EXPECT_EQ(revoked.size(), 2u);
}

TEST_F(ReserveRestoreTest, WithoutTheBlockTriggerAHeadOfLineBlockRevokesNothingByItself) {
  for (const bool onBlock : {false, true}) {
    SCOPED_TRACE(onBlock ? "revokeOnBlock" : "restore only");
    revoked.clear();
    decisions.clear();
    // Every ceiling 1.0: no reserve to restore, so only upstream's trigger can revoke.
    auto fc = restoring(onBlock, 1.0);
    preload(*fc, 4, -1, t0);
    fc->enqueue(request("hp", 10), t0 + 1s);
    detector->set(1.0);
    EXPECT_EQ(cycle(*fc, t0 + 1s).kind, Kind::kGated);
    EXPECT_EQ(revoked.empty(), !onBlock);
  }
}

// The budgets hold restoration back, never upstream's trigger: with an eviction budget of one
// revocation that the first head-of-line revocation spends, the next block still revokes.
TEST_F(ReserveRestoreTest, TheBudgetsNeverHoldAHeadOfLineRevocationBack) {
  auto o = evicting(std::make_shared<FixedCeilingPolicy>(std::map<Priority, double>{{-1, 1.0}}));
  o.eviction.revokeOnBlock = true;
  o.eviction.restoreReserve = {.enabled = true, .epsilon = 0.01, .leadTime = 200ms};
  o.eviction.restoreReserve.evictionBudget = 0.01;
  o.eviction.restoreReserve.evictionBurst = 1.0;
  auto fc = make(std::move(o));
  preload(*fc, 8, -1, t0);
  fc->enqueue(request("hp", 10), t0 + 1s);
  detector->set(1.0);
  EXPECT_EQ(cycle(*fc, t0 + 1s).kind, Kind::kGated);
  ASSERT_EQ(revoked.size(), 1u);
  EXPECT_TRUE(fc->release(revoked.front().id, t0 + 1s + 10ms));  // confirmed; the block stays
  EXPECT_EQ(cycle(*fc, t0 + 1s + 200ms).kind, Kind::kGated);     // after the 100 ms grace
  EXPECT_EQ(revoked.size(), 2u);
  EXPECT_EQ(fc->stats().eviction.restored, 0u);
}

// The Prometheus text tells the two triggers apart: restoration's revocations under
// reason="reserve", the head-of-line block's under reason="blocked".
TEST_F(ReserveRestoreTest, PrometheusCountsEachTriggerUnderItsReason) {
  const auto count = [](const std::string& text, const std::string& reason) {
    const std::string key =
        "holdback_flow_control_revocations_by_reason_total{reason=\"" + reason + "\",";
    const auto at = text.find(key);
    if (at == std::string::npos) return std::string("absent");
    const auto value = text.find("} ", at) + 2;
    return text.substr(value, text.find('\n', value) - value);
  };
  {
    auto fc = restoring();
    preload(*fc, 20, -1, t0);
    detector->set(0.9);
    arrive(*fc, t0 + 1s, t0 + 3s, 50ms);
    const EvictionStats st = fc->stats().eviction;
    ASSERT_GT(st.restored, 0u);
    const std::string text = renderPrometheus(fc->stats(), "p");
    EXPECT_EQ(count(text, "reserve"), std::to_string(st.restored)) << text;
    EXPECT_EQ(count(text, "blocked"), "0") << text;
  }
  revoked.clear();
  {
    auto fc = restoring(/*onBlock=*/true, /*batchCeiling=*/1.0);  // no reserve: blocks only
    preload(*fc, 4, -1, t0);
    fc->enqueue(request("hp", 10), t0 + 1s);
    detector->set(1.0);
    cycle(*fc, t0 + 1s);
    const EvictionStats st = fc->stats().eviction;
    ASSERT_GT(st.issued, 0u);
    EXPECT_EQ(st.restored, 0u);
    const std::string text = renderPrometheus(fc->stats(), "p");
    EXPECT_EQ(count(text, "blocked"), std::to_string(st.issued)) << text;
    EXPECT_EQ(count(text, "reserve"), "0") << text;
  }
}

TEST_F(EvictionTest, GatedCyclesWithEvictionDoNotAllocate) {
  auto fc = make(evicting());
  preload(*fc, 8, -1, t0);
  fc->enqueue(request("hp", 10), t0 + 1s);
  detector->set(1.5);
  cycle(*fc, t0 + 1s);  // warm-up: scratch sized, first decision
  ASSERT_FALSE(revoked.empty());
  revoked.reserve(64);
  for (const Revocation& r : std::vector<Revocation>(revoked)) fc->release(r.id, t0 + 1010ms);
  testing::AllocationCounter counter;
  for (int i = 0; i < 500; ++i) fc->dispatchCycle(t0 + 1200ms + std::chrono::milliseconds(i));
  EXPECT_EQ(counter.count(), 0u);
}

}  // namespace
}  // namespace holdback
