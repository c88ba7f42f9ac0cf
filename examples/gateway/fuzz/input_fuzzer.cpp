// libFuzzer target over the gateway's parsers of outside input, none of which needs a network:
// the request body scan, the fairness-id check and UTF-8 repair, the JSON nesting guard, a
// stream's usage scanner (upstream bytes), the replica sync's @restore text, feed events and
// headers and pending counts (Redis values), the API key file and the Authorization header,
// the body reader's JSON pass against nlohmann's parser (the same verdict on every text, and
// the same events on every text both accept), and the request and response parsers
// (http_message.hpp: Beast's tokenizer filling the gateway's own fields and bodies).
// The first byte picks the parser, the rest is its input. Built and run by
// scripts/dev/fuzz-gateway-inputs.sh (clang 14, ASan + UBSan), not by CI.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gateway_http.hpp"
#include "holdback/core/text.hpp"
#include "http_message.hpp"
#include "json_scan.hpp"
#include "replica_figures_text.hpp"
#include "replica_input.hpp"
#include "tenants.hpp"
#include "tests/json_scan_reference.hpp"

using namespace holdback;           // NOLINT(google-build-using-namespace)
using namespace holdback::gateway;  // NOLINT(google-build-using-namespace)

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  RejectReason why{};
  switch (data[0] % 11) {
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
      json_scan_reference::JsonScanRecorder mine;
      json_scan_reference::JsonScanReference reference;
      const bool got = json_scan::scan(in, mine);
      if (got != nlohmann::json::sax_parse(in.begin(), in.end(), &reference)) __builtin_trap();
      if (got && mine.log.events != reference.log.events) __builtin_trap();
      break;
    }
    case 9: {  // a request, as the gateway reads one: within its head and body limits
      Request r;
      RequestParser parser(r);
      parser.header_limit(4096);
      parser.body_limit(1024);
      parser.eager(true);
      beast::error_code ec;
      (void)parser.put(asio::buffer(in.data(), in.size()), ec);
      if (r.body().size() > 1024) __builtin_trap();
      for (const auto& f : r) {
        if (r.find(f.name_string()) == r.end()) __builtin_trap();
      }
      break;
    }
    case 10: {  // a response: the body collected up to its limit, never past it
      ResponseHead h;
      ResponseParser parser(h);
      std::string body;
      parser.bodyTo(&body, 512);
      parser.eager(true);
      beast::error_code ec;
      (void)parser.put(asio::buffer(in.data(), in.size()), ec);
      if (body.size() > 512 || parser.bodyBytes() != body.size()) __builtin_trap();
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
