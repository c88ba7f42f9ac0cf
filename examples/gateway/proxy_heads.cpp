#include "proxy_heads.hpp"

#include <charconv>
#include <cstring>
#include <iterator>
#include <string>
#include <string_view>

#include "holdback/flow/request_headers.hpp"

namespace holdback::gateway {

bool isHopByHop(std::string_view name) {
  // By length first: most headers of a request or response match none of these lengths, or one
  // name of that length, so each field costs one case-insensitive comparison at most two.
  switch (name.size()) {
    case 2:
      return beast::iequals(name, "te");
    case 4:
      return beast::iequals(name, "host");
    case 6:
      return beast::iequals(name, "expect");
    case 7:
      return beast::iequals(name, "trailer") || beast::iequals(name, "upgrade");
    case 10:
      return beast::iequals(name, "connection") || beast::iequals(name, "keep-alive");
    case 14:
      return beast::iequals(name, "content-length");
    case 16:
      return beast::iequals(name, "proxy-connection");
    case 17:
      return beast::iequals(name, "transfer-encoding");
    default:
      return false;
  }
}

bool transferCodingSupported(const Fields& fields) {
  const auto first = fields.find(http::field::transfer_encoding);
  if (first == fields.end()) return true;
  if (fields.count(http::field::transfer_encoding) != 1) return false;
  std::string_view v = first->value();
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return beast::iequals(v, "chunked");
}

namespace {

// The same fixed names, by the field code Beast's parser gave each field (it recognizes every
// one of them, case-insensitively): no string comparison for the fields of a message.
bool isHopByHop(http::field name) {
  switch (name) {
    case http::field::te:
    case http::field::host:
    case http::field::expect:
    case http::field::trailer:
    case http::field::upgrade:
    case http::field::connection:
    case http::field::keep_alive:
    case http::field::content_length:
    case http::field::proxy_connection:
    case http::field::transfer_encoding:
      return true;
    default:
      return false;
  }
}

// Whether a field listed in the message's Connection header (`connection`, empty when absent).
bool listedInConnection(std::string_view name, std::string_view connection) {
  if (connection.empty()) return false;
  for (const auto token : http::token_list{connection}) {
    if (beast::iequals(std::string_view(token.data(), token.size()), name)) return true;
  }
  return false;
}

// isHopByHop(name, connection) for a field of a parsed message.
template <class Field>
bool isHopByHopField(const Field& field, std::string_view connection) {
  return isHopByHop(field.name()) || listedInConnection(field.name_string(), connection);
}

}  // namespace

// Whether `name` is hop-by-hop in a message with these header fields: one of the fixed hop-by-hop
// names above, or one the message's own Connection header lists (RFC 9110 section 7.6.1:
// `Connection: keep-alive, X-Trace` makes X-Trace hop-by-hop). `connection` is that header's
// value (empty when absent).
bool isHopByHop(std::string_view name, std::string_view connection) {
  return isHopByHop(name) || listedInConnection(name, connection);
}

// "Name: value\r\n". Names and values come from Beast's parsers, which refuse CR, LF and other
// control characters in them, so they cannot split a header. One resize and two copies (four
// appends each checked the capacity and copied separately).
void appendField(std::string& out, std::string_view name, std::string_view value) {
  const std::size_t at = out.size();
  out.resize(at + name.size() + value.size() + 4);
  char* p = out.data() + at;
  std::memcpy(p, name.data(), name.size());
  p += name.size();
  *p++ = ':';
  *p++ = ' ';
  std::memcpy(p, value.data(), value.size());
  p += value.size();
  *p++ = '\r';
  *p = '\n';
}

namespace {

// Writes a head into a buffer on the stack and appends it to `out` in one copy when the buffer is
// full and at flush() (call it when done): the heads are a few hundred bytes, written piece by
// piece, and growing the string for every field cost a resize (with its zero fill) per field. A
// piece larger than the buffer is appended directly.
class HeadWriter {
 public:
  explicit HeadWriter(std::string& out) noexcept : out_(out) {}
  HeadWriter(const HeadWriter&) = delete;
  HeadWriter& operator=(const HeadWriter&) = delete;

  HeadWriter& add(std::string_view s) {
    if (s.size() > kRoom - used_) {
      flush();
      if (s.size() > kRoom) {
        out_.append(s);
        return *this;
      }
    }
    std::memcpy(buf_ + used_, s.data(), s.size());
    used_ += s.size();
    return *this;
  }
  // "Name: value\r\n" (names and values as appendField's): one room check, two copies.
  void field(std::string_view name, std::string_view value) {
    const std::size_t n = name.size() + value.size() + 4;
    if (n > kRoom - used_) {
      flush();
      if (n > kRoom) {
        appendField(out_, name, value);
        return;
      }
    }
    char* p = buf_ + used_;
    std::memcpy(p, name.data(), name.size());
    p += name.size();
    p[0] = ':';
    p[1] = ' ';
    std::memcpy(p + 2, value.data(), value.size());
    p += 2 + value.size();
    p[0] = '\r';
    p[1] = '\n';
    used_ += n;
  }
  // "Name: <decimal>\r\n".
  template <class Integer>
  void number(std::string_view name, Integer value) {
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
    field(name, std::string_view(digits, std::size_t(end - digits)));
  }
  void flush() {
    out_.append(buf_, used_);
    used_ = 0;
  }

 private:
  static constexpr std::size_t kRoom = 1024;
  std::string& out_;
  std::size_t used_ = 0;
  char buf_[kRoom];
};

}  // namespace

// The head of the request to the model server (its body is the second buffer of the same gather
// write): the client's headers except the hop-by-hop ones, Host, a default Content-Type, and the
// body's Content-Length (a chunked request's body was read whole). HTTP/1.1 without
// "Connection: close": the connection is kept alive.
std::string upstreamRequestHead(const Request& request, std::string_view host) {
  std::string head;
  head.reserve(512);
  HeadWriter w(head);
  w.add(request.method_string()).add(" ").add(request.target()).add(" HTTP/1.1\r\n");
  const std::string_view connection = request[http::field::connection];
  for (const auto& field : request) {
    if (!isHopByHopField(field, connection)) w.field(field.name_string(), field.value());
  }
  w.field("Host", host);
  if (request.find(http::field::content_type) == request.end()) {
    w.field("Content-Type", "application/json");
  }
  w.number("Content-Length", request.body().size());
  w.add("\r\n");
  w.flush();
  return head;
}

// An interim (1xx) response passed on to the client: its status line and end-to-end fields.
std::string interimResponseHead(const ResponseHead& interim) {
  std::string hint;
  hint.append("HTTP/1.1 ").append(std::to_string(interim.result_int())).append(" ");
  hint.append(http::obsolete_reason(interim.result())).append("\r\n");
  const std::string_view connection = interim[http::field::connection];
  for (const auto& field : interim) {
    if (!isHopByHopField(field, connection)) {
      appendField(hint, field.name_string(), field.value());
    }
  }
  hint.append("\r\n");
  return hint;
}

// The head of a response to the client: the status line, the model server's content type and
// passed headers, the gateway's two headers, the framing (a Content-Length, or chunked), and
// "Connection: close" when the client's connection ends after it. A stream to an HTTP/1.0 client
// (no chunked coding: RFC 9112 section 6.1) has neither framing header: its body ends with the
// connection, which the caller closes (what.keepAlive is false for it).
void appendResponseHead(std::string& out, const ResponseHead& upstream,
                        std::string_view contentType, const ProxyRequest& what,
                        std::optional<std::size_t> contentLength) {
  HeadWriter w(out);
  const unsigned status = upstream.result_int();  // three digits, as the parser took them
  const char code[] = {char('0' + status / 100 % 10), char('0' + status / 10 % 10),
                       char('0' + status % 10)};
  w.add("HTTP/1.1 ").add(std::string_view(code, 3)).add(" ");
  w.add(http::obsolete_reason(http::int_to_status(status))).add("\r\n");
  w.field("Content-Type", contentType);
  // The response headers to pass on (Content-Encoding in particular: the SDKs ask for gzip).
  const std::string_view connection = upstream[http::field::connection];
  for (const auto& field : upstream) {
    if (field.name() != http::field::content_type && !isHopByHopField(field, connection) &&
        (field.name() != http::field::unknown ||
         !beast::iequals(field.name_string(), kBandHeadroomHeader))) {
      w.field(field.name_string(), field.value());
    }
  }
  w.field(kEndpointHeader, what.endpointUrl);
  w.number(kQueuedMsHeader, what.queuedMs);
  if (what.bandHeadroom) {
    if (const auto room = what.bandHeadroom()) w.number(kBandHeadroomHeader, *room);
  }
  if (contentLength) {
    w.number("Content-Length", *contentLength);
  } else if (what.chunked) {
    w.field("Transfer-Encoding", "chunked");
  }
  if (!what.keepAlive) w.field("Connection", "close");
  w.add("\r\n");
  w.flush();
}

}  // namespace holdback::gateway
