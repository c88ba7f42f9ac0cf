// libFuzzer target over the gateway's parsers of outside input, none of which needs a network:
// the request body scan, the fairness-id check and UTF-8 repair, the JSON nesting guard, a
// stream's usage scanner (upstream bytes), the replica sync's @restore text, feed events and
// headers and pending counts (Redis values), the API key file and the Authorization header,
// and the body reader's JSON pass against nlohmann's parser (the same verdict on every text).
// The first byte picks the parser, the rest is its input. Built and run by
// scripts/dev/fuzz-gateway-inputs.sh (clang 14, ASan + UBSan), not by CI.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gateway_http.hpp"
#include "holdback/core/text.hpp"
#include "json_scan.hpp"
#include "replica_figures_text.hpp"
#include "replica_input.hpp"
#include "tenants.hpp"

using namespace holdback;           // NOLINT(google-build-using-namespace)
using namespace holdback::gateway;  // NOLINT(google-build-using-namespace)

namespace {

// Both parsers refuse a start past 512 levels (below json_scan::kMaxLevels), else accept all.
struct FuzzDepth {
  std::size_t depth = 0;
  bool open() { return ++depth <= 512; }
  bool close() {
    --depth;
    return true;
  }
};

struct FuzzScanHandler {
  FuzzDepth d;
  bool null() { return true; }
  bool boolean(bool /*v*/) { return true; }
  bool integer(std::int64_t /*v*/) { return true; }
  bool unsignedInteger(std::uint64_t /*v*/) { return true; }
  bool floating() { return true; }
  bool string(std::string_view /*v*/) { return true; }
  bool key(std::string_view /*k*/) { return true; }
  bool startObject() { return d.open(); }
  bool endObject() { return d.close(); }
  bool startArray() { return d.open(); }
  bool endArray() { return d.close(); }
};

struct FuzzScanReference final : nlohmann::json_sax<nlohmann::json> {
  FuzzDepth d;
  bool null() override { return true; }
  bool boolean(bool /*v*/) override { return true; }
  bool number_integer(number_integer_t /*v*/) override { return true; }
  bool number_unsigned(number_unsigned_t /*v*/) override { return true; }
  bool number_float(number_float_t /*v*/, const string_t& /*s*/) override { return true; }
  bool string(string_t& /*v*/) override { return true; }
  bool binary(binary_t& /*v*/) override { return true; }
  bool start_object(std::size_t /*n*/) override { return d.open(); }
  bool key(string_t& /*k*/) override { return true; }
  bool end_object() override { return d.close(); }
  bool start_array(std::size_t /*n*/) override { return d.open(); }
  bool end_array() override { return d.close(); }
  bool parse_error(std::size_t /*pos*/, const std::string& /*token*/,
                   const nlohmann::detail::exception& /*e*/) override {
    return false;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  RejectReason why{};
  switch (data[0] % 9) {
    case 0: {
      const CompletionBody b = scanCompletionBody(in);
      if (b.tooDeep && b.object) __builtin_trap();  // a refused body is never an object
      break;
    }
    case 1: {
      (void)checkFairnessId(in);
      if (!isValidUtf8(toValidUtf8(in))) __builtin_trap();
      (void)jsonNestingExceeds(in, kMaxJsonNesting);
      break;
    }
    case 2: {
      ReplicaRestoreFigures f;
      (void)parseRestoreFigures(in, 1.0, 1.7e9, f, why);
      break;
    }
    case 3: {
      FeedEvent e;
      (void)parseFeedEvent(in, e, why);
      std::string_view id, fingerprint;
      (void)parseFeedHeader(in, id, fingerprint, why);
      break;
    }
    case 4: {
      InFlightLoad load;
      (void)parsePending(in, load, why);
      break;
    }
    case 5: {
      const auto table = TenantTable::parse(in, ObjectiveTable::builtin());
      if (table.ok()) (void)table.value().find(in);
      break;
    }
    case 6:
      (void)bearerToken(in);
      (void)printable(in);
      break;
    case 8: {
      FuzzScanHandler mine;
      FuzzScanReference reference;
      const bool got = json_scan::scan(in, mine);
      if (got != nlohmann::json::sax_parse(in.begin(), in.end(), &reference)) __builtin_trap();
      break;
    }
    default: {
      StreamUsageScanner scanner;
      scanner.feed(in);
      (void)scanner.known();
      break;
    }
  }
  return 0;
}
