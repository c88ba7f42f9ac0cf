// detail::FlatIndex (flow/detail/flat_index.hpp), for both key shapes its users store: a stored
// hash plus a pointer to the key, compared through it (a band's flows, homed by Fibonacci
// hashing), and the id itself (the leases, homed by mix64's low bits); plus a shape whose home is
// nearly constant, so every probe run collides and wraps. Against a std::unordered_map model
// under random inserts, lookups and erasures; growth keeps the load bound, and the index does
// not allocate once it has held as many entries.
#include "holdback/flow/detail/flat_index.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "alloc_counter.hpp"

namespace holdback {
namespace {

// Shape 1 (FlowIndex): (hash, pointer to the id).
struct NamedSlot {
  std::uint64_t hash = 0;
  const std::string* name = nullptr;  // nullptr: empty
};
struct NamedPolicy {
  using Slot = NamedSlot;
  static constexpr std::size_t kInitialCapacity = 16;
  static bool empty(const Slot& s) noexcept { return s.name == nullptr; }
  static std::uint64_t key(const Slot& s) noexcept { return s.hash; }
  static std::size_t home(std::uint64_t hash, unsigned shift) noexcept {
    return static_cast<std::size_t>((hash * 0x9E3779B97F4A7C15ull) >> shift);
  }
};

// Shape 2 (LeaseTable): (id, value), id 0 empty.
struct IdSlot {
  std::uint64_t id = 0;
  std::uint32_t value = 0;
};
struct IdPolicy {
  using Slot = IdSlot;
  static constexpr std::size_t kInitialCapacity = 64;
  static bool empty(const Slot& s) noexcept { return s.id == 0; }
  static std::uint64_t key(const Slot& s) noexcept { return s.id; }
  static std::size_t home(std::uint64_t id, unsigned shift) noexcept {
    return static_cast<std::size_t>(detail::mix64(id) & (~std::uint64_t{0} >> shift));
  }
};
// Shape 2 homed at one of four slots: long runs, wrap-around, backward shifts across the end.
struct CollidingPolicy : IdPolicy {
  static constexpr std::size_t kInitialCapacity = 2;
  static std::size_t home(std::uint64_t id, unsigned shift) noexcept {
    return static_cast<std::size_t>((id % 4 + (~std::uint64_t{0} >> shift) - 1) &
                                    (~std::uint64_t{0} >> shift));
  }
};

template <class Index>
void expectLoadBound(const Index& index, std::size_t initial) {
  if (index.size() == 0) return;
  EXPECT_GE(index.capacity(), initial);
  EXPECT_EQ(index.capacity() & (index.capacity() - 1), 0u);  // a power of two
  EXPECT_LE(2 * index.size(), index.capacity());
}

TEST(FlatIndex, HashAndPointerShapeAgreesWithAMap) {
  std::mt19937_64 rng(77);
  std::vector<std::unique_ptr<std::string>> names;
  for (int i = 0; i < 600; ++i)
    names.push_back(std::make_unique<std::string>("f" + std::to_string(i)));
  const auto hashOf = [](const std::string& s) { return std::hash<std::string_view>{}(s); };
  const auto findIn = [&](const detail::FlatIndex<NamedPolicy>& index, const std::string& s) {
    const std::uint64_t h = hashOf(s);
    return index.find(h, [&](const NamedSlot& e) { return e.hash == h && *e.name == s; });
  };
  detail::FlatIndex<NamedPolicy> index;
  std::unordered_map<std::string, const std::string*> model;
  for (int step = 0; step < 30000; ++step) {
    const std::string& name = *names[rng() % names.size()];
    const bool present = model.count(name) > 0;
    const NamedSlot* found = findIn(index, name);
    ASSERT_EQ(found != nullptr, present) << step;
    if (found != nullptr) {
      ASSERT_EQ(found->name, model.at(name));
    }
    // Grow to the whole set, then shrink and grow again (more inserts early on).
    const bool grow = (step / 5000) % 2 == 0;
    if (!present && rng() % 100 < (grow ? 80 : 30)) {
      index.insert(NamedSlot{hashOf(name), &name});
      model.emplace(name, &name);
    } else if (present && rng() % 100 < (grow ? 30 : 80)) {
      const std::string* p = model.at(name);
      ASSERT_TRUE(index.erase(hashOf(name), [p](const NamedSlot& e) { return e.name == p; }));
      model.erase(name);
      ASSERT_FALSE(index.erase(hashOf(name), [p](const NamedSlot& e) { return e.name == p; }));
    }
    ASSERT_EQ(index.size(), model.size());
    expectLoadBound(index, NamedPolicy::kInitialCapacity);
  }
  for (const auto& [name, p] : model) EXPECT_EQ(findIn(index, name)->name, p);
}

template <class Policy>
void fuzzIdShape(std::uint64_t seed, std::uint64_t id_range) {
  std::mt19937_64 rng(seed);
  detail::FlatIndex<Policy> index;
  std::unordered_map<std::uint64_t, std::uint32_t> model;
  const auto matches = [](std::uint64_t id) {
    return [id](const IdSlot& e) { return e.id == id; };
  };
  for (int step = 0; step < 30000; ++step) {
    const std::uint64_t id = 1 + rng() % id_range;
    const IdSlot* found = index.find(id, matches(id));
    const auto it = model.find(id);
    ASSERT_EQ(found != nullptr, it != model.end()) << step;
    if (found != nullptr) {
      ASSERT_EQ(found->value, it->second);
    }
    if (it == model.end() && rng() % 2 == 0) {
      const auto value = static_cast<std::uint32_t>(rng());
      index.insert(IdSlot{id, value});
      model.emplace(id, value);
    } else if (it != model.end() && rng() % 2 == 0) {
      ASSERT_TRUE(index.erase(id, matches(id)));
      model.erase(it);
    }
    ASSERT_EQ(index.size(), model.size());
    expectLoadBound(index, Policy::kInitialCapacity);
  }
  for (const auto& [id, value] : model) EXPECT_EQ(index.find(id, matches(id))->value, value);
  // Empty it: every erase finds its entry.
  for (const auto& [id, value] : model) EXPECT_TRUE(index.erase(id, matches(id)));
  EXPECT_EQ(index.size(), 0u);
  EXPECT_EQ(index.find(1, matches(1)), nullptr);
}

TEST(FlatIndex, IdShapeAgreesWithAMap) {
  fuzzIdShape<IdPolicy>(5, 3000);
}

TEST(FlatIndex, CollidingHomesAgreeWithAMap) {
  fuzzIdShape<CollidingPolicy>(6, 300);
}

TEST(FlatIndex, GrowsByDoublingAndIsEmptyUntilUsed) {
  detail::FlatIndex<IdPolicy> index;
  EXPECT_EQ(index.capacity(), 0u);
  EXPECT_EQ(index.find(3, [](const IdSlot& e) { return e.id == 3; }), nullptr);
  EXPECT_FALSE(index.erase(3, [](const IdSlot& e) { return e.id == 3; }));
  for (std::uint64_t id = 1; id <= 32; ++id) index.insert(IdSlot{id, 0});
  EXPECT_EQ(index.capacity(), 64u);  // half full
  index.insert(IdSlot{33, 0});
  EXPECT_EQ(index.capacity(), 128u);
  index.reserve(100);
  EXPECT_EQ(index.capacity(), 256u);
  index.reserve(10);  // never shrinks
  EXPECT_EQ(index.capacity(), 256u);
}

TEST(FlatIndex, SteadyStateDoesNotAllocate) {
  detail::FlatIndex<IdPolicy> index;
  std::uint64_t id = 1;
  for (; id <= 1000; ++id) index.insert(IdSlot{id, 0});
  for (std::uint64_t old = 1; old <= 1000; ++old) {
    ASSERT_TRUE(index.erase(old, [old](const IdSlot& e) { return e.id == old; }));
  }
  testing::AllocationCounter counter;
  for (int round = 0; round < 10000; ++round, ++id) {
    index.insert(IdSlot{id, 0});
    if (round >= 500) {
      const std::uint64_t old = id - 500;
      ASSERT_TRUE(index.erase(old, [old](const IdSlot& e) { return e.id == old; }));
    }
  }
  EXPECT_EQ(counter.count(), 0u);
}

}  // namespace
}  // namespace holdback
