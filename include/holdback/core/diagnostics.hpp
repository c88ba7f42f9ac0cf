// Diagnostics and Result: how holdback reports problems without throwing.
//
// Cold paths (configuration, creation) never stop at the first problem and never throw into the
// host. They collect every problem as a Diagnostic that names where it was found (a JSON pointer
// such as "/plugins/2/parameters/minCeiling") and what was wrong, and hand back a Result that holds
// either a value or the errors, plus any warnings in both cases.
//
// Thread safety: thread-compatible (a Diagnostics or Result is a value; share it read-only or guard
// it yourself).
#pragma once

#include "holdback/abi.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

enum class Severity { kError, kWarning };

template <class T>
class Result;

struct HOLDBACK_API Diagnostic {
  Severity severity = Severity::kError;
  // JSON pointer of the offending value ("" = the whole document).
  std::string path;
  // What was found and what is allowed, e.g. "1.2 is outside [0.0, 1.0)".
  std::string message;
  // 1-based position in the source text when known (0 = unknown).
  int line = 0;
  int column = 0;

  // "path: message", or "path (line L, column C): message" when the position is known. An empty
  // path prints as "/".
  [[nodiscard]] std::string toString() const;
};

// An ordered list of diagnostics. Errors and warnings are kept in the order they were found, the
// first kMaxKept of them: later ones are counted (errorCount(), notKept()) but not kept, so that
// no input (a config of a million duplicate keys) can make the list grow without bound.
// toString() ends with a line giving how many were not shown.
// [[nodiscard]]: a function that returns Diagnostics (a reload, a validation) reports failure
// only there; dropping it silently drops the errors. Cast to void to discard on purpose.
class [[nodiscard]] HOLDBACK_API Diagnostics {
 public:
  void error(std::string path, std::string message, int line = 0, int column = 0);
  void warning(std::string path, std::string message, int line = 0, int column = 0);
  void add(Diagnostic diagnostic);
  // Adds other's diagnostics in order, except an error at a (non-empty) path where this list
  // already had an error: a later stage's complaint about a value an earlier stage rejected (the
  // YAML parser reports `.nan` and leaves null; the loader would then report "found null").
  void append(const Diagnostics& other);

  static constexpr std::size_t kMaxKept = 100;

  [[nodiscard]] bool hasErrors() const noexcept { return error_count_ > 0; }
  // Diagnostics counted beyond kMaxKept and not kept.
  [[nodiscard]] std::size_t notKept() const noexcept { return not_kept_; }
  [[nodiscard]] std::size_t errorCount() const noexcept { return error_count_; }
  [[nodiscard]] bool empty() const noexcept { return items_.empty(); }
  [[nodiscard]] const std::vector<Diagnostic>& all() const noexcept { return items_; }
  [[nodiscard]] std::vector<Diagnostic> errors() const;
  [[nodiscard]] std::vector<Diagnostic> warnings() const;
  // Every diagnostic on its own line, prefixed "error: " or "warning: ".
  [[nodiscard]] std::string toString() const;

 private:
  template <class T>
  friend class Result;
  // Prints "holdback: value() of a failed Result" and these diagnostics to stderr, then
  // std::abort(). Result's check of value().
  [[noreturn]] void abortOnFailedAccess() const noexcept;

  std::vector<Diagnostic> items_;
  std::size_t error_count_ = 0;
  std::size_t not_kept_ = 0;
};

// A value or the reasons there is none (an abseil StatusOr in miniature). Warnings may accompany a
// value. Accessing value() (or ->) of a failed Result is a programming error, checked in every
// build mode: without exceptions to throw, it prints the diagnostics to stderr and calls
// std::abort() (defined behaviour, never a read of an empty optional). Test ok() first.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value, Diagnostics diagnostics = {})  // NOLINT(google-explicit-constructor)
      : value_(std::move(value)), diagnostics_(std::move(diagnostics)) {}
  static Result failure(Diagnostics diagnostics) { return Result(std::move(diagnostics)); }

  [[nodiscard]] bool ok() const noexcept { return value_.has_value(); }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & {
    check();
    return *value_;
  }
  const T& value() const& {
    check();
    return *value_;
  }
  T&& value() && {
    check();
    return std::move(*value_);
  }
  T* operator->() {
    check();
    return &*value_;
  }
  const T* operator->() const {
    check();
    return &*value_;
  }

  [[nodiscard]] const Diagnostics& diagnostics() const noexcept { return diagnostics_; }

 private:
  explicit Result(Diagnostics diagnostics) : diagnostics_(std::move(diagnostics)) {}
  void check() const noexcept {
    if (!value_.has_value()) [[unlikely]]
      diagnostics_.abortOnFailedAccess();
  }

  std::optional<T> value_;
  Diagnostics diagnostics_;
};

// The last step of every create(): the value make() returns when `diagnostics` holds no error,
// else a failure carrying them (warnings are kept either way). make() is not called on failure,
// so a constructor never sees options that did not validate.
//   return makeIfValid<std::unique_ptr<Policy>>(std::move(diagnostics),
//                                               [&] { return std::unique_ptr<Policy>(new ...); });
template <class T, class Make>
[[nodiscard]] Result<T> makeIfValid(Diagnostics diagnostics, Make&& make) {
  if (diagnostics.hasErrors()) return Result<T>::failure(std::move(diagnostics));
  return Result<T>(std::forward<Make>(make)(), std::move(diagnostics));
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/core/diagnostics-inl.hpp"
#endif
