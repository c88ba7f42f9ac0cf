#include "alloc_counter.hpp"

#include <cstdlib>
#include <new>

namespace {
thread_local std::size_t g_allocations = 0;
thread_local std::size_t g_bytes = 0;
}  // namespace

// Replacing the global allocation functions means calling malloc and free.
// NOLINTBEGIN(cppcoreguidelines-no-malloc)
void* operator new(std::size_t size) {
  ++g_allocations;
  g_bytes += size;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
#if defined(__cpp_exceptions)
  throw std::bad_alloc();
#else
  std::abort();  // built with -fno-exceptions (HOLDBACK_NO_EXCEPTIONS)
#endif
}
void* operator new[](std::size_t size) {
  return ::operator new(size);
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  ++g_allocations;
  g_bytes += size;
  return std::malloc(size == 0 ? 1 : size);
}
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept {
  return ::operator new(size, tag);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
// NOLINTEND(cppcoreguidelines-no-malloc)

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace testing {

AllocationCounter::AllocationCounter() : start_(g_allocations), start_bytes_(g_bytes) {}
std::size_t AllocationCounter::count() const {
  return g_allocations - start_;
}
std::size_t AllocationCounter::bytes() const {
  return g_bytes - start_bytes_;
}

}  // namespace testing
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
