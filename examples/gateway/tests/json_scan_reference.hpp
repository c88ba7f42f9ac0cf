// The JSON reader's events and nlohmann::json::sax_parse's as one log each, so the two parsers
// can be compared: by tests/json_scan_test.cpp and by the gateway's input fuzzer
// (fuzz/input_fuzzer.cpp). A start past `limit` levels is refused (stops the scan).
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace holdback::gateway::json_scan_reference {

// Both parsers' events as one line each.
struct JsonScanLog {
  std::vector<std::string> events;
  std::size_t depth = 0;
  std::size_t limit = 1000;
  bool open(const char* what) {
    events.emplace_back(what);
    return ++depth <= limit;
  }
  bool close(const char* what) {
    --depth;
    events.emplace_back(what);
    return true;
  }
  bool add(std::string e) {
    events.push_back(std::move(e));
    return true;
  }
};

// The json_scan handler.
struct JsonScanRecorder {
  JsonScanLog log;
  bool null() { return log.add("null"); }
  bool boolean(bool v) { return log.add(v ? "true" : "false"); }
  bool integer(std::int64_t v) { return log.add("int " + std::to_string(v)); }
  bool unsignedInteger(std::uint64_t v) { return log.add("uint " + std::to_string(v)); }
  bool floating() { return log.add("float"); }
  bool string(std::string_view v) { return log.add("string " + std::string(v)); }
  bool key(std::string_view k) { return log.add("key " + std::string(k)); }
  bool startObject() { return log.open("{"); }
  bool endObject() { return log.close("}"); }
  bool startArray() { return log.open("["); }
  bool endArray() { return log.close("]"); }
};

// The same handler for nlohmann's SAX parser.
struct JsonScanReference final : nlohmann::json_sax<nlohmann::json> {
  JsonScanLog log;
  bool null() override { return log.add("null"); }
  bool boolean(bool v) override { return log.add(v ? "true" : "false"); }
  bool number_integer(number_integer_t v) override { return log.add("int " + std::to_string(v)); }
  bool number_unsigned(number_unsigned_t v) override {
    return log.add("uint " + std::to_string(v));
  }
  bool number_float(number_float_t /*v*/, const string_t& /*s*/) override {
    return log.add("float");
  }
  bool string(string_t& v) override { return log.add("string " + v); }
  bool binary(binary_t& /*v*/) override { return log.add("binary"); }
  bool start_object(std::size_t /*n*/) override { return log.open("{"); }
  bool key(string_t& k) override { return log.add("key " + k); }
  bool end_object() override { return log.close("}"); }
  bool start_array(std::size_t /*n*/) override { return log.open("["); }
  bool end_array() override { return log.close("]"); }
  bool parse_error(std::size_t /*pos*/, const std::string& /*token*/,
                   const nlohmann::detail::exception& /*e*/) override {
    return false;
  }
};

}  // namespace holdback::gateway::json_scan_reference
