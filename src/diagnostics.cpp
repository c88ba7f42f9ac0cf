#include "holdback/diagnostics.hpp"

namespace holdback::inline HOLDBACK_ABI_NAMESPACE {

std::string Diagnostic::toString() const {
  std::string out = path.empty() ? std::string("/") : path;
  if (line > 0) {
    out += " (line " + std::to_string(line) + ", column " + std::to_string(column) + ")";
  }
  out += ": ";
  out += message;
  return out;
}

void Diagnostics::error(std::string path, std::string message, int line, int column) {
  add(Diagnostic{Severity::kError, std::move(path), std::move(message), line, column});
}

void Diagnostics::warning(std::string path, std::string message, int line, int column) {
  add(Diagnostic{Severity::kWarning, std::move(path), std::move(message), line, column});
}

void Diagnostics::add(Diagnostic diagnostic) {
  if (diagnostic.severity == Severity::kError) ++error_count_;
  items_.push_back(std::move(diagnostic));
}

void Diagnostics::append(const Diagnostics& other) {
  for (const Diagnostic& d : other.items_) add(d);
}

std::vector<Diagnostic> Diagnostics::errors() const {
  std::vector<Diagnostic> out;
  for (const Diagnostic& d : items_) {
    if (d.severity == Severity::kError) out.push_back(d);
  }
  return out;
}

std::vector<Diagnostic> Diagnostics::warnings() const {
  std::vector<Diagnostic> out;
  for (const Diagnostic& d : items_) {
    if (d.severity == Severity::kWarning) out.push_back(d);
  }
  return out;
}

std::string Diagnostics::toString() const {
  std::string out;
  for (const Diagnostic& d : items_) {
    out += d.severity == Severity::kError ? "error: " : "warning: ";
    out += d.toString();
    out += '\n';
  }
  return out;
}

}  // namespace holdback::inline HOLDBACK_ABI_NAMESPACE
