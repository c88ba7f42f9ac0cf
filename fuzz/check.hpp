// Invariant checks shared by the fuzz targets: a violation aborts, which libFuzzer reports.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
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

}  // namespace holdback::fuzz
