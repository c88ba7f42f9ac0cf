#include "tenants.hpp"

#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <utility>

#include "holdback/config/document.hpp"
#include "holdback/config/json.hpp"

namespace holdback::gateway {
namespace {

using config::joinPath;
using config::Json;

bool nameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

// RFC 6750 section 2.1's b64token characters (its trailing '=' allowed anywhere).
bool keyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~' || c == '+' || c == '/' || c == '=';
}

// Reports every key of `object` (at `path`) that is not in `allowed`. A key as long as an API key
// is not printed: a key file written as a map of keys would otherwise put them in the log.
void unknownKeys(const Json& object, const std::string& path,
                 std::initializer_list<std::string_view> allowed, Diagnostics& d) {
  std::string list;
  for (const std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
  for (const auto& [key, value] : object.items()) {
    bool known = false;
    for (const std::string_view a : allowed) known = known || key == a;
    if (known) continue;
    if (key.size() >= TenantTable::kMinKeyBytes) {
      d.error(path, "an unknown key of " + std::to_string(key.size()) +
                        " characters (not shown: it may be an API key); allowed keys: " + list);
    } else {
      d.error(joinPath(path, key), "unknown key \"" + key + "\"; allowed keys: " + list);
    }
  }
}

std::string objectiveList(const ObjectiveTable& objectives) {
  std::string list;
  for (const auto& [name, priority] : objectives.entries()) {
    list += (list.empty() ? "" : ", ") + name + " (" + std::to_string(priority) + ")";
  }
  return list.empty() ? "none" : list;
}

constexpr std::string_view kTenantShape =
    "{name, maxObjective or maxPriority, keys, fairnessId (optional)}";

}  // namespace

std::size_t TenantTable::DigestHash::operator()(const Sha256Digest& d) const noexcept {
  std::size_t h = 0;
  std::memcpy(&h, d.data(), sizeof h);
  return h;
}

Result<TenantTable> TenantTable::parse(std::string_view text, const ObjectiveTable& objectives) {
  auto parsed = config::parseDocument(text);
  if (!parsed) return Result<TenantTable>::failure(parsed.diagnostics());
  Diagnostics d = parsed.diagnostics();  // duplicate keys are errors, the document still read
  const Json& doc = parsed->json;
  TenantTable table;
  // The first path of each key and name, for the duplicate errors.
  std::unordered_map<Sha256Digest, std::string, DigestHash> key_paths;
  std::map<std::string, std::string, std::less<>> name_paths;
  std::size_t keys_seen = 0;
  const Json* tenants = nullptr;
  if (!doc.is_object()) {
    d.error("", config::mismatch(doc, "an object with the key \"tenants\""));
  } else {
    unknownKeys(doc, "", {"tenants"}, d);
    const auto it = doc.find("tenants");
    if (it == doc.end()) {
      d.error("/tenants",
              std::string("is required: a list of tenants, each ") + std::string(kTenantShape));
    } else if (!it->is_array()) {
      d.error("/tenants", config::mismatch(*it, "a list of tenants"));
    } else if (it->empty()) {
      d.error("/tenants", "is empty: give at least one tenant, each " + std::string(kTenantShape));
    } else if (it->size() > kMaxTenants) {
      d.error("/tenants", std::to_string(it->size()) + " tenants; at most " +
                              std::to_string(kMaxTenants) + " are allowed");
    } else {
      tenants = &*it;
    }
  }
  for (std::size_t i = 0; tenants != nullptr && i < tenants->size(); ++i) {
    const std::string path = "/tenants/" + std::to_string(i);
    const Json& t = (*tenants)[i];
    if (!t.is_object()) {
      d.error(path, config::mismatch(t, "a tenant " + std::string(kTenantShape)));
      continue;
    }
    unknownKeys(t, path, {"name", "maxObjective", "maxPriority", "fairnessId", "keys"}, d);
    config::ParamReader r(&t, path, d);
    Tenant tenant;
    bool ok = true;
    if (auto name = r.string("name")) {
      bool chars = !name->empty() && name->size() <= kMaxNameBytes;
      for (const char c : *name) chars = chars && nameChar(c);
      if (!chars) {
        r.error("name", config::describe(Json(*name)) + " is not a tenant name: 1 to " +
                            std::to_string(kMaxNameBytes) + " of A-Z a-z 0-9 . _ -");
        ok = false;
      } else if (const auto seen = name_paths.find(*name); seen != name_paths.end()) {
        r.error("name", config::describe(Json(*name)) + " is also the name of " + seen->second +
                            "; tenant names are unique (give one tenant several keys instead)");
        ok = false;
      } else {
        name_paths.emplace(*name, path);
        tenant.name = std::move(*name);
      }
    } else {
      if (!r.has("name")) r.error("name", "is required: the tenant's name");
      ok = false;
    }
    const bool by_objective = r.has("maxObjective");
    const bool by_priority = r.has("maxPriority");
    if (by_objective && by_priority) {
      r.error("maxPriority", "give maxObjective or maxPriority, not both");
      r.accept("maxObjective");
      r.accept("maxPriority");
      ok = false;
    } else if (!by_objective && !by_priority) {
      d.error(path, "needs a ceiling: maxObjective (one of " + objectiveList(objectives) +
                        ") or maxPriority (an integer)");
      ok = false;
    } else if (by_objective) {
      if (auto objective = r.string("maxObjective")) {
        const auto& entries = objectives.entries();
        if (const auto e = entries.find(*objective); e != entries.end()) {
          tenant.maxPriority = e->second;
        } else {
          r.error("maxObjective", config::describe(Json(*objective)) +
                                      " is not an objective; allowed: " +
                                      objectiveList(objectives) + " (--objective adds more)");
          ok = false;
        }
      } else {
        ok = false;
      }
    } else if (auto p = r.integer("maxPriority", std::numeric_limits<Priority>::min(),
                                  std::numeric_limits<Priority>::max())) {
      tenant.maxPriority = static_cast<Priority>(*p);
    } else {
      ok = false;
    }
    if (r.has("fairnessId")) {
      if (auto id = r.string("fairnessId")) {
        bool chars = !id->empty() && id->size() <= kMaxFairnessIdBytes;
        for (const char c : *id) chars = chars && c >= 0x20 && c < 0x7f;
        if (!chars) {
          r.error("fairnessId", config::describe(Json(*id)) + " is not a fairness id: 1 to " +
                                    std::to_string(kMaxFairnessIdBytes) +
                                    " printable ASCII characters");
          ok = false;
        } else {
          tenant.fairnessId = std::move(*id);
        }
      } else {
        ok = false;
      }
    }
    const Json* keys = r.value("keys");
    if (keys == nullptr) {
      r.error("keys", "is required: a list of the tenant's API keys");
      ok = false;
    } else if (!keys->is_array() || keys->empty()) {
      r.error("keys", keys->is_array() ? std::string("is empty: give at least one key")
                                       : "found " + std::string(config::typeName(*keys)) +
                                             "; expected a list of keys (strings)");
      ok = false;
    } else {
      for (std::size_t k = 0; k < keys->size(); ++k) {
        const std::string key_path = joinPath(r.pathOf("keys"), std::to_string(k));
        const Json& key = (*keys)[k];
        // Never the key's value in a message: the log is not the place for it.
        if (!key.is_string()) {
          d.error(key_path, "found " + std::string(config::typeName(key)) +
                                "; a key is a string (quote it in YAML)");
          ok = false;
          continue;
        }
        const auto& s = key.get_ref<const std::string&>();
        bool chars = true;
        for (const char c : s) chars = chars && keyChar(c);
        if (s.size() < kMinKeyBytes || s.size() > kMaxKeyBytes || !chars) {
          d.error(key_path,
                  "a key of " + std::to_string(s.size()) + " characters" +
                      (chars ? "" : " with a character outside A-Z a-z 0-9 - . _ ~ + / =") +
                      " (not shown); a key is " + std::to_string(kMinKeyBytes) + " to " +
                      std::to_string(kMaxKeyBytes) + " of A-Z a-z 0-9 - . _ ~ + / =");
          ok = false;
          continue;
        }
        if (++keys_seen > kMaxKeys) {
          if (keys_seen == kMaxKeys + 1) {
            d.error(key_path, "more than " + std::to_string(kMaxKeys) +
                                  " keys in the file; at most " + std::to_string(kMaxKeys) +
                                  " are allowed");
          }
          ok = false;
          continue;
        }
        const Sha256Digest digest = sha256(s);
        if (const auto [seen, fresh] = key_paths.emplace(digest, key_path); !fresh) {
          d.error(key_path, "the same key as " + seen->second + " (not shown); each key is unique");
          ok = false;
          continue;
        }
        table.by_digest_.emplace(digest, table.tenants_.size());
      }
    }
    if (!ok) continue;
    if (tenant.fairnessId.empty()) tenant.fairnessId = tenant.name;
    table.tenants_.push_back(std::move(tenant));
  }
  d = config::withPositions(d, parsed->positions);
  if (d.hasErrors()) return Result<TenantTable>::failure(std::move(d));
  return Result<TenantTable>(std::move(table), std::move(d));
}

Result<TenantTable> TenantTable::load(const std::string& file, const ObjectiveTable& objectives) {
  Diagnostics d;
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    d.error("", "cannot read " + file);
    return Result<TenantTable>::failure(std::move(d));
  }
  std::string text(kMaxFileBytes + 1, '\0');
  in.read(text.data(), std::streamsize(text.size()));
  if (in.bad()) {
    d.error("", "cannot read " + file);
    return Result<TenantTable>::failure(std::move(d));
  }
  text.resize(std::size_t(in.gcount()));
  if (text.size() > kMaxFileBytes) {
    d.error("", "larger than " + std::to_string(kMaxFileBytes) +
                    " bytes, the largest key file allowed");
    return Result<TenantTable>::failure(std::move(d));
  }
  return parse(text, objectives);
}

const Tenant* TenantTable::find(std::string_view key) const {
  if (key.size() < kMinKeyBytes || key.size() > kMaxKeyBytes) return nullptr;
  const auto it = by_digest_.find(sha256(key));
  return it == by_digest_.end() ? nullptr : &tenants_[it->second];
}

std::optional<std::string_view> bearerToken(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size()) return std::nullopt;
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    char c = authorization[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != kScheme[i]) return std::nullopt;
  }
  std::string_view rest = authorization.substr(kScheme.size());
  if (rest.front() != ' ') return std::nullopt;
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t')) rest.remove_suffix(1);
  if (rest.empty() || rest.find_first_of(" \t,") != std::string_view::npos) return std::nullopt;
  return rest;
}

TenantClaim claimFor(const Tenant& tenant, Priority claimed, bool named) noexcept {
  if (claimed <= tenant.maxPriority) return {claimed, false};
  return {tenant.maxPriority, named};
}

void TenantDirectory::install(TenantTable table) {
  std::map<std::string, std::shared_ptr<TenantStats>> stats;
  std::lock_guard lock(mu_);
  for (Tenant& t : table.tenants()) {
    auto& s = stats[t.name];
    if (const auto it = stats_.find(t.name); it != stats_.end()) s = it->second;
    if (!s) s = std::make_shared<TenantStats>();
    t.stats = s;
  }
  stats_ = std::move(stats);
  table_ = std::make_shared<const TenantTable>(std::move(table));
}

std::shared_ptr<const TenantTable> TenantDirectory::current() const {
  std::lock_guard lock(mu_);
  return table_;
}

TenantDirectory::Authentication TenantDirectory::authenticate(
    const std::vector<std::string_view>& authorization, bool countSuccess) {
  Authentication out;
  if (authorization.empty()) {
    missing.fetch_add(1, std::memory_order_relaxed);
    return out;
  }
  out.check = Check::kInvalid;
  const auto token = authorization.size() == 1 ? bearerToken(authorization.front()) : std::nullopt;
  const std::shared_ptr<const TenantTable> table = current();
  const Tenant* tenant = token && table ? table->find(*token) : nullptr;
  if (tenant == nullptr) {
    invalid.fetch_add(1, std::memory_order_relaxed);
    return out;
  }
  out.check = Check::kOk;
  out.tenant = std::shared_ptr<const Tenant>(table, tenant);
  if (countSuccess) tenant->stats->requests.fetch_add(1, std::memory_order_relaxed);
  return out;
}

std::vector<TenantDirectory::Row> TenantDirectory::rows() const {
  std::vector<Row> out;
  std::lock_guard lock(mu_);
  out.reserve(stats_.size());
  for (const auto& [name, s] : stats_) {
    out.push_back({name, s->requests.load(std::memory_order_relaxed),
                   s->clamped.load(std::memory_order_relaxed)});
  }
  return out;
}

}  // namespace holdback::gateway
