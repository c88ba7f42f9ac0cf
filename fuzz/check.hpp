// Invariant checks shared by the fuzz targets: a violation aborts, which libFuzzer reports.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

namespace holdback::fuzz {

inline void require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "invariant violated: %s\n", what);
    std::abort();
  }
}

// Every ceiling finite, within [0, 1] and non-increasing.
inline void requireValidCeilings(std::span<const double> ceilings) {
  for (std::size_t i = 0; i < ceilings.size(); ++i) {
    require(std::isfinite(ceilings[i]), "ceiling is finite");
    require(ceilings[i] >= 0.0 && ceilings[i] <= 1.0, "ceiling within [0, 1]");
    require(i == 0 || ceilings[i - 1] >= ceilings[i], "ceilings non-increasing");
  }
}

// Reads fixed-size values from the fuzzer's bytes; zeros once they run out.
class Input {
 public:
  Input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  template <class T>
  T take() {
    T value{};
    const std::size_t n = sizeof(T) < size_ ? sizeof(T) : size_;
    std::memcpy(&value, data_, n);
    data_ += n;
    size_ -= n;
    return value;
  }
  std::uint8_t byte() { return take<std::uint8_t>(); }
  [[nodiscard]] bool empty() const { return size_ == 0; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
};

}  // namespace holdback::fuzz
