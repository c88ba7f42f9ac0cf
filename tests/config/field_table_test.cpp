// The field tables (core/field_table.hpp) and what the config layer drives from them.
#include "holdback/core/field_table.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>

#include "holdback/config/detail/flow_control_fields.hpp"
#include "holdback/config/effective_config.hpp"
#include "holdback/config/endpoint_picker_config.hpp"
#include "holdback/detector/detail/concurrency_detector_fields.hpp"
#include "holdback/detector/detail/detectors_fields.hpp"
#include "holdback/detector/detail/dispatch_ledger_fields.hpp"
#include "holdback/flow/detail/band_fields.hpp"
#include "holdback/flow/detail/band_scheduling_fields.hpp"
#include "holdback/flow/detail/eviction_fields.hpp"
#include "holdback/flow/detail/vtc_fairness_fields.hpp"
#include "holdback/policy/detail/policies_fields.hpp"
#include "holdback/policy/detail/reservation_fields.hpp"

namespace holdback {
namespace {

TEST(FieldTableTest, IntervalsAcceptWhatTheyWrite) {
  constexpr FieldCheck half_open = outside("(0.0, 1.0]");
  static_assert(!half_open.accepts(0.0) && half_open.accepts(1.0) && half_open.accepts(0.5));
  static_assert(!half_open.accepts(1.0000001));
  constexpr FieldCheck finite = must("[0, inf)", "must be a finite number >= 0");
  static_assert(finite.accepts(0.0) && !finite.accepts(-0.5));
  EXPECT_FALSE(finite.accepts(std::numeric_limits<double>::infinity()));
  EXPECT_FALSE(finite.accepts(std::nan("")));
  constexpr FieldCheck signed_range = integerIn("[-10, 12.5]");
  static_assert(signed_range.accepts(-10.0) && signed_range.accepts(12.5));
  static_assert(!signed_range.accepts(-10.5) && !signed_range.accepts(12.75));
}

// Each form of message, as validate() reports it.
TEST(FieldTableTest, ChecksReportInTheComponentsWording) {
  Diagnostics d;
  ReservationOptions o;
  o.epsilon = 0.75;                            // kOutside
  o.minReserve = -1.0;                         // kValue
  o.smoothing.rise = Duration::zero();         // kBare
  o.refillHorizon = std::chrono::seconds(-1);  // kBare, an optional that is set
  checkFields<ReservationOptions>(kReservationFields, o, "/p", d);
  ASSERT_EQ(d.errorCount(), 4U) << d.toString();
  EXPECT_EQ(d.all()[0].path, "/p/epsilon");
  EXPECT_EQ(d.all()[0].message, "0.75 is outside (0.0, 0.5]");
  EXPECT_EQ(d.all()[1].message, "-1.0 must be a finite number >= 0");
  EXPECT_EQ(d.all()[2].path, "/p/refillHorizon");
  EXPECT_EQ(d.all()[2].message, "must not be negative");
  EXPECT_EQ(d.all()[3].path, "/p/riseTime");
  EXPECT_EQ(d.all()[3].message, "must be positive");
  EXPECT_FALSE(fieldValid<ReservationOptions>(kReservationFields, "epsilon", o));
  EXPECT_TRUE(fieldValid<ReservationOptions>(kReservationFields, "minCeiling", o));
}

// A row applies only where its `when` holds: the sigmoid's keys under sigmoid-smoothed.
TEST(FieldTableTest, RowsApplyWhereTheirConditionHolds) {
  PriorityHoldbackOptions o;
  o.sigmoidSteepness = 500.0;
  Diagnostics stepwise;
  checkFields<PriorityHoldbackOptions>(kPriorityHoldbackFields, o, "", stepwise);
  EXPECT_EQ(stepwise.errorCount(), 0U);
  o.strategy = HoldbackStrategy::kSigmoidSmoothed;
  Diagnostics sigmoid;
  checkFields<PriorityHoldbackOptions>(kPriorityHoldbackFields, o, "", sigmoid);
  ASSERT_EQ(sigmoid.errorCount(), 1U);
  EXPECT_EQ(sigmoid.all()[0].message, "500.0 is outside (0.0, 100.0]");
}

template <class Options>
void fieldTableExpectSound(FieldTable<Options> table, const char* name) {
  std::set<std::string_view> keys;
  const Options defaults{};
  for (const Field<Options>& f : table) {
    EXPECT_TRUE(keys.insert(f.key).second) << name << ": " << f.key << " twice";
    EXPECT_TRUE(f.checkedBefore.empty() || findField(table, f.checkedBefore) != nullptr)
        << name << ": " << f.key << " is checked before a key the table does not have";
    EXPECT_TRUE(!f.meaning.empty() || !f.deprecated.empty())
        << name << ": " << f.key << " has neither a meaning nor a deprecation";
    if (f.bind.get != nullptr && f.applies(defaults)) {
      EXPECT_EQ(failedCheck(f, f.bind.get(defaults)), nullptr)
          << name << ": the default of " << f.key << " fails its own checks";
    }
  }
}

TEST(FieldTableTest, EveryTableIsSound) {
  fieldTableExpectSound<StaticUsageLimitOptions>(kStaticUsageLimitFields, "static");
  fieldTableExpectSound<PriorityHoldbackOptions>(kPriorityHoldbackFields, "priority-holdback");
  fieldTableExpectSound<ReservationOptions>(kReservationFields, "reservation");
  fieldTableExpectSound<UtilizationDetectorOptions>(kUtilizationDetectorFields, "utilization");
  fieldTableExpectSound<ConcurrencyDetectorOptions>(kConcurrencyDetectorFields, "concurrency");
  fieldTableExpectSound<DispatchLedgerOptions>(kDispatchLedgerFields, "dispatchLedger");
  fieldTableExpectSound<BandSchedulingOptions>(kBandSchedulingFields, "bandScheduling");
  fieldTableExpectSound<VtcFairnessOptions>(kVtcFairnessFields, "vtc-fairness-policy");
}

// The choices a row lists are the names the components print (toString).
TEST(FieldTableTest, ChoicesMatchTheEnumsNames) {
  for (const FieldChoice& c :
       findField<PriorityHoldbackOptions>(kPriorityHoldbackFields, "strategy")->choices) {
    if (!c.name.empty()) {
      EXPECT_EQ(toString(static_cast<HoldbackStrategy>(c.value)), c.name);
    }
  }
  for (const FieldChoice& c :
       findField<UtilizationDetectorOptions>(kUtilizationDetectorFields, "aggregation")->choices) {
    if (!c.name.empty()) {
      EXPECT_EQ(toString(static_cast<Aggregation>(c.value)), c.name);
    }
  }
  for (const FieldChoice& c :
       findField<ConcurrencyDetectorOptions>(kConcurrencyDetectorFields, "concurrencyMode")
           ->choices) {
    if (!c.name.empty()) {
      EXPECT_EQ(toString(static_cast<ConcurrencyMode>(c.value)), c.name);
    }
  }
  for (const FieldChoice& c :
       findField<PriorityHoldbackOptions>(kPriorityHoldbackFields, "sigmoidDomain")->choices) {
    if (!c.name.empty()) {
      EXPECT_EQ(toString(static_cast<SigmoidDomain>(c.value)), c.name);
    }
  }
}

// The detectors' shared headroom row: two errors and a warning, the first failing one reported.
TEST(FieldTableTest, HeadroomReportsTheFirstFailingCheck) {
  const auto headroom = [](double v) {
    ConcurrencyDetectorOptions o;
    o.headroom = v;
    Diagnostics d;
    checkFields<ConcurrencyDetectorOptions>(kConcurrencyDetectorFields, o, "", d);
    return d;
  };
  EXPECT_EQ(headroom(std::nan("")).all().at(0).message,
            "nan is not finite; expected a number >= 0.0");
  EXPECT_EQ(headroom(-0.5).all().at(0).message, "-0.5 is negative; expected a number >= 0.0");
  const Diagnostics above = headroom(1.5);
  ASSERT_EQ(above.all().size(), 1U);
  EXPECT_EQ(above.all()[0].severity, Severity::kWarning);
  EXPECT_TRUE(headroom(1.0).all().empty());
}

// The export lists every row, with its meaning, use and default.
TEST(FieldTableTest, SchemaExportsEveryRow) {
  const config::OrderedJson schema = config::configSchema();
  ASSERT_TRUE(schema.contains("sections"));
  std::set<std::string> sections;
  for (const auto& s : schema["sections"]) {
    sections.insert(s["section"].get<std::string>());
    if (s["section"] == "reservation-holdback-policy") {
      EXPECT_EQ(s["fields"].size(), kReservationFields.size());
      const auto& min_reserve = s["fields"][4];
      EXPECT_EQ(min_reserve["key"], "minReserve");
      EXPECT_EQ(min_reserve["use"], "common");
      EXPECT_EQ(min_reserve["default"], 0.0);
      EXPECT_EQ(min_reserve["meaning"], kReservationFields[4].meaning);
      EXPECT_EQ(s["fields"][1]["deprecated"], kReservationFields[1].deprecated);
    }
  }
  EXPECT_EQ(sections,
            (std::set<std::string>{"static-usage-limit-policy", "priority-holdback-policy",
                                   "reservation-holdback-policy", "utilization-detector",
                                   "concurrency-detector", "flowControl", "program-aware-fairness",
                                   "band", "vtc-fairness-policy"}));
}

// The keys the loader accepts in flowControl, a band, eviction and restoreReserve are exactly
// their tables' rows: an unknown key's error lists the allowed ones.
template <class Options>
std::string fieldTableAllowedKeys(FieldTable<Options> table) {
  std::set<std::string> keys;
  for (const Field<Options>& f : table) keys.insert(std::string(f.key));
  std::string out;
  for (const std::string& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

TEST(FieldTableTest, FlowControlBandAndEvictionKeysAreTheTablesRows) {
  const auto loaded = config::loadEndpointPickerConfigText(R"({
    "apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
    "featureGates": ["flowControl"],
    "flowControl": {"bogus": 1, "priorityBands": [{"priority": 1, "bogus": 1}],
                    "eviction": {"bogus": 1, "restoreReserve": {"bogus": 1}}}})");
  ASSERT_FALSE(loaded);
  std::map<std::string, std::string> messages;
  for (const Diagnostic& d : loaded.diagnostics().all()) messages[d.path] = d.message;
  const auto allowed = [](const std::string& keys) {
    return "unknown key \"bogus\"; allowed keys: " + keys;
  };
  EXPECT_EQ(messages["/flowControl/bogus"],
            allowed(fieldTableAllowedKeys<config::ConfigBundle>(kFlowControlFields)));
  EXPECT_EQ(messages["/flowControl/priorityBands/0/bogus"],
            allowed(fieldTableAllowedKeys<BandOptions>(kBandFields)));
  EXPECT_EQ(messages["/flowControl/eviction/bogus"],
            allowed(fieldTableAllowedKeys<EvictionOptions>(kEvictionFields)));
  EXPECT_EQ(messages["/flowControl/eviction/restoreReserve/bogus"],
            allowed(fieldTableAllowedKeys<ReserveRestoreOptions>(kReserveRestoreFields)));
}

}  // namespace
}  // namespace holdback
