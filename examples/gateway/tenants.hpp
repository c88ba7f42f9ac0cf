// Tenants and their API keys (--api-keys FILE): who may send requests, and the highest priority
// each may claim.
//
// The key file, YAML or JSON (told apart by content, as the config is):
//
//   tenants:
//     - name: acme-batch          # 1-64 of A-Z a-z 0-9 . _ -; the metrics' `tenant` label
//       maxObjective: batch       # the highest objective it may claim (an --objective name)
//       keys: [KEY, ...]          # its bearer tokens (several: rotation)
//     - name: acme-chat
//       maxPriority: 10           # or the highest priority, an integer (not both)
//       fairnessId: acme          # optional: the flow of all its requests (default: the name)
//       keys: [KEY]
//
// Bounds: the file at most 1 MiB, at most 10000 tenants and 10000 keys in all; a key is 16 to
// 256 characters of A-Z a-z 0-9 - . _ ~ + / = (RFC 6750's b64token); a fairness id 1 to 128
// printable ASCII characters. Names and keys are unique (a key belongs to one tenant). Every
// problem is reported at once with its JSON path (and line and column for YAML); a key's value is
// never printed, only where it is.
//
// A request authenticates with `Authorization: Bearer KEY`. Keys are looked up by their SHA-256
// digest in a hash map (sha256.hpp): the table holds no key, and a lookup's time depends only on
// the digest, not on how much of a real key the caller guessed.
//
// The tenant's ceiling is applied to the objective's priority: a claim above it is lowered to it
// (counted per tenant when the request named an objective); the tenant's fairness id replaces
// the client's fairness headers.
//
// Thread safety: TenantTable is immutable once built (thread-safe to read); TenantDirectory is
// thread-safe (the table is swapped under a mutex that only guards a shared_ptr copy, the
// counters are atomics).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gateway_http.hpp"
#include "holdback/core/diagnostics.hpp"
#include "holdback/core/types.hpp"
#include "sha256.hpp"

namespace holdback::gateway {

// One tenant's counters; kept across reloads for as long as the tenant's name is in the table.
struct TenantStats {
  std::atomic<std::uint64_t> requests{0};  // requests authenticated with one of its keys
  std::atomic<std::uint64_t> clamped{0};   // requests whose claimed objective was lowered
};

struct Tenant {
  std::string name;
  Priority maxPriority = 0;
  std::string fairnessId;              // the file's fairnessId, else the name
  std::shared_ptr<TenantStats> stats;  // set when the table is installed (TenantDirectory)
};

class TenantTable {
 public:
  static constexpr std::size_t kMaxFileBytes = std::size_t{1} << 20;
  static constexpr std::size_t kMaxTenants = 10000;
  static constexpr std::size_t kMaxKeys = 10000;
  static constexpr std::size_t kMinKeyBytes = 16;
  static constexpr std::size_t kMaxKeyBytes = 256;
  static constexpr std::size_t kMaxNameBytes = 64;
  static constexpr std::size_t kMaxFairnessIdBytes = 128;

  // A key file's text; `objectives` resolves maxObjective. Every problem is an error.
  [[nodiscard]] static Result<TenantTable> parse(std::string_view text,
                                                 const ObjectiveTable& objectives);
  // Reads `file` (at most kMaxFileBytes) and parses it.
  [[nodiscard]] static Result<TenantTable> load(const std::string& file,
                                                const ObjectiveTable& objectives);

  // The tenant whose key `key` is, or nullptr.
  [[nodiscard]] const Tenant* find(std::string_view key) const;
  [[nodiscard]] const std::vector<Tenant>& tenants() const noexcept { return tenants_; }
  [[nodiscard]] std::vector<Tenant>& tenants() noexcept { return tenants_; }
  [[nodiscard]] std::size_t keys() const noexcept { return by_digest_.size(); }

 private:
  struct DigestHash {
    std::size_t operator()(const Sha256Digest& d) const noexcept;
  };
  std::vector<Tenant> tenants_;
  std::unordered_map<Sha256Digest, std::size_t, DigestHash> by_digest_;  // -> tenants_ index
};

// The token of an Authorization header value "Bearer TOKEN" (the scheme in any case, then one
// or more spaces); nullopt for anything else (another scheme, no token, a space in the token).
[[nodiscard]] std::optional<std::string_view> bearerToken(std::string_view authorization);

// A request's priority and flow under its tenant: the claimed priority (`claimed`, from the
// objective header; `named` when the request named an objective) lowered to the tenant's ceiling,
// and the tenant's fairness id.
struct TenantClaim {
  Priority priority = 0;
  bool clamped = false;  // a named objective above the ceiling was lowered
};
[[nodiscard]] TenantClaim claimFor(const Tenant& tenant, Priority claimed, bool named) noexcept;

// The live key table (--api-keys), swapped on SIGHUP, and the counters /metrics reports.
class TenantDirectory {
 public:
  // Whether --api-keys was given (set once, before the listeners start).
  void enable() noexcept { enabled_ = true; }
  [[nodiscard]] bool enabled() const noexcept { return enabled_; }

  // Makes `table` the one requests are checked against; its tenants get the counters of the
  // same names in the previous table (new names start at 0; names no longer there are dropped).
  void install(TenantTable table);
  // The current table (null before the first install).
  [[nodiscard]] std::shared_ptr<const TenantTable> current() const;

  enum class Check { kOk, kMissing, kInvalid };
  struct Authentication {
    Check check = Check::kMissing;
    std::shared_ptr<const Tenant> tenant;  // kOk: the tenant (keeps its table alive)
  };
  // `authorization`: the request's Authorization values (several are kInvalid).
  // Counts a failure in `missing` or `invalid`, a success in the tenant's `requests` (unless
  // `countSuccess` is false: a check of the header before the request's body is read).
  [[nodiscard]] Authentication authenticate(const std::vector<std::string_view>& authorization,
                                            bool countSuccess = true);

  struct Row {
    std::string tenant;
    std::uint64_t requests = 0;
    std::uint64_t clamped = 0;
  };
  // The current tenants' counters, by name.
  [[nodiscard]] std::vector<Row> rows() const;

  std::atomic<std::uint64_t> missing{0};        // 401: no Authorization: Bearer
  std::atomic<std::uint64_t> invalid{0};        // 401: a key no tenant has
  std::atomic<std::uint64_t> reloadsOk{0};      // SIGHUP reloads installed
  std::atomic<std::uint64_t> reloadsFailed{0};  // SIGHUP reloads refused (old table kept)

 private:
  bool enabled_ = false;
  mutable std::mutex mu_;
  std::shared_ptr<const TenantTable> table_;                   // guarded by mu_
  std::map<std::string, std::shared_ptr<TenantStats>> stats_;  // guarded by mu_
};

}  // namespace holdback::gateway
