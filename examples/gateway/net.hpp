// The networking vocabulary of the gateway: Boost.Asio with C++20 coroutines and Boost.Beast's
// HTTP/1.1 (Debian libboost1.81-dev; Beast is header-only, Asio is used header-only too).
#pragma once

#include <boost/asio.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace holdback::gateway {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// co_await op(..., kUse) returns a tuple (error_code, results...) instead of throwing.
inline constexpr auto kUse = asio::as_tuple(asio::use_awaitable);

}  // namespace holdback::gateway
