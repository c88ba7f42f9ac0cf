// The golden files under tests/golden and reading one whole (shared by the config tests).
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace holdback::test_support {

inline const std::filesystem::path kGoldenDir =
    std::filesystem::path(HOLDBACK_SOURCE_DIR) / "tests" / "golden";

inline std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace holdback::test_support
