// The gateway executable's global operator new and delete: blocks of up to 8 KiB are kept on
// per-thread free lists (16-byte size classes) when freed and handed out again, instead of going
// back to malloc. Each request allocates and frees blocks that glibc's per-thread cache does not
// keep (it keeps at most 7 blocks of a size, and none over 1 KiB): the coroutine frames of the
// request's handling (1-3 KiB each; Asio's own frame recycling is turned off, see
// CMakeLists.txt, since it keeps only frames under 1 KiB), the upstream request head, the
// collected response, the exchange's state. Under many connections, those went through malloc's
// bins, splitting and coalescing chunks (the largest user-space cost at 1000 clients).
//
// A block freed on another thread than the one that allocated it joins the freeing thread's
// lists. What a thread keeps is bounded (kMaxCachedBytes, 8 MiB); beyond it, blocks go back to
// free(). The bound is sized for 1000 connections: a thread then has about 500 requests in flight
// with some 7 KiB of blocks each, and completions come in bursts of hundreds; with a 1 MiB bound,
// each burst overflowed it and the next requests' blocks came from malloc again (about six
// malloc calls a request at 1000 clients, against 0.2 with 8 MiB).
// A thread's cached blocks are not returned when it exits (the gateway's threads live as long as
// the process). Sizes outside the range, and every block under a sanitizer (which must see each
// allocation), go straight to malloc and free.
#include <cstddef>
#include <cstdlib>
#include <new>

#include <malloc.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HOLDBACK_GATEWAY_THREAD_CACHE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define HOLDBACK_GATEWAY_THREAD_CACHE 0
#endif
#endif
#ifndef HOLDBACK_GATEWAY_THREAD_CACHE
#define HOLDBACK_GATEWAY_THREAD_CACHE 1
#endif

namespace {

void* mallocOrThrow(std::size_t size) {
  if (size == 0) size = 1;
  for (;;) {
    if (void* p = std::malloc(size)) return p;
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}

#if HOLDBACK_GATEWAY_THREAD_CACHE

constexpr std::size_t kClassBytes = 16;  // malloc's own granularity: no block grows
constexpr std::size_t kMinClass = 1;
constexpr std::size_t kMaxClass = 512;                         // 8 KiB
constexpr std::size_t kMaxCachedBytes = std::size_t{8} << 20;  // per thread

struct FreeBlock {
  FreeBlock* next;
};

// Plain data (no constructor or destructor), so that its thread-local instance needs no guard.
struct ThreadCache {
  FreeBlock* head[kMaxClass + 1];
  std::size_t cachedBytes;
};
thread_local ThreadCache tCache;

// The class a request of `size` bytes is served from (0: not cached).
std::size_t cacheClassOfRequest(std::size_t size) {
  const std::size_t c = (size + kClassBytes - 1) / kClassBytes;
  return c >= kMinClass && c <= kMaxClass ? c : 0;
}

void* cacheAllocate(std::size_t size) {
  const std::size_t c = cacheClassOfRequest(size);
  if (c == 0) return mallocOrThrow(size);
  ThreadCache& t = tCache;
  if (FreeBlock* b = t.head[c]) {
    t.head[c] = b->next;
    t.cachedBytes -= c * kClassBytes;
    return b;
  }
  return mallocOrThrow(c * kClassBytes);  // the whole class, so any block of it fits
}

// `c`: the block's class (0: not one of ours).
void cacheRelease(void* p, std::size_t c) {
  ThreadCache& t = tCache;
  const std::size_t bytes = c * kClassBytes;
  if (c == 0 || t.cachedBytes + bytes > kMaxCachedBytes) {
    std::free(p);
    return;
  }
  auto* b = static_cast<FreeBlock*>(p);
  b->next = t.head[c];
  t.head[c] = b;
  t.cachedBytes += bytes;
}

// An unsized delete: the largest class the block holds (every request in the range was rounded
// up to its class, so a block of the range holds at least its class).
std::size_t cacheClassOfBlock(void* p) {
  const std::size_t c = malloc_usable_size(p) / kClassBytes;
  return c >= kMinClass ? (c <= kMaxClass ? c : 0) : 0;
}

#endif

}  // namespace

#if HOLDBACK_GATEWAY_THREAD_CACHE

void* operator new(std::size_t size) {
  return cacheAllocate(size);
}
void* operator new[](std::size_t size) {
  return cacheAllocate(size);
}
void* operator new(std::size_t size, const std::nothrow_t& /*unused*/) noexcept {
  try {
    return cacheAllocate(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t& /*unused*/) noexcept {
  try {
    return cacheAllocate(size);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept {
  if (p != nullptr) cacheRelease(p, cacheClassOfBlock(p));
}
void operator delete[](void* p) noexcept {
  if (p != nullptr) cacheRelease(p, cacheClassOfBlock(p));
}
void operator delete(void* p, std::size_t size) noexcept {
  if (p != nullptr) cacheRelease(p, cacheClassOfRequest(size));
}
void operator delete[](void* p, std::size_t size) noexcept {
  if (p != nullptr) cacheRelease(p, cacheClassOfRequest(size));
}
void operator delete(void* p, const std::nothrow_t& /*unused*/) noexcept {
  if (p != nullptr) cacheRelease(p, cacheClassOfBlock(p));
}
void operator delete[](void* p, const std::nothrow_t& /*unused*/) noexcept {
  if (p != nullptr) cacheRelease(p, cacheClassOfBlock(p));
}

#endif
