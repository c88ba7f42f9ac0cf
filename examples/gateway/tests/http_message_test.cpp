// The gateway's message heads and parsers (http_message.hpp): lookups as Beast's basic_fields
// answers them (first match, names case-insensitively), fields that outgrow the inline arena,
// and Beast's limits and framing still enforced through RequestParser and ResponseParser.
#include <gtest/gtest.h>

#include <cstddef>
#include <limits>
#include <string>
#include <string_view>

#include "http_message.hpp"

namespace holdback::gateway {
namespace {

template <class Parser>
beast::error_code parseAll(Parser& parser, std::string_view text) {
  parser.eager(true);
  beast::error_code ec;
  const std::size_t used = parser.put(asio::buffer(text.data(), text.size()), ec);
  if (!ec && used != text.size() && !parser.is_done()) ec = http::error::need_more;
  return ec;
}

TEST(HttpMessageTest, LookupsFindTheFirstFieldByCodeOrNameCaseInsensitively) {
  Request r;
  RequestParser parser(r);
  const std::string text =
      "POST /v1/completions?x=1 HTTP/1.1\r\nHost: gw\r\nX-Trace: one\r\n"
      "Content-Type: application/json\r\nx-trace: two\r\nContent-Length: 2\r\n\r\n{}";
  ASSERT_FALSE(parseAll(parser, text));
  ASSERT_TRUE(parser.is_done());
  EXPECT_EQ(r.method(), http::verb::post);
  EXPECT_EQ(r.method_string(), "POST");
  EXPECT_EQ(r.target(), "/v1/completions?x=1");
  EXPECT_EQ(r.version(), 11U);
  EXPECT_TRUE(r.keep_alive());
  EXPECT_EQ(r.body(), "{}");
  EXPECT_EQ(r.size(), 5U);
  EXPECT_EQ(r[http::field::content_type], "application/json");
  EXPECT_EQ(r["content-TYPE"], "application/json");
  EXPECT_EQ(r["X-TRACE"], "one");  // the first of two
  EXPECT_EQ(r["x-missing"], "");
  EXPECT_EQ(r.find("x-missing"), r.end());
  EXPECT_EQ(r.find(http::field::authorization), r.end());
  EXPECT_EQ(r.count(http::field::host), 1U);
  // Arrival order, names as received.
  std::string names;
  for (const auto& f : r) names += std::string(f.name_string()) + ",";
  EXPECT_EQ(names, "Host,X-Trace,Content-Type,x-trace,Content-Length,");
  r.erase(http::field::host);
  EXPECT_EQ(r.find(http::field::host), r.end());
  EXPECT_EQ(r.size(), 4U);
  r.insert(http::field::host, "other");
  EXPECT_EQ(r[http::field::host], "other");
  EXPECT_EQ(r.find(http::field::host)->name_string(), "Host");
}

TEST(HttpMessageTest, FoldedAndPaddedValuesAreKeptAsTheParserGivesThem) {
  Request r;
  RequestParser parser(r);
  ASSERT_FALSE(parseAll(parser,
                        "GET / HTTP/1.1\r\nX-Fold: a\r\n  b\r\nX-Pad:\t  v w  \r\n"
                        "X-Empty:\r\nX-Last: z\r\n\r\n"));
  ASSERT_TRUE(parser.is_done());
  EXPECT_EQ(r["x-fold"], "a b");
  EXPECT_EQ(r["x-pad"], "v w");
  EXPECT_EQ(r["x-empty"], "");
  EXPECT_NE(r.find("x-empty"), r.end());
  EXPECT_EQ(r["x-last"], "z");
  EXPECT_EQ(r.find("x-fold")->name_string(), "X-Fold");
}

TEST(HttpMessageTest, AHeadLargerThanTheInlineArenaKeepsEveryField) {
  Request r;
  RequestParser parser(r);
  parser.header_limit(64 * 1024);
  std::string text = "GET / HTTP/1.0\r\n";
  for (int i = 0; i < 40; ++i) {
    text += "X-Field-" + std::to_string(i) + ": " + std::string(300, char('a' + i % 26)) + "\r\n";
  }
  text += "\r\n";
  ASSERT_FALSE(parseAll(parser, text));
  ASSERT_TRUE(parser.is_done());
  EXPECT_FALSE(r.keep_alive());  // HTTP/1.0 without keep-alive
  ASSERT_EQ(r.size(), 40U);
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(r["x-field-" + std::to_string(i)], std::string(300, char('a' + i % 26))) << i;
  }
}

TEST(HttpMessageTest, TheRequestParserKeepsBeastsLimitsAndReadsChunkedBodies) {
  {  // chunked, with an extension and a trailer
    Request r;
    RequestParser parser(r);
    ASSERT_FALSE(parseAll(parser,
                          "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                          "3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-After: t\r\n\r\n"));
    ASSERT_TRUE(parser.is_done());
    EXPECT_TRUE(parser.chunked());
    EXPECT_EQ(r.body(), "abcde");
  }
  {  // the head's limit
    Request r;
    RequestParser parser(r);
    parser.header_limit(64);
    EXPECT_EQ(parseAll(parser, "GET / HTTP/1.1\r\nX: " + std::string(100, 'x') + "\r\n\r\n"),
              http::error::header_limit);
  }
  {  // the body's limit, by Content-Length and by chunks
    Request r;
    RequestParser parser(r);
    parser.body_limit(4);
    EXPECT_EQ(parseAll(parser, "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nabcde"),
              http::error::body_limit);
    Request c;
    RequestParser chunked(c);
    chunked.body_limit(4);
    EXPECT_EQ(parseAll(chunked,
                       "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"
                       "3\r\ndef\r\n0\r\n\r\n"),
              http::error::body_limit);
  }
  {  // conflicting framing
    Request r;
    RequestParser parser(r);
    EXPECT_EQ(parseAll(parser, "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
              http::error::multiple_content_length);
  }
}

TEST(HttpMessageTest, TheResponseParserCollectsTheBodyUpToItsLimit) {
  {
    ResponseHead h;
    ResponseParser parser(h);
    std::string body;
    parser.bodyTo(&body, 16);
    ASSERT_FALSE(parseAll(parser,
                          "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n"
                          "\r\nhello"));
    ASSERT_TRUE(parser.is_done());
    EXPECT_EQ(h.result_int(), 200U);
    EXPECT_EQ(h[http::field::content_type], "text/plain");
    EXPECT_EQ(body, "hello");
    EXPECT_EQ(parser.bodyBytes(), 5U);
    EXPECT_TRUE(parser.keep_alive());
  }
  {  // over the limit: body_limit, whatever Beast's own body limit
    ResponseHead h;
    ResponseParser parser(h);
    parser.body_limit((std::numeric_limits<std::uint64_t>::max)());
    std::string body;
    parser.bodyTo(&body, 4);
    EXPECT_EQ(parseAll(parser, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"),
              http::error::body_limit);
    EXPECT_TRUE(body.empty());
  }
  {  // an interim response is a whole message; the final one's bytes stay unparsed
    ResponseHead h;
    ResponseParser parser(h);
    const std::string text = "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\n";
    beast::error_code ec;
    const std::size_t used = parser.put(asio::buffer(text), ec);
    ASSERT_FALSE(ec);
    EXPECT_TRUE(parser.is_done());
    EXPECT_EQ(h.result_int(), 103U);
    EXPECT_EQ(text.substr(used), "HTTP/1.1 200 OK\r\n");
  }
}

}  // namespace
}  // namespace holdback::gateway
