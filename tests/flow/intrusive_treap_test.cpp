// detail::IntrusiveTreap (flow/detail/intrusive_treap.hpp): under random inserts and erasures,
// the in-order walk equals a std::multiset model (ties in insertion order), the heap order by
// rank and the parent links hold, front()/size() agree, and arrivals in order (the FCFS fast
// paths after the last and before the first) keep every invariant.
#include "holdback/flow/detail/intrusive_treap.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "holdback/flow/detail/flat_index.hpp"

namespace holdback {
namespace {

struct TreapNode {
  TreapNode* parent = nullptr;
  TreapNode* left = nullptr;
  TreapNode* right = nullptr;
  int key = 0;
  std::uint64_t sequence = 0;  // unique: the tie-break and the rank's source
};

struct TreapRank {
  static std::uint64_t of(const TreapNode* n) noexcept { return detail::mix64(n->sequence); }
};

using Treap = detail::IntrusiveTreap<TreapNode, TreapRank>;

bool treapBefore(const TreapNode& a, const TreapNode& b) {
  return a.key != b.key ? a.key < b.key : a.sequence < b.sequence;
}

void treapInsert(Treap& t, TreapNode* x) {
  t.insertWith(x, [x](const TreapNode* other) { return treapBefore(*x, *other); });
}

// The in-order walk equals the model; links, heap order, prev() and size() agree.
void expectTreapMatches(const Treap& t, const std::multiset<std::pair<int, std::uint64_t>>& model) {
  ASSERT_EQ(t.size(), model.size());
  ASSERT_EQ(t.empty(), model.empty());
  auto it = model.begin();
  const TreapNode* last = nullptr;
  for (const TreapNode* n = t.front(); n != nullptr; n = Treap::next(n), ++it) {
    ASSERT_NE(it, model.end());
    EXPECT_EQ(n->key, it->first);
    EXPECT_EQ(n->sequence, it->second);
    EXPECT_EQ(Treap::prev(n), last);
    if (n->parent != nullptr) {
      EXPECT_TRUE(n->parent->left == n || n->parent->right == n);
      EXPECT_GE(TreapRank::of(n->parent), TreapRank::of(n));
    }
    if (n->left != nullptr) {
      EXPECT_EQ(n->left->parent, n);
    }
    if (n->right != nullptr) {
      EXPECT_EQ(n->right->parent, n);
    }
    last = n;
  }
  EXPECT_EQ(it, model.end());
}

TEST(IntrusiveTreap, AgreesWithAMultisetUnderRandomOperations) {
  std::mt19937_64 rng(4242);
  std::vector<std::unique_ptr<TreapNode>> storage;
  std::vector<TreapNode*> in;  // the nodes in the treap
  std::multiset<std::pair<int, std::uint64_t>> model;
  Treap t;
  std::uint64_t sequence = 0;
  for (int step = 0; step < 20000; ++step) {
    if (in.empty() || rng() % 100 < 55) {
      auto node = std::make_unique<TreapNode>();
      node->key = static_cast<int>(rng() % 50);  // many ties
      node->sequence = ++sequence;
      treapInsert(t, node.get());
      model.emplace(node->key, node->sequence);
      in.push_back(node.get());
      storage.push_back(std::move(node));
    } else {
      // The first most of the time (dispatch), else any node (cancel, expiry).
      TreapNode* x = rng() % 3 == 0 ? in[rng() % in.size()] : t.front();
      t.erase(x);
      EXPECT_EQ(x->parent, nullptr);
      EXPECT_EQ(x->left, nullptr);
      EXPECT_EQ(x->right, nullptr);
      model.erase(model.find({x->key, x->sequence}));
      in.erase(std::find(in.begin(), in.end(), x));
    }
    ASSERT_EQ(t.size(), model.size());
    ASSERT_EQ(t.front() == nullptr ? -1 : t.front()->key, model.empty() ? -1 : model.begin()->first)
        << step;
    if (step % 101 == 0) expectTreapMatches(t, model);
  }
  expectTreapMatches(t, model);
}

TEST(IntrusiveTreap, InOrderAndReverseArrivalsKeepTheInvariants) {
  for (const bool ascending : {true, false}) {
    SCOPED_TRACE(ascending ? "ascending" : "descending");
    std::vector<TreapNode> nodes(2000);
    std::multiset<std::pair<int, std::uint64_t>> model;
    Treap t;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      nodes[i].key = ascending ? static_cast<int>(i) : -static_cast<int>(i);
      nodes[i].sequence = i + 1;
      treapInsert(t, &nodes[i]);
      model.emplace(nodes[i].key, nodes[i].sequence);
      ASSERT_EQ(t.front()->key, model.begin()->first);
    }
    expectTreapMatches(t, model);
    // Erase from the front, then from the middle, as dispatch and cancellation do.
    for (std::size_t n = 0; n < 500; ++n) {
      const TreapNode* f = t.front();
      model.erase(model.find({f->key, f->sequence}));
      t.erase(const_cast<TreapNode*>(f));
    }
    for (std::size_t i = 700; i < 1400; i += 2) {
      const std::size_t k = ascending ? i : nodes.size() - 1 - i;
      model.erase(model.find({nodes[k].key, nodes[k].sequence}));
      t.erase(&nodes[k]);
    }
    expectTreapMatches(t, model);
  }
}

TEST(IntrusiveTreap, SingleNodeAndEmpty) {
  Treap t;
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.front(), nullptr);
  TreapNode a;
  a.sequence = 1;
  treapInsert(t, &a);
  EXPECT_EQ(t.front(), &a);
  EXPECT_EQ(Treap::next(&a), nullptr);
  EXPECT_EQ(Treap::prev(&a), nullptr);
  t.erase(&a);
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.front(), nullptr);
  treapInsert(t, &a);  // a node can come back
  EXPECT_EQ(t.size(), 1u);
}

}  // namespace
}  // namespace holdback
