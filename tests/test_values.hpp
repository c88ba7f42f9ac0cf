// Values several test files use, defined once. The header-only suite is built in unity batches
// (tests/CMakeLists.txt), where two files' own definitions of one name would collide.
#pragma once

#include <limits>

namespace holdback::test_support {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace holdback::test_support
