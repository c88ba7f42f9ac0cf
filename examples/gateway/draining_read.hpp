// DrainingBuffer: a read buffer whose reads tell Asio's epoll reactor when they have drained the
// socket, so that the next read on it waits for the next edge-triggered event instead of first
// trying a read that finds nothing (EAGAIN). One system call less per read that follows a drained
// socket: the client's next request after a request was read, an upstream response after the
// previous one was read to its end.
//
// Asio (1.81) registers every socket with its epoll reactor edge-triggered (EPOLLIN | EPOLLET)
// once. A read started on a socket tries the recv at once ("speculative") unless the last read
// reported the socket exhausted, which its stream reads only do at end of stream; the attempt on a
// socket with nothing to read costs a recv that fails with EAGAIN. A read into a DrainingBuffer
// also reports exhaustion when it returns fewer bytes than it asked for: TCP returns a short read
// only when the receive queue was emptied. The reactor then queues the next read without trying
// it, and the next readiness event (new bytes, end of stream, an error: each arrival raises one
// with EPOLLET) runs it; an event between the two sets the reactor back to trying at once. This is
// the readiness nginx keeps per socket.
//
// LazyBlockBuffer: a read (DrainingBuffer's, as above) into a block taken only when bytes have
// arrived. The read's operation takes a ReadBlock when the reactor finds the socket readable and
// gives it back at once when the recv brought nothing (EAGAIN, end of stream, an error); so a
// connection waiting for its client holds no read buffer, and the block a request's bytes land in
// is the one a request on the same thread released last (operator new's per-thread free lists,
// examples/gateway/thread_cache_new.cpp), usually still in cache. nginx does the same with its
// keep-alive connections' buffers. At 1000 connections, a 2 KiB buffer per connection read into
// once every few hundred milliseconds missed the cache on every request.
//
// Both types work with any other Asio version or backend (the specializations below are only
// compiled for the reactor they were written against): a DrainingBuffer as a plain mutable buffer,
// and a LazyBlockBuffer is not used (HOLDBACK_GATEWAY_LAZY_READ is not defined; the reader takes
// the block before it starts the read).
#pragma once

#include <cstddef>
#include <memory>
#include <new>

#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/socket_base.hpp>  // before reactive_socket_recv_op.hpp, which needs it
#include <boost/version.hpp>

namespace holdback::gateway {

struct DrainingBuffer : boost::asio::mutable_buffer {
  DrainingBuffer() = default;
  DrainingBuffer(void* data, std::size_t size) noexcept : boost::asio::mutable_buffer(data, size) {}
  explicit DrainingBuffer(const boost::asio::mutable_buffer& b) noexcept
      : boost::asio::mutable_buffer(b) {}
};

// A block of kReadBlockBytes from operator new, given back with its size (a sized delete finds
// its free list without asking malloc for the block's size).
inline constexpr std::size_t kReadBlockBytes = 2048;
struct ReadBlockDelete {
  void operator()(char* p) const noexcept { ::operator delete(p, kReadBlockBytes); }
};
using ReadBlock = std::unique_ptr<char[], ReadBlockDelete>;
// Null when memory is exhausted.
inline ReadBlock newReadBlock() noexcept {
  return ReadBlock(static_cast<char*>(::operator new(kReadBlockBytes, std::nothrow)));
}

// A read of up to kReadBlockBytes into `*slot`, taken when bytes arrive (see above). The slot must
// outlive the read (the read's handler owns it).
struct LazyBlockBuffer : boost::asio::mutable_buffer {
  explicit LazyBlockBuffer(ReadBlock& s) noexcept
      : boost::asio::mutable_buffer(nullptr, kReadBlockBytes), slot(&s) {}
  ReadBlock* slot;
};

// A Beast DynamicBuffer over a flat_buffer whose prepare() hands DrainingBuffers to the stream's
// reads (Beast's http::async_read* prepare the buffer and read into it).
template <class Inner>
class DrainingDynamicBuffer {
 public:
  using const_buffers_type = typename Inner::const_buffers_type;
  using mutable_buffers_type = DrainingBuffer;
  explicit DrainingDynamicBuffer(Inner& inner) noexcept : inner_(&inner) {}
  [[nodiscard]] std::size_t size() const noexcept { return inner_->size(); }
  [[nodiscard]] std::size_t max_size() const noexcept { return inner_->max_size(); }
  [[nodiscard]] std::size_t capacity() const noexcept { return inner_->capacity(); }
  [[nodiscard]] const_buffers_type data() const noexcept { return inner_->data(); }
  mutable_buffers_type prepare(std::size_t n) { return DrainingBuffer(inner_->prepare(n)); }
  void commit(std::size_t n) noexcept { inner_->commit(n); }
  void consume(std::size_t n) noexcept { inner_->consume(n); }

 private:
  Inner* inner_;
};

}  // namespace holdback::gateway

#if BOOST_VERSION / 100 % 1000 == 81 && !defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT) && \
    !defined(BOOST_ASIO_WINDOWS)
#include <boost/asio/detail/reactive_socket_recv_op.hpp>

#define HOLDBACK_GATEWAY_LAZY_READ 1

namespace boost::asio::detail {

// The recv of a read into a DrainingBuffer (reactive_socket_recv_op_base's, plus: a short read
// reports the socket exhausted; end of stream does, as before).
template <>
class reactive_socket_recv_op_base<holdback::gateway::DrainingBuffer> : public reactor_op {
 public:
  reactive_socket_recv_op_base(const boost::system::error_code& success_ec, socket_type socket,
                               socket_ops::state_type state,
                               const holdback::gateway::DrainingBuffer& buffers,
                               socket_base::message_flags flags, func_type complete_func)
      : reactor_op(success_ec, &reactive_socket_recv_op_base::do_perform, complete_func),
        socket_(socket),
        state_(state),
        buffers_(buffers),
        flags_(flags) {}

  static status do_perform(reactor_op* base) {
    auto* o = static_cast<reactive_socket_recv_op_base*>(base);
    const bool stream = (o->state_ & socket_ops::stream_oriented) != 0;
    status result =
        socket_ops::non_blocking_recv1(o->socket_, o->buffers_.data(), o->buffers_.size(),
                                       o->flags_, stream, o->ec_, o->bytes_transferred_)
            ? done
            : not_done;
    if (result == done && stream && o->bytes_transferred_ < o->buffers_.size()) {
      result = done_and_exhausted;  // end of stream, an error, or a short read
    }
    return result;
  }

 private:
  socket_type socket_;
  socket_ops::state_type state_;
  holdback::gateway::DrainingBuffer buffers_;
  socket_base::message_flags flags_;
};

// The recv of a read into a LazyBlockBuffer: DrainingBuffer's, into a block taken for it (or the
// one the slot already holds), and given back when nothing was read.
template <>
class reactive_socket_recv_op_base<holdback::gateway::LazyBlockBuffer> : public reactor_op {
 public:
  reactive_socket_recv_op_base(const boost::system::error_code& success_ec, socket_type socket,
                               socket_ops::state_type state,
                               const holdback::gateway::LazyBlockBuffer& buffers,
                               socket_base::message_flags flags, func_type complete_func)
      : reactor_op(success_ec, &reactive_socket_recv_op_base::do_perform, complete_func),
        socket_(socket),
        state_(state),
        buffers_(buffers),
        flags_(flags) {}

  static status do_perform(reactor_op* base) {
    auto* o = static_cast<reactive_socket_recv_op_base*>(base);
    holdback::gateway::ReadBlock& block = *o->buffers_.slot;
    if (!block) block = holdback::gateway::newReadBlock();
    if (!block) {
      o->ec_ = boost::asio::error::no_memory;
      o->bytes_transferred_ = 0;
      return done;
    }
    const bool stream = (o->state_ & socket_ops::stream_oriented) != 0;
    const std::size_t size = o->buffers_.size();
    status result = socket_ops::non_blocking_recv1(o->socket_, block.get(), size, o->flags_, stream,
                                                   o->ec_, o->bytes_transferred_)
                        ? done
                        : not_done;
    if (result == not_done || o->bytes_transferred_ == 0) block.reset();  // nothing to hold
    if (result == done && stream && o->bytes_transferred_ < size) {
      result = done_and_exhausted;  // end of stream, an error, or a short read
    }
    return result;
  }

 private:
  socket_type socket_;
  socket_ops::state_type state_;
  holdback::gateway::LazyBlockBuffer buffers_;
  socket_base::message_flags flags_;
};

}  // namespace boost::asio::detail
#endif
