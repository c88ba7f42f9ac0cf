// Implementation of holdback/core/diagnostics.hpp: compiled into libholdback by
// src/diagnostics.cpp, or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY,
// holdback::header_only).
#pragma once

#include "holdback/core/diagnostics.hpp"

#include <cstdio>
#include <cstdlib>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE void Diagnostics::abortOnFailedAccess() const noexcept {
  std::fputs("holdback: value() of a failed Result (a programming error: test ok() first)\n",
             stderr);
  for (const Diagnostic& d : items_) {
    std::fprintf(stderr, "  %s\n", d.toString().c_str());
  }
  std::abort();
}

HOLDBACK_INLINE std::string Diagnostic::toString() const {
  std::string out = path.empty() ? std::string("/") : path;
  if (line > 0) {
    out += " (line " + std::to_string(line) + ", column " + std::to_string(column) + ")";
  }
  out += ": ";
  out += message;
  return out;
}

HOLDBACK_INLINE void Diagnostics::error(std::string path, std::string message, int line,
                                        int column) {
  add(Diagnostic{Severity::kError, std::move(path), std::move(message), line, column});
}

HOLDBACK_INLINE void Diagnostics::warning(std::string path, std::string message, int line,
                                          int column) {
  add(Diagnostic{Severity::kWarning, std::move(path), std::move(message), line, column});
}

HOLDBACK_INLINE void Diagnostics::add(Diagnostic diagnostic) {
  if (diagnostic.severity == Severity::kError) ++error_count_;
  if (items_.size() >= kMaxKept) {  // counted, not kept: a hostile document cannot grow the list
    ++not_kept_;
    return;
  }
  items_.push_back(std::move(diagnostic));
}

HOLDBACK_INLINE void Diagnostics::append(const Diagnostics& other) {
  const std::size_t before = items_.size();
  for (const Diagnostic& d : other.items_) {
    bool reported = false;
    if (d.severity == Severity::kError && !d.path.empty()) {
      for (std::size_t i = 0; i < before && !reported; ++i) {
        reported = items_[i].severity == Severity::kError && items_[i].path == d.path;
      }
    }
    if (!reported) add(d);
  }
  if (other.not_kept_ > 0) {
    // The other list's uncounted errors still count as errors here.
    error_count_ += other.error_count_ - other.errors().size();
    not_kept_ += other.not_kept_;
  }
}

HOLDBACK_INLINE std::vector<Diagnostic> Diagnostics::errors() const {
  std::vector<Diagnostic> out;
  for (const Diagnostic& d : items_) {
    if (d.severity == Severity::kError) out.push_back(d);
  }
  return out;
}

HOLDBACK_INLINE std::vector<Diagnostic> Diagnostics::warnings() const {
  std::vector<Diagnostic> out;
  for (const Diagnostic& d : items_) {
    if (d.severity == Severity::kWarning) out.push_back(d);
  }
  return out;
}

HOLDBACK_INLINE std::string Diagnostics::toString() const {
  std::string out;
  for (const Diagnostic& d : items_) {
    out += d.severity == Severity::kError ? "error: " : "warning: ";
    out += d.toString();
    out += '\n';
  }
  if (not_kept_ > 0) {
    out += "error: " + std::to_string(not_kept_) + " more diagnostics not shown (only the first " +
           std::to_string(kMaxKept) + " are kept)\n";
  }
  return out;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
