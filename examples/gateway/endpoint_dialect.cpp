#include "endpoint_dialect.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>

namespace holdback::gateway {
namespace {

// The flag and the quantity of each --metric-* flag.
struct MetricFlag {
  const char* flag;
  DialectQuantity quantity;
};
constexpr MetricFlag kMetricFlags[] = {
    {"--metric-waiting", DialectQuantity::kWaiting},
    {"--metric-running", DialectQuantity::kRunning},
    {"--metric-kv-usage", DialectQuantity::kKvUsage},
    {"--metric-kv-capacity-tokens", DialectQuantity::kKvCapacityTokens},
    {"--metric-slots", DialectQuantity::kSlots},
};

std::string builtinNames() {
  std::string out;
  for (const MetricDialect& d : builtinMetricDialects()) out += (out.empty() ? "" : ", ") + d.name;
  return out;
}

std::string knownDialects() {
  return "auto, custom, " + builtinNames();
}

VllmTelemetry toTelemetry(const DialectReading& r) {
  // An engine without a KV gauge (TGI) reads as 0: the queue alone gates it
  // (docs/guide/engines.md).
  return {.waiting = r.get(DialectQuantity::kWaiting).value_or(0.0),
          .running = r.get(DialectQuantity::kRunning).value_or(0.0),
          .kvCacheUsage = r.get(DialectQuantity::kKvUsage).value_or(0.0),
          .reportedKvCapacityTokens = r.get(DialectQuantity::kKvCapacityTokens),
          .reportedSlots = r.get(DialectQuantity::kSlots)};
}

}  // namespace

DialectChoices resolveDialects(const Options& o, std::vector<std::string>& errors) {
  DialectChoices out;
  if (!o.metricSpecs.empty()) {
    out.custom = std::make_unique<MetricDialect>();
    out.custom->name = "custom";
    out.custom->required = 0;
    for (const auto& [flag, spec] : o.metricSpecs) {
      DialectQuantity q = DialectQuantity::kWaiting;
      for (const MetricFlag& f : kMetricFlags) {
        if (flag == f.flag) q = f.quantity;
      }
      std::string error;
      auto src = parseMetricSource(spec, &error);
      if (!src) {
        errors.push_back(flag + ": " + error);
        continue;
      }
      out.custom->sources[std::size_t(q)].push_back(std::move(*src));
      // Every quantity named is required: a custom mapping naming an absent metric is an error.
      out.custom->required |= 1U << unsigned(q);
    }
    if (out.custom->of(DialectQuantity::kWaiting).empty()) {
      errors.emplace_back(
          "--metric-*: a custom mapping needs --metric-waiting (the queue holdback gates on)");
    }
  }
  if (!o.dialectFile.empty()) {
    std::ifstream in(o.dialectFile);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) {
      errors.push_back("--dialect-file " + o.dialectFile + ": cannot be read");
    } else {
      MetricDialectsLoad load = parseMetricDialects(text.str());
      for (const std::string& e : load.errors) errors.push_back(o.dialectFile + ":" + e);
      out.fromFile = std::move(load.dialects);
    }
  }
  // name -> dialect; "auto": detect; "custom": the --metric-* mapping.
  auto lookup = [&](const std::string& name, const std::string& path, DialectChoice& choice) {
    choice.path = path;
    if (name == "auto") return;
    if (name == "custom") {
      if (!out.custom) errors.push_back(path + ": \"custom\" needs --metric-waiting (and others)");
      choice.dialect = out.custom.get();
      return;
    }
    for (std::size_t i = 0; i < out.fromFile.size(); ++i) {
      if (out.fromFile[i].name != name) continue;
      choice = {&out.fromFile[i], o.dialectFile + ":/dialects/" + std::to_string(i)};
      return;
    }
    choice.dialect = findMetricDialect(name);
    if (!choice.dialect) {
      std::string allowed = knownDialects();
      for (const MetricDialect& d : out.fromFile) allowed += ", " + d.name;
      errors.push_back(path + ": \"" + name + "\" is not a dialect (allowed: " + allowed + ")");
    }
  };
  DialectChoice pool_choice;
  if (o.dialect == "auto" && out.custom) {
    pool_choice = {out.custom.get(), "--metric-*"};
  } else {
    lookup(o.dialect, "--dialect " + o.dialect, pool_choice);
  }
  out.perEndpoint.assign(o.endpointUrls.size(), pool_choice);
  for (const auto& [url, name] : o.endpointDialects) {
    std::string u = url;
    if (!u.empty() && u.back() == '/') u.pop_back();
    bool found = false;
    for (std::size_t i = 0; i < o.endpointUrls.size(); ++i) {
      if (o.endpointUrls[i] != u) continue;
      found = true;
      lookup(name, "--endpoint-dialect " + url + "=" + name, out.perEndpoint[i]);
    }
    if (!found) {
      errors.push_back("--endpoint-dialect " + url + "=" + name + ": \"" + url +
                       "\" is not one of the --endpoint URLs");
    }
  }
  return out;
}

EndpointDialect::EndpointDialect(DialectChoice choice, std::string url)
    : choice_(std::move(choice)), url_(std::move(url)), current_(choice_.dialect) {
  if (current_) name_ = current_->name;
}

std::optional<VllmTelemetry> EndpointDialect::read(const ParsedPrometheusText& metrics) {
  if (choice_.dialect) {
    const DialectReading r = readMetricDialect(*choice_.dialect, metrics);
    if (!r.complete(*choice_.dialect)) {
      std::vector<std::string> errors = checkMetricDialect(*choice_.dialect, metrics, choice_.path);
      if (errors != mapping_errors_) {
        for (const std::string& e : errors) {
          std::fprintf(stderr, "holdback-gateway: %s/metrics: %s (it exposes: %s)\n", url_.c_str(),
                       e.c_str(), describeExposedMetrics(metrics).c_str());
        }
      }
      mapping_errors_ = std::move(errors);
      return std::nullopt;
    }
    mapping_errors_.clear();
    return toTelemetry(r);
  }
  // Detection: keep the dialect while it reads; otherwise detect again.
  DialectReading r;
  if (current_) r = readMetricDialect(*current_, metrics);
  if (!current_ || !r.complete(*current_)) {
    const MetricDialect* found = detectMetricDialect(metrics);
    if (!found) {
      if (!reported_unknown_) {
        std::fprintf(stderr,
                     "holdback-gateway: %s/metrics matches no metric dialect (%s); it exposes: "
                     "%s; name its metrics with --metric-waiting etc.\n",
                     url_.c_str(), builtinNames().c_str(), describeExposedMetrics(metrics).c_str());
        reported_unknown_ = true;
      }
      return std::nullopt;
    }
    reported_unknown_ = false;
    if (found != current_) {
      if (current_) {
        std::fprintf(stderr, "holdback-gateway: %s/metrics: dialect changed from %s to %s\n",
                     url_.c_str(), current_->name.c_str(), found->name.c_str());
      } else {
        std::fprintf(stderr, "holdback-gateway: %s/metrics: detected dialect %s\n", url_.c_str(),
                     found->name.c_str());
      }
      current_ = found;
      name_ = found->name;
    }
    r = readMetricDialect(*current_, metrics);
  }
  return toTelemetry(r);
}

}  // namespace holdback::gateway
