// Text formatting shared by the simulator's reports (report.cpp, evaluation_report.cpp,
// pareto_report.cpp, overview_report.cpp): fixed-point numbers and padding, and TextTable, a table
// whose columns are as wide as their widest cell, so every row has its columns at the same offsets
// whatever the arm and class names.
//
// Thread safety: pure functions; TextTable is thread-compatible (a plain value).
#pragma once

#include "holdback/abi.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim::text {

// `v` with `decimals` decimals; "-" for NaN.
inline std::string fixed(double v, int decimals = 0) {
  if (std::isnan(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

inline std::string padLeft(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}
inline std::string padRight(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

// Rows of cells. A column is at least its minimum width and at least one character wider than its
// widest cell, so neighbouring cells never touch (a column of empty cells takes its minimum).
// Left-aligned columns are padded on the right, the others on the left. Cost: one string per cell;
// str() is linear in the text.
class TextTable {
 public:
  struct Column {
    std::size_t minWidth = 0;
    bool left = false;
  };

  explicit TextTable(std::vector<Column> columns) : columns_(std::move(columns)) {}

  // A row with at most one cell per column (missing cells are empty).
  void row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }

  [[nodiscard]] std::string str() const {
    std::vector<std::size_t> widths;
    for (const Column& c : columns_) widths.push_back(c.minWidth);
    for (const auto& r : rows_) {
      for (std::size_t i = 0; i < r.size() && i < widths.size(); ++i) {
        if (!r[i].empty()) widths[i] = std::max(widths[i], r[i].size() + 1);
      }
    }
    std::string out;
    for (const auto& r : rows_) {
      std::string line;
      for (std::size_t i = 0; i < columns_.size(); ++i) {
        const std::string& s = i < r.size() ? r[i] : std::string();
        line += columns_[i].left ? padRight(s, widths[i]) : padLeft(s, widths[i]);
      }
      out += line + "\n";
    }
    return out;
  }

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace sim::text
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
