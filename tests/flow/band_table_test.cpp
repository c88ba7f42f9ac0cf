// detail::BandTable internals (issue 19): the flow-id order of the active set compares an 8-byte
// prefix first; it must order exactly as the string comparison it replaced, for every input. A
// flow's queue (an intrusive treap) must keep exactly the order of the band's ordering policy,
// ties by arrival sequence, under random inserts and removals, for every ordering policy.
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

#include "holdback/flow/slo_deadline_ordering.hpp"

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

}  // namespace
}  // namespace holdback
