// Counts heap allocations made by the current thread inside a scope, to check that hot paths do
// not allocate. The test binary that links alloc_counter.cpp replaces global operator new.
#pragma once

#include "holdback/abi.hpp"

#include <cstddef>

// Test helpers share the library's holdback::testing (in the ABI namespace, holdback/abi.hpp).
namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace testing {

class AllocationCounter {
 public:
  AllocationCounter();
  ~AllocationCounter() = default;
  AllocationCounter(const AllocationCounter&) = delete;
  AllocationCounter& operator=(const AllocationCounter&) = delete;

  // Allocations by this thread since construction.
  [[nodiscard]] std::size_t count() const;
  // Bytes requested by those allocations.
  [[nodiscard]] std::size_t bytes() const;

 private:
  std::size_t start_;
  std::size_t start_bytes_;
};

}  // namespace testing
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
