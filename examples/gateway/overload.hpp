// Overload protection: a global budget for the bytes the gateway buffers (request bodies, and
// non-streamed responses collected before they are relayed), and a cap on open connections per
// client address.
//
// BufferBudget: every request body is reserved before it is read (its Content-Length, or
// --max-body-bytes for a chunked body, trimmed to its size once read) and held until its reply
// has been written; a new request whose body does not fit under --max-buffered-bytes is answered
// 503 with Retry-After at once, and its body is not read. What is already admitted is never
// refused for the budget: a non-streamed response's bytes are added as they arrive (add()),
// whatever the total, each response bounded by --max-response-bytes on its own. So the total
// stays within --max-buffered-bytes plus the responses in progress, and new work stops while it
// is over.
//
// ClientAddressLimit: open connections per client IP address; over --max-connections-per-client a
// new connection from that address is answered 503 with Retry-After and closed, as over
// --max-connections. Behind a load balancer every connection comes from its address: raise the
// cap or set 0 (no cap).
//
// Thread safety: both classes are thread-safe (BufferBudget lock-free; ClientAddressLimit under a
// mutex held for a map lookup, never while calling out). BufferBudget::Lease is
// thread-compatible.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

namespace holdback::gateway {

class BufferBudget {
 public:
  explicit BufferBudget(std::int64_t limit = INT64_MAX) : limit_(limit) {}

  // Bytes held by one request or response; gives them back when destroyed.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& o) noexcept
        : budget_(std::exchange(o.budget_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
    Lease& operator=(Lease&& o) noexcept {
      if (this != &o) {
        reset();
        budget_ = std::exchange(o.budget_, nullptr);
        bytes_ = std::exchange(o.bytes_, 0);
      }
      return *this;
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { reset(); }
    // Adds `n` bytes to the lease whatever the total (admitted work is never refused).
    void grow(std::int64_t n) noexcept {
      if (budget_ == nullptr || n <= 0) return;
      budget_->used_.fetch_add(n, std::memory_order_relaxed);
      bytes_ += n;
    }
    // Shrinks the lease to `n` bytes (no-op when it holds fewer).
    void shrinkTo(std::int64_t n) noexcept {
      if (budget_ == nullptr || n >= bytes_ || n < 0) return;
      budget_->used_.fetch_sub(bytes_ - n, std::memory_order_relaxed);
      bytes_ = n;
    }
    void reset() noexcept {
      if (budget_ != nullptr && bytes_ > 0) {
        budget_->used_.fetch_sub(bytes_, std::memory_order_relaxed);
      }
      budget_ = nullptr;
      bytes_ = 0;
    }
    [[nodiscard]] std::int64_t bytes() const noexcept { return bytes_; }

   private:
    friend class BufferBudget;
    Lease(BufferBudget* b, std::int64_t n) : budget_(b), bytes_(n) {}
    BufferBudget* budget_ = nullptr;
    std::int64_t bytes_ = 0;
  };

  // `n` bytes if they fit under the limit (with what is held now), else an empty lease and
  // false. A lease of 0 bytes always succeeds.
  [[nodiscard]] bool tryReserve(std::int64_t n, Lease& out) noexcept;
  // An empty lease to grow() (responses).
  [[nodiscard]] Lease open() noexcept { return Lease(this, 0); }

  [[nodiscard]] std::int64_t used() const noexcept { return used_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::int64_t limit() const noexcept { return limit_; }

 private:
  std::atomic<std::int64_t> used_{0};
  std::int64_t limit_;
};

class ClientAddressLimit {
 public:
  // `cap` open connections per address; 0 = no cap.
  explicit ClientAddressLimit(int cap) : cap_(cap) {}
  // Counts a new connection from `address` (its bytes, e.g. asio's to_bytes()); false (nothing
  // counted) when `address` already has `cap` open.
  [[nodiscard]] bool tryAdmit(const std::string& address);
  // A connection tryAdmit() admitted has closed.
  void leave(const std::string& address);
  [[nodiscard]] std::size_t addresses() const;

 private:
  const int cap_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, int> open_;  // guarded by mu_; entries > 0 only
};

// The default --max-buffered-bytes: a quarter of the memory this process may use (the machine's
// physical memory, or a smaller cgroup memory.max), between 64 MiB and 8 GiB.
[[nodiscard]] std::int64_t defaultMaxBufferedBytes();

}  // namespace holdback::gateway
