// Overload protection (overload.hpp).
#include "overload.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <string>

namespace holdback::gateway {

bool BufferBudget::tryReserve(std::int64_t n, Lease& out) noexcept {
  out.reset();
  if (n <= 0) {
    out = Lease(this, 0);
    return true;
  }
  std::int64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (used > limit_ || n > limit_ - used) return false;
  } while (!used_.compare_exchange_weak(used, used + n, std::memory_order_relaxed));
  out = Lease(this, n);
  return true;
}

bool ClientAddressLimit::tryAdmit(const std::string& address) {
  if (cap_ <= 0) return true;
  std::lock_guard lock(mu_);
  int& open = open_[address];
  if (open >= cap_) {
    if (open == 0) open_.erase(address);
    return false;
  }
  ++open;
  return true;
}

void ClientAddressLimit::leave(const std::string& address) {
  if (cap_ <= 0) return;
  std::lock_guard lock(mu_);
  const auto it = open_.find(address);
  if (it == open_.end()) return;
  if (--it->second <= 0) open_.erase(it);
}

std::size_t ClientAddressLimit::addresses() const {
  std::lock_guard lock(mu_);
  return open_.size();
}

std::int64_t defaultMaxBufferedBytes() {
  constexpr std::int64_t kMiB = std::int64_t{1} << 20;
  std::int64_t memory = 0;
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0 && pages <= INT64_MAX / page) memory = std::int64_t{pages} * page;
  // A container's limit (cgroup v2), when it is lower: "max" or unreadable means none.
  std::ifstream cgroup("/sys/fs/cgroup/memory.max");
  std::string text;
  if (cgroup >> text) {
    std::int64_t limit = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), limit);
    if (ec == std::errc() && end == text.data() + text.size() && limit > 0 &&
        (memory == 0 || limit < memory)) {
      memory = limit;
    }
  }
  if (memory <= 0) memory = 1024 * kMiB;  // unknown: as for a 1 GiB machine
  return std::clamp(memory / 4, 64 * kMiB, 8192 * kMiB);
}

}  // namespace holdback::gateway
