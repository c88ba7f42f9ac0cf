// DrainingBuffer (draining_read.hpp): a read after a short read is not tried at once but waits
// for the socket's next readiness event; these tests check that no bytes and no end of stream are
// missed that way (bytes sent before or after the next read is started, in many small pieces),
// and that Beast's HTTP reads through DrainingDynamicBuffer keep the buffer's bound. A
// LazyBlockBuffer read holds a block only once bytes have arrived.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <string>

#include "draining_read.hpp"
#include "net.hpp"

namespace holdback::gateway {
namespace {

struct SocketPair {
  asio::io_context io;
  // Keeps run_one_for() and poll() working between reads (an io_context out of work stops).
  asio::executor_work_guard<asio::io_context::executor_type> guard = asio::make_work_guard(io);
  tcp::socket reader{io};
  tcp::socket writer{io};
  SocketPair() {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    writer.connect(acceptor.local_endpoint());
    reader = acceptor.accept();
  }
};

// One read into a DrainingBuffer, run until it completes (or `limit` passes: returns false).
struct ReadResult {
  bool completed = false;
  beast::error_code ec;
  std::size_t n = 0;
};
ReadResult readOnce(SocketPair& p, std::array<char, 256>& buf,
                    std::chrono::milliseconds limit = std::chrono::milliseconds(2000)) {
  ReadResult r;
  p.reader.async_read_some(DrainingBuffer(buf.data(), buf.size()),
                           [&r](const beast::error_code& ec, std::size_t n) {
                             r.completed = true;
                             r.ec = ec;
                             r.n = n;
                           });
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!r.completed && std::chrono::steady_clock::now() < deadline) {
    p.io.run_one_for(std::chrono::milliseconds(10));
  }
  return r;
}

TEST(DrainingReadTest, BytesSentAfterAShortReadAreRead) {
  SocketPair p;
  std::array<char, 256> buf{};
  for (int round = 0; round < 200; ++round) {
    const std::string piece = "piece " + std::to_string(round);
    // Alternately: the bytes are sent before the next read is started (their readiness event
    // may or may not have been seen yet), and after it (the read waits for the event).
    if (round % 2 == 0) asio::write(p.writer, asio::buffer(piece));
    if (round % 4 == 2) p.io.poll();  // the event seen before the read starts
    ReadResult r;
    if (round % 2 == 0) {
      r = readOnce(p, buf);
    } else {
      p.reader.async_read_some(DrainingBuffer(buf.data(), buf.size()),
                               [&r](const beast::error_code& ec, std::size_t n) {
                                 r.completed = true;
                                 r.ec = ec;
                                 r.n = n;
                               });
      p.io.poll();
      asio::write(p.writer, asio::buffer(piece));
      for (int k = 0; k < 200 && !r.completed; ++k) p.io.run_one_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(r.completed) << "round " << round;
    ASSERT_FALSE(r.ec) << r.ec.message();
    ASSERT_EQ(std::string(buf.data(), r.n), piece) << "round " << round;
  }
}

TEST(DrainingReadTest, EndOfStreamAfterAShortReadIsSeen) {
  SocketPair p;
  std::array<char, 256> buf{};
  asio::write(p.writer, asio::buffer(std::string("abc")));
  const ReadResult first = readOnce(p, buf);
  ASSERT_TRUE(first.completed);
  EXPECT_EQ(first.n, 3U);
  p.writer.close();
  const ReadResult second = readOnce(p, buf);
  ASSERT_TRUE(second.completed);
  EXPECT_EQ(second.ec, asio::error::eof);
}

TEST(DrainingReadTest, AFullReadLeavesTheRestToTheNextRead) {
  SocketPair p;
  std::array<char, 256> buf{};
  const std::string big(600, 'x');  // more than one buffer: the first reads are not short
  asio::write(p.writer, asio::buffer(big));
  std::size_t total = 0;
  while (total < big.size()) {
    const ReadResult r = readOnce(p, buf);
    ASSERT_TRUE(r.completed);
    ASSERT_FALSE(r.ec) << r.ec.message();
    total += r.n;
  }
  EXPECT_EQ(total, big.size());
}

TEST(DrainingReadTest, BeastReadsAHeadSentInPiecesAndKeepsTheBufferBound) {
  SocketPair p;
  beast::flat_buffer storage(4096);
  DrainingDynamicBuffer<beast::flat_buffer> reads(storage);
  http::response_parser<http::string_body> parser;
  const std::string response = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
  bool done = false;
  beast::error_code ec;
  http::async_read(p.reader, reads, parser, [&](const beast::error_code& e, std::size_t) {
    done = true;
    ec = e;
  });
  for (char c : response) {  // one byte at a time: every read is short
    asio::write(p.writer, asio::buffer(&c, 1));
    p.io.poll();
  }
  for (int k = 0; k < 200 && !done; ++k) p.io.run_one_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(done);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(parser.get().body(), "hello");

  // A head longer than the buffer's maximum fails with buffer_overflow, as with the flat_buffer.
  beast::flat_buffer small(64);
  DrainingDynamicBuffer<beast::flat_buffer> small_reads(small);
  http::response_parser<http::string_body> second;
  done = false;
  http::async_read_header(p.reader, small_reads, second,
                          [&](const beast::error_code& e, std::size_t) {
                            done = true;
                            ec = e;
                          });
  asio::write(p.writer, asio::buffer("HTTP/1.1 200 OK\r\nX-Long: " + std::string(200, 'y')));
  for (int k = 0; k < 200 && !done; ++k) p.io.run_one_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(done);
  EXPECT_EQ(ec, http::error::buffer_overflow);
}

#ifdef HOLDBACK_GATEWAY_LAZY_READ
// A read into a LazyBlockBuffer, run until it completes (or `limit` passes).
ReadResult readLazily(SocketPair& p, ReadBlock& block,
                      std::chrono::milliseconds limit = std::chrono::milliseconds(2000)) {
  ReadResult r;
  p.reader.async_read_some(LazyBlockBuffer(block),
                           [&r](const beast::error_code& ec, std::size_t n) {
                             r.completed = true;
                             r.ec = ec;
                             r.n = n;
                           });
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!r.completed && std::chrono::steady_clock::now() < deadline) {
    p.io.run_one_for(std::chrono::milliseconds(10));
  }
  return r;
}

TEST(DrainingReadTest, AWaitingLazyReadHoldsNoBlockAndTakesOneWhenBytesArrive) {
  SocketPair p;
  ReadBlock block;
  for (int round = 0; round < 100; ++round) {
    ReadResult r;
    p.reader.async_read_some(LazyBlockBuffer(block),
                             [&r](const beast::error_code& ec, std::size_t n) {
                               r.completed = true;
                               r.ec = ec;
                               r.n = n;
                             });
    p.io.poll();  // the read tried (EAGAIN) or waiting for the socket's event
    ASSERT_FALSE(r.completed) << "round " << round;
    EXPECT_EQ(block, nullptr) << "round " << round;  // nothing read: no block held
    const std::string piece = "piece " + std::to_string(round);
    asio::write(p.writer, asio::buffer(piece));
    for (int k = 0; k < 200 && !r.completed; ++k) p.io.run_one_for(std::chrono::milliseconds(10));
    ASSERT_TRUE(r.completed) << "round " << round;
    ASSERT_FALSE(r.ec) << r.ec.message();
    ASSERT_NE(block, nullptr);
    ASSERT_EQ(std::string(block.get(), r.n), piece) << "round " << round;
    block.reset();  // the reader gives it back once it has taken the bytes
  }
}

TEST(DrainingReadTest, ALazyReadReadsWhatWasAlreadySentAndSeesTheEndOfStream) {
  SocketPair p;
  ReadBlock block;
  const std::string big(kReadBlockBytes + 300, 'x');  // a full block, then the rest
  asio::write(p.writer, asio::buffer(big));
  std::size_t total = 0;
  while (total < big.size()) {
    const ReadResult r = readLazily(p, block);
    ASSERT_TRUE(r.completed);
    ASSERT_FALSE(r.ec) << r.ec.message();
    ASSERT_NE(block, nullptr);
    EXPECT_EQ(std::string(block.get(), r.n), big.substr(total, r.n));
    total += r.n;
    block.reset();
  }
  EXPECT_EQ(total, big.size());
  p.writer.close();
  const ReadResult end = readLazily(p, block);
  ASSERT_TRUE(end.completed);
  EXPECT_EQ(end.ec, asio::error::eof);
  EXPECT_EQ(block, nullptr);  // end of stream: nothing to hold
}
#endif

}  // namespace
}  // namespace holdback::gateway
