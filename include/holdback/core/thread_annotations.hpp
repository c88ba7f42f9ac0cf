// Clang thread-safety annotations and an annotated mutex.
//
// The macros expand to Clang's thread-safety attributes (checked with -Wthread-safety, see
// scripts/dev/thread-safety.sh) and to nothing on other compilers. libstdc++'s std::mutex carries
// no annotations, so the library's own locks use holdback::Mutex and holdback::MutexLock below;
// they are std::mutex and std::lock_guard with the attributes added and cost nothing more.
//
// Usage:
//   Mutex mu_;
//   int count_ HOLDBACK_GUARDED_BY(mu_) = 0;
//   void bumpLocked() HOLDBACK_REQUIRES(mu_);
//   void bump() HOLDBACK_EXCLUDES(mu_) { MutexLock lock(mu_); bumpLocked(); }
//
// Thread safety: Mutex is thread-safe (it is a mutex); MutexLock is a scoped object of one thread.
#pragma once

#include "holdback/abi.hpp"

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__) && !defined(SWIG)
#define HOLDBACK_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define HOLDBACK_THREAD_ANNOTATION(x)
#endif

#define HOLDBACK_CAPABILITY(x) HOLDBACK_THREAD_ANNOTATION(capability(x))
#define HOLDBACK_SCOPED_CAPABILITY HOLDBACK_THREAD_ANNOTATION(scoped_lockable)
#define HOLDBACK_GUARDED_BY(x) HOLDBACK_THREAD_ANNOTATION(guarded_by(x))
#define HOLDBACK_PT_GUARDED_BY(x) HOLDBACK_THREAD_ANNOTATION(pt_guarded_by(x))
#define HOLDBACK_ACQUIRED_BEFORE(...) HOLDBACK_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define HOLDBACK_ACQUIRED_AFTER(...) HOLDBACK_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define HOLDBACK_REQUIRES(...) HOLDBACK_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define HOLDBACK_ACQUIRE(...) HOLDBACK_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define HOLDBACK_RELEASE(...) HOLDBACK_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define HOLDBACK_TRY_ACQUIRE(...) HOLDBACK_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define HOLDBACK_EXCLUDES(...) HOLDBACK_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define HOLDBACK_RETURN_CAPABILITY(x) HOLDBACK_THREAD_ANNOTATION(lock_returned(x))
#define HOLDBACK_NO_THREAD_SAFETY_ANALYSIS HOLDBACK_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// std::mutex with capability annotations. Not recursive.
class HOLDBACK_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() HOLDBACK_ACQUIRE() { mu_.lock(); }
  void unlock() HOLDBACK_RELEASE() { mu_.unlock(); }
  bool try_lock() HOLDBACK_TRY_ACQUIRE(true) {
    return mu_.try_lock();
  }  // NOLINT(readability-identifier-naming)

 private:
  friend class CondVar;
  std::mutex mu_;
};

// std::lock_guard for Mutex.
class HOLDBACK_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) HOLDBACK_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() HOLDBACK_RELEASE() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

// A condition variable that waits on a held Mutex (the caller holds `mu` before and after).
class CondVar {
 public:
  // Waits until notified, `timeout` passes or a spurious wakeup; the caller re-checks its state.
  template <class Rep, class Period>
  void waitFor(Mutex& mu, std::chrono::duration<Rep, Period> timeout) HOLDBACK_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait_for(lock, timeout);
    lock.release();  // still held: ownership goes back to the caller
  }
  void notifyOne() noexcept { cv_.notify_one(); }
  void notifyAll() noexcept { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
