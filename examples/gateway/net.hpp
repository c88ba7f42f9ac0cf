// The networking vocabulary of the gateway: Boost.Asio with C++20 coroutines and Boost.Beast's
// HTTP/1.1 (Debian libboost1.81-dev; Beast is header-only, Asio is used header-only too).
#pragma once

#include <chrono>

#include <boost/asio.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

// The gateway's targets set the size of Asio's per-thread cache of freed blocks, turn off its
// recycling of coroutine frames and send its blocks to operator new
// (examples/gateway/CMakeLists.txt); a translation unit built without them would disagree with
// the others on Asio's classes (and free with free() what another allocated with operator new).
#if BOOST_ASIO_RECYCLING_ALLOCATOR_CACHE_SIZE != 16 ||        \
    !defined(BOOST_ASIO_DISABLE_AWAITABLE_FRAME_RECYCLING) || \
    !defined(BOOST_ASIO_DISABLE_STD_ALIGNED_ALLOC) || !defined(BOOST_ASIO_DISABLE_BOOST_ALIGN)
#error "build the gateway's Asio code with HOLDBACK_GATEWAY_ASIO_DEFINITIONS (CMakeLists.txt)"
#endif

namespace holdback::gateway {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// The I/O threads' executor, concrete rather than asio::any_io_executor: the coroutines, sockets
// and timers of a connection name the io_context's own executor, so that each asynchronous
// operation and each resumption calls it directly, instead of through the type-erased executor's
// function table (a copy, a comparison and an outstanding-work query per operation).
using IoExecutor = asio::io_context::executor_type;
template <class T>
using Task = asio::awaitable<T, IoExecutor>;
using TcpSocket = asio::basic_stream_socket<tcp, IoExecutor>;
using TcpStream = beast::basic_stream<tcp, IoExecutor>;
using IoTimer =
    asio::basic_waitable_timer<std::chrono::steady_clock,
                               asio::wait_traits<std::chrono::steady_clock>, IoExecutor>;
inline constexpr asio::use_awaitable_t<IoExecutor> kAwait;

// co_await op(..., kUse) returns a tuple (error_code, results...) instead of throwing.
inline constexpr auto kUse = asio::as_tuple(kAwait);

}  // namespace holdback::gateway
