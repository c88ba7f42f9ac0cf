// detail::BandTable internals: the flow-id order of the active set compares an 8-byte
// prefix first; it must order exactly as the string comparison it replaced, for every input. A
// flow's queue (an intrusive treap) must keep exactly the order of the band's ordering policy,
// ties by arrival sequence, under random inserts and removals, for every ordering policy. The
// band's flow index (open addressing, backward-shift erasure) finds exactly the flows it holds,
// and its head index (a treap over the flows) always has the best head first; a round-robin band,
// which keeps no head index, finds the same best head by a scan.
// detail/ headers are not self-contained in header-only mode (band_table.hpp reaches
// flow_controller.hpp, whose -inl includes band_table-inl.hpp): enter through the public header.
#include "holdback/flow/flow_controller.hpp"
// (a separate block, so that include sorting keeps the order)
#include "holdback/flow/detail/band_table.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "holdback/flow/plugins/slo_deadline_ordering.hpp"

namespace holdback {
namespace {

TEST(BandTableTest, IdPrefixOrderMatchesStringOrderOnFuzzedIds) {
  std::mt19937_64 rng(1919);
  // A small alphabet with NUL and a high byte, so prefixes collide, ids share prefixes and
  // unsigned/signed char order would differ.
  const char alphabet[] = {'\0', 'a', 'b', 'f', '-', '1', static_cast<char>(0xff)};
  std::uniform_int_distribution<int> length(0, 12);
  std::uniform_int_distribution<int> letter(0, static_cast<int>(sizeof(alphabet)) - 1);
  const auto randomId = [&] {
    std::string s(static_cast<std::size_t>(length(rng)), 'a');
    for (char& c : s) c = alphabet[letter(rng)];
    return s;
  };
  const detail::IdLess less;
  for (int round = 0; round < 200000; ++round) {
    const std::string a = randomId();
    const std::string b = round % 3 == 0 ? a + randomId() : randomId();
    const std::string_view va = a;
    const std::string_view vb = b;
    ASSERT_EQ(less(va, vb), va < vb) << round;
    ASSERT_EQ(less(vb, va), vb < va) << round;
  }
}

// A host's own ordering: larger requests first.
class LargestFirst final : public OrderingPolicy {
 public:
  std::string_view type() const noexcept override { return "largest-first"; }
  bool less(const QueuedRequestView& a, const QueuedRequestView& b) const noexcept override {
    return a.sizeBytes > b.sizeBytes;
  }
};

// Checks the treap's links: parent pointers match, the in-order walk visits `size` records.
void expectLinked(const detail::ItemQueue& q, std::size_t size) {
  std::size_t n = 0;
  q.forEach([&](detail::Item* it) {
    if (it->left != nullptr) {
      EXPECT_EQ(it->left->parent, it);
    }
    if (it->right != nullptr) {
      EXPECT_EQ(it->right->parent, it);
    }
    ++n;
  });
  EXPECT_EQ(n, size);
}

void fuzzQueue(std::shared_ptr<const OrderingPolicy> ordering, std::uint64_t seed) {
  SCOPED_TRACE(std::string(ordering->type()));
  detail::Band band(7, 0, 0, nullptr, ordering);
  detail::Flow flow("flow", &band, band.itemLess());
  std::mt19937_64 rng(seed);
  std::vector<std::unique_ptr<detail::FullItem>> storage;
  std::vector<detail::Item*> queued;  // the reference, kept sorted
  const auto referenceLess = [&](const detail::Item* a, const detail::Item* b) {
    const QueuedRequestView va = detail::makeView(*a);
    const QueuedRequestView vb = detail::makeView(*b);
    if (ordering->less(va, vb)) return true;
    if (ordering->less(vb, va)) return false;
    return a->sequence < b->sequence;
  };
  const TimePoint t0{};
  std::uint64_t sequence = 0;
  for (int step = 0; step < 6000; ++step) {
    const bool add = queued.empty() || rng() % 100 < 55;
    if (add) {
      auto item = std::make_unique<detail::FullItem>();
      item->flags = detail::Item::kFullKind;
      item->flow = &flow;
      item->sequence = ++sequence;
      // Few distinct values, so ties (and the sequence tie-break) are frequent; times go
      // mostly forward, as arrivals do, with some out of order.
      item->enqueueTime = t0 + std::chrono::milliseconds(step / 4 - static_cast<int>(rng() % 3));
      item->effectiveTtl = std::chrono::milliseconds(rng() % 4 == 0 ? 0 : rng() % 50);
      item->sizeBytes = rng() % 8;
      item->receivedTime = item->enqueueTime - std::chrono::milliseconds(rng() % 20);
      if (rng() % 2 == 0) {
        item->ttftObjective = std::chrono::milliseconds(rng() % 40);
        item->flags |= detail::Item::kHasTtft;
      }
      flow.items.insert(item.get());
      queued.insert(std::upper_bound(queued.begin(), queued.end(), item.get(), referenceLess),
                    item.get());
      storage.push_back(std::move(item));
    } else {
      // The front most of the time (dispatch), else any record (cancel, expiry).
      const std::size_t i = rng() % 3 == 0 ? rng() % queued.size() : 0;
      flow.items.erase(queued[i]);
      queued.erase(queued.begin() + static_cast<std::ptrdiff_t>(i));
    }
    ASSERT_EQ(flow.items.size(), queued.size());
    ASSERT_EQ(flow.items.front(), queued.empty() ? nullptr : queued.front()) << step;
    if (step % 97 == 0) {
      std::vector<detail::Item*> walk;
      flow.items.forEach([&](detail::Item* it) { walk.push_back(it); });
      ASSERT_EQ(walk, queued) << step;
      expectLinked(flow.items, queued.size());
    }
  }
  while (!queued.empty()) {  // drain in order
    ASSERT_EQ(flow.items.front(), queued.front());
    flow.items.erase(queued.front());
    queued.erase(queued.begin());
  }
  EXPECT_TRUE(flow.items.empty());
  EXPECT_EQ(flow.items.front(), nullptr);
}

TEST(BandTableTest, FlowQueueKeepsTheOrderOfEveryOrderingPolicyUnderFuzzedInsertsAndRemovals) {
  fuzzQueue(fcfsOrdering(), 1);
  fuzzQueue(edfOrdering(), 2);
  fuzzQueue(sloDeadlineOrdering(), 3);
  fuzzQueue(std::make_shared<LargestFirst>(), 4);
}

TEST(BandTableTest, FlowIndexFindsExactlyItsFlowsUnderFuzzedInsertsAndErasures) {
  detail::Band band(7, 0, 0, nullptr, nullptr);
  std::mt19937_64 rng(1920);
  std::vector<std::unique_ptr<detail::Flow>> present;
  std::vector<std::string> absent;
  for (int step = 0; step < 20000; ++step) {
    // Grows to a few thousand flows, then shrinks: runs, wrap-arounds and shifts of every kind.
    const bool add = present.empty() || (step < 12000 ? rng() % 100 < 70 : rng() % 100 < 30);
    if (add) {
      auto f = std::make_unique<detail::Flow>("f-" + std::to_string(rng()), &band, band.itemLess());
      if (band.flow_index.find(f->id, f->id_hash) != nullptr) continue;  // a repeated id
      band.flow_index.insert(f.get());
      present.push_back(std::move(f));
    } else {
      const std::size_t i = rng() % present.size();
      band.flow_index.erase(present[i].get());
      absent.push_back(present[i]->id);
      present[i] = std::move(present.back());
      present.pop_back();
    }
    ASSERT_EQ(band.flow_index.size(), present.size());
    if (step % 211 == 0 || step > 19900) {
      for (const auto& f : present) {
        ASSERT_EQ(band.flow_index.find(f->id, detail::FlowIndex::hashOf(f->id)), f.get()) << step;
      }
      for (const std::string& id : absent) {
        const detail::Flow* found = band.flow_index.find(id, detail::FlowIndex::hashOf(id));
        ASSERT_TRUE(found == nullptr || found->id == id) << step;
      }
    }
  }
}

TEST(BandTableTest, HeadIndexKeepsTheBestHeadFirstUnderFuzzedInsertsAndRemovals) {
  for (const auto& ordering : {fcfsOrdering(), sloDeadlineOrdering()}) {
    SCOPED_TRACE(std::string(ordering->type()));
    detail::Band band(7, 0, 0, nullptr, ordering);
    const detail::HeadLess less = band.heads.key_comp();
    std::mt19937_64 rng(1921);
    std::vector<std::unique_ptr<detail::Flow>> flows;
    std::vector<std::unique_ptr<detail::FullItem>> items;
    for (int f = 0; f < 300; ++f) {
      flows.push_back(
          std::make_unique<detail::Flow>("flow-" + std::to_string(f), &band, band.itemLess()));
    }
    std::vector<detail::Flow*> indexed;  // the reference, kept sorted by HeadLess
    std::uint64_t sequence = 0;
    const TimePoint t0{};
    for (int step = 0; step < 8000; ++step) {
      detail::Flow* f = flows[rng() % flows.size()].get();
      const auto pos = std::find(indexed.begin(), indexed.end(), f);
      if (pos == indexed.end()) {  // one new head for the flow, mostly in arrival order
        auto item = std::make_unique<detail::FullItem>();
        item->flags = detail::Item::kFullKind;
        item->flow = f;
        item->sequence = ++sequence;
        item->enqueueTime = t0 + std::chrono::milliseconds(step / 3 - static_cast<int>(rng() % 4));
        item->receivedTime = item->enqueueTime;
        if (rng() % 2 == 0) {
          item->ttftObjective = std::chrono::milliseconds(rng() % 40);
          item->flags |= detail::Item::kHasTtft;
        }
        while (!f->items.empty()) f->items.erase(f->items.front());
        f->items.insert(item.get());
        f->refreshHeadView();
        band.heads.insert(f);
        indexed.insert(std::upper_bound(indexed.begin(), indexed.end(), f, less), f);
        items.push_back(std::move(item));
      } else {
        band.heads.erase(f);
        indexed.erase(pos);
      }
      ASSERT_EQ(band.heads.front(), indexed.empty() ? nullptr : indexed.front()) << step;
    }
    while (!indexed.empty()) {  // drain in order
      ASSERT_EQ(band.heads.front(), indexed.front());
      band.heads.erase(indexed.front());
      indexed.erase(indexed.begin());
    }
    EXPECT_TRUE(band.heads.empty());
    for (auto& f : flows) {
      while (!f->items.empty()) f->items.erase(f->items.front());
    }
  }
}

TEST(BandTableTest, RoundRobinBandKeepsNoHeadIndexAndScansForTheSameBestHead) {
  for (const auto& ordering : {fcfsOrdering(), sloDeadlineOrdering()}) {
    SCOPED_TRACE(std::string(ordering->type()));
    detail::BandTable table;
    const BandOptions declared[] = {
        {.priority = 1, .fairness = roundRobinFairness(), .ordering = ordering},
        {.priority = 2, .fairness = globalStrictFairness(), .ordering = ordering}};
    table.applyBands(detail::BandTopology{}, declared);
    detail::Band* rr = table.resolve(1);
    detail::Band* strict = table.resolve(2);
    ASSERT_FALSE(rr->track_heads);
    ASSERT_TRUE(strict->track_heads);
    // Logical request k is queued twice, as id 2k in the round-robin band and 2k + 1 in the
    // global-strict one, with the same fields; the two bands must agree on the best head.
    std::mt19937_64 rng(1923);
    std::vector<RequestId> live;
    RequestId next = 0;
    const TimePoint t0{};
    for (int step = 0; step < 6000; ++step) {
      const TimePoint now = t0 + std::chrono::milliseconds(step);
      if (live.empty() || rng() % 3 != 0) {
        FlowRequest base;
        base.flowId = "flow-" + std::to_string(rng() % 40);
        base.receivedTime = now - std::chrono::milliseconds(rng() % 50);
        if (rng() % 2 == 0) base.ttftObjective = std::chrono::milliseconds(rng() % 80);
        for (RequestId twin = 0; twin < 2; ++twin) {
          FlowRequest r = base;
          detail::PreparedItem prepared = table.acquire(2 * next + twin, r, now);
          ASSERT_NE(prepared.item, nullptr);
          table.insert(std::move(prepared), r, twin == 0 ? rr : strict, Duration::zero(),
                       detail::FlowIndex::hashOf(r.flowId));
        }
        live.push_back(next++);
      } else {
        const std::size_t k = rng() % live.size();
        for (RequestId twin = 0; twin < 2; ++twin) {
          detail::Item* item = table.find(2 * live[k] + twin);
          ASSERT_NE(item, nullptr);
          Completion done;
          const detail::Retired freed = table.finalize(
              item, {QueueOutcome::kEvictedCancelled, OutcomeCause::kCancelled}, now, done);
        }
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      }
      const FlowQueueView* scanned = rr->bestHeadFlow();
      const FlowQueueView* indexed = strict->bestHeadFlow();
      ASSERT_EQ(scanned == nullptr, live.empty()) << step;
      ASSERT_EQ(indexed == nullptr, live.empty()) << step;
      if (scanned != nullptr) {
        ASSERT_EQ(scanned->flowId(), indexed->flowId()) << step;
      }
      ASSERT_TRUE(rr->heads.empty()) << step;
    }
  }
}

}  // namespace
}  // namespace holdback
