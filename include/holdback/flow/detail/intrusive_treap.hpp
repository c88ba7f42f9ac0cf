// detail::IntrusiveTreap: an intrusive binary search tree with heap-ordered pseudo-random ranks
// (a treap), the container behind a flow's queue (ItemQueue) and a band's head index (HeadIndex).
// Internal (not installed API).
//
// What it is
//   A treap over caller-owned nodes: Node has `parent`, `left` and `right` links (Node*), which
//   the treap owns while the node is in it. The in-order sequence is the caller's order, given
//   per insertion (insertWith's `before`); the heap order is by Rank::of(node) (a std::uint64_t,
//   pseudo-random, e.g. a mix of a unique sequence number), so the expected depth is O(log n)
//   for any order of insertion. The first and last nodes are cached.
//
// Invariants (hold between calls)
//   - In-order: for every node, the nodes of its left subtree go before it and the nodes of its
//     right subtree after it, in the order the insertions were given (a strict total order).
//   - Heap: no node's Rank::of is below a child's (ties keep their shape). Rank::of(node) must
//     not change while the node is in the treap.
//   - Links: x->left->parent == x and x->right->parent == x; the root's parent is nullptr.
//   - front() is the in-order first node (nullptr when empty), size() the node count.
//
// Cost: insertion O(log n) expected comparisons, O(1) after the last or before the first (every
// arrival in order); erasure compares nothing (rotations down by rank, then a splice); erasing
// the first node also looks up its successor. next()/prev() are O(1) amortized over a walk.
// No allocation: the nodes are the caller's.
//
// Thread safety: thread-compatible.
#pragma once

#include "holdback/abi.hpp"

#include <cstddef>
#include <cstdint>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

template <class Node, class Rank>
class IntrusiveTreap {
 public:
  [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  [[nodiscard]] Node* front() const noexcept { return first_; }

  // Inserts x; before(other) tells whether x goes before `other` (a strict total order).
  template <class Before>
  void insertWith(Node* x, Before&& before) noexcept {
    x->left = nullptr;
    x->right = nullptr;
    count_ += 1;
    if (root_ == nullptr) {
      x->parent = nullptr;
      root_ = first_ = last_ = x;
      return;
    }
    Node* p = nullptr;
    bool left = false;
    if (!before(last_)) {  // after the last (every arrival in order): no descent
      p = last_;
      last_ = x;
    } else if (before(first_)) {
      p = first_;
      left = true;
      first_ = x;
    } else {
      p = root_;
      for (;;) {
        left = before(p);
        Node* child = left ? p->left : p->right;
        if (child == nullptr) break;
        p = child;
      }
    }
    x->parent = p;
    (left ? p->left : p->right) = x;
    const std::uint64_t r = Rank::of(x);
    while (x->parent != nullptr && Rank::of(x->parent) < r) rotateUp(x);
  }

  void erase(Node* x) noexcept {
    // Rotations keep the in-order sequence, so neighbours found now stay the neighbours.
    if (x == first_) first_ = next(x);
    if (x == last_) last_ = prev(x);
    while (x->left != nullptr && x->right != nullptr) {
      rotateUp(Rank::of(x->left) > Rank::of(x->right) ? x->left : x->right);
    }
    Node* child = x->left != nullptr ? x->left : x->right;
    Node* p = x->parent;
    if (child != nullptr) child->parent = p;
    if (p == nullptr) {
      root_ = child;
    } else if (p->left == x) {
      p->left = child;
    } else {
      p->right = child;
    }
    x->parent = x->left = x->right = nullptr;
    count_ -= 1;
  }

  // In-order successor / predecessor; nullptr past the ends.
  [[nodiscard]] static Node* next(const Node* x) noexcept {
    if (x->right != nullptr) {
      Node* n = x->right;
      while (n->left != nullptr) n = n->left;
      return n;
    }
    Node* p = x->parent;
    while (p != nullptr && p->right == x) {
      x = p;
      p = p->parent;
    }
    return p;
  }
  [[nodiscard]] static Node* prev(const Node* x) noexcept {
    if (x->left != nullptr) {
      Node* n = x->left;
      while (n->right != nullptr) n = n->right;
      return n;
    }
    Node* p = x->parent;
    while (p != nullptr && p->left == x) {
      x = p;
      p = p->parent;
    }
    return p;
  }

 private:
  void rotateUp(Node* x) noexcept {  // x takes its parent's place
    Node* p = x->parent;
    Node* g = p->parent;
    if (p->left == x) {
      p->left = x->right;
      if (x->right != nullptr) x->right->parent = p;
      x->right = p;
    } else {
      p->right = x->left;
      if (x->left != nullptr) x->left->parent = p;
      x->left = p;
    }
    p->parent = x;
    x->parent = g;
    if (g == nullptr) {
      root_ = x;
    } else if (g->left == p) {
      g->left = x;
    } else {
      g->right = x;
    }
  }

  Node* root_ = nullptr;
  Node* first_ = nullptr;
  Node* last_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
