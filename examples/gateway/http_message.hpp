// The proxied messages' heads as the gateway keeps them, and the parsers that fill them.
//
// Fields: a message's header fields in arrival order, each with the code Beast's tokenizer gave
// its name (http::field::unknown for a name it does not know), the name as received and the value.
// Their bytes live in an arena of the object (heap blocks only for a head larger than the inline
// part), and lookups scan the list: a usual head has a handful of fields, so a scan comparing
// codes (or lengths, then names case-insensitively) costs less than a tree of one node per field.
// Lookups return the first matching field, as Beast's basic_fields does.
//
// Request / ResponseHead: a request (start line, fields, whole body) and a response's head.
// RequestParser / ResponseParser: Beast's basic_parser (its tokenizer, limits and framing rules:
// header_limit, body_limit, chunked coding, Content-Length checks, keep-alive) filling them. A
// request's body is appended to Request::body(); a response's body to the string bodyTo() names,
// at most `limit` bytes (more: http::error::body_limit).
//
// Not copyable or movable (the fields' views point into the object). Not thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "net.hpp"

namespace holdback::gateway {

class Fields {
 public:
  class Field {
   public:
    Field(http::field code, std::string_view name, std::string_view value)
        : code_(code), name_(name), value_(value) {}
    [[nodiscard]] http::field name() const { return code_; }
    [[nodiscard]] std::string_view name_string() const { return name_; }
    [[nodiscard]] std::string_view value() const { return value_; }

   private:
    http::field code_;
    std::string_view name_;
    std::string_view value_;
  };
  using List = boost::container::small_vector<Field, 12>;
  using const_iterator = List::const_iterator;

  Fields() = default;
  Fields(const Fields&) = delete;
  Fields& operator=(const Fields&) = delete;
  ~Fields() = default;

  [[nodiscard]] const_iterator begin() const { return fields_.begin(); }
  [[nodiscard]] const_iterator end() const { return fields_.end(); }
  [[nodiscard]] std::size_t size() const { return fields_.size(); }

  // The first field with this code (known names only) or this name (case-insensitively).
  [[nodiscard]] const_iterator find(http::field code) const;
  [[nodiscard]] const_iterator find(std::string_view name) const;
  // Its value; empty when there is none.
  [[nodiscard]] std::string_view operator[](http::field code) const;
  [[nodiscard]] std::string_view operator[](std::string_view name) const;
  [[nodiscard]] std::size_t count(http::field code) const;

  // Appends a field (a known name: `code`'s canonical spelling).
  void insert(http::field code, std::string_view value);
  void insert(http::field code, std::string_view name, std::string_view value);
  // Removes every field with this code.
  void erase(http::field code);
  // insert() for a field as Beast's parser reports it: `name` and `value` point into the parsed
  // input, where the name is followed by ':' (so one copy of "Name: value" may keep both).
  void insertParsed(http::field code, std::string_view name, std::string_view value);

 protected:
  // A copy of `s` in the arena.
  std::string_view keep(std::string_view s);

 private:
  static constexpr std::size_t kInlineBytes = 768;
  List fields_;
  std::size_t used_ = 0;  // of inline_, then of the last block
  std::size_t capacity_ = kInlineBytes;
  char* top_ = inline_.data();
  std::vector<std::unique_ptr<char[]>> blocks_;
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-member-init): written before read
  std::array<char, kInlineBytes> inline_;
};

class Request : public Fields {
 public:
  Request() = default;
  Request(http::verb method, std::string_view target, unsigned version);
  [[nodiscard]] http::verb method() const { return method_; }
  [[nodiscard]] std::string_view method_string() const { return methodString_; }
  [[nodiscard]] std::string_view target() const { return target_; }
  void target(std::string_view t) { target_ = keep(t); }
  [[nodiscard]] unsigned version() const { return version_; }
  // Whether the connection stays open after this request (the parser's verdict: the version and
  // the Connection field).
  [[nodiscard]] bool keep_alive() const { return keepAlive_; }
  void keep_alive(bool k) { keepAlive_ = k; }
  [[nodiscard]] std::string& body() { return body_; }
  [[nodiscard]] const std::string& body() const { return body_; }
  // The start line, from the parser.
  void start(http::verb method, std::string_view methodString, std::string_view target,
             unsigned version);

 private:
  http::verb method_ = http::verb::unknown;
  std::string_view methodString_;
  std::string_view target_;
  unsigned version_ = 11;
  bool keepAlive_ = true;
  std::string body_;
};

class ResponseHead : public Fields {
 public:
  [[nodiscard]] unsigned result_int() const { return status_; }
  [[nodiscard]] http::status result() const { return http::int_to_status(status_); }
  [[nodiscard]] unsigned version() const { return version_; }
  void start(unsigned status, unsigned version) {
    status_ = status;
    version_ = version;
  }

 private:
  unsigned status_ = 0;
  unsigned version_ = 11;
};

class RequestParser final : public http::basic_parser<true> {
 public:
  explicit RequestParser(Request& request) : request_(request) {}

 private:
  Request& request_;
  void on_request_impl(http::verb method, beast::string_view methodString,
                       beast::string_view target, int version, beast::error_code& ec) override;
  void on_response_impl(int, beast::string_view, int, beast::error_code&) override {}
  void on_field_impl(http::field name, beast::string_view nameString, beast::string_view value,
                     beast::error_code& ec) override;
  void on_header_impl(beast::error_code& ec) override;
  void on_body_init_impl(const boost::optional<std::uint64_t>& length,
                         beast::error_code& ec) override;
  std::size_t on_body_impl(beast::string_view body, beast::error_code& ec) override;
  void on_chunk_header_impl(std::uint64_t, beast::string_view, beast::error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t remain, beast::string_view body,
                                 beast::error_code& ec) override;
  void on_finish_impl(beast::error_code&) override {}
};

class ResponseParser final : public http::basic_parser<false> {
 public:
  explicit ResponseParser(ResponseHead& head) : head_(head) {}
  // Where the body's bytes go, and how many of them in all at most.
  void bodyTo(std::string* out, std::size_t limit) {
    body_ = out;
    bodyLimit_ = limit;
  }
  // The body bytes parsed so far.
  [[nodiscard]] std::uint64_t bodyBytes() const { return bodyBytes_; }

 private:
  ResponseHead& head_;
  std::string* body_ = nullptr;
  std::size_t bodyLimit_ = 0;
  std::uint64_t bodyBytes_ = 0;
  void on_request_impl(http::verb, beast::string_view, beast::string_view, int,
                       beast::error_code&) override {}
  void on_response_impl(int code, beast::string_view reason, int version,
                        beast::error_code& ec) override;
  void on_field_impl(http::field name, beast::string_view nameString, beast::string_view value,
                     beast::error_code& ec) override;
  void on_header_impl(beast::error_code& ec) override;
  void on_body_init_impl(const boost::optional<std::uint64_t>&, beast::error_code& ec) override;
  std::size_t on_body_impl(beast::string_view body, beast::error_code& ec) override;
  void on_chunk_header_impl(std::uint64_t, beast::string_view, beast::error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t remain, beast::string_view body,
                                 beast::error_code& ec) override;
  void on_finish_impl(beast::error_code&) override {}
};

}  // namespace holdback::gateway
