// The message heads the proxy writes: the request to a model server, an interim (1xx) response
// and the response passed on to the client, with the hop-by-hop rules (RFC 9110 section 7.6.1)
// that decide which fields cross. Plain functions of their arguments (no I/O, no shared state):
// safe from any thread.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "upstream.hpp"

namespace holdback::gateway {

// Whether `name` is one of the fixed hop-by-hop fields the proxy never forwards (and the framing
// fields it writes itself: Host, Content-Length, Transfer-Encoding, Expect), case-insensitively.
bool isHopByHop(std::string_view name);

// Whether `name` is hop-by-hop in a message with these header fields: one of the fixed names
// above, or one that message's own Connection header (`connection`, empty when absent) lists.
bool isHopByHop(std::string_view name, std::string_view connection);

// Whether the gateway reads a request's body framed by these fields (RFC 9112 section 6.1): no
// Transfer-Encoding field, or exactly one whose value is "chunked" (case-insensitively, spaces and
// tabs around it ignored). Any other coding (gzip, identity, a list of codings) is answered 501
// by the server, since the gateway would read the body as something it is not.
bool transferCodingSupported(const Fields& fields);

// Appends "Name: value\r\n".
void appendField(std::string& out, std::string_view name, std::string_view value);

// The head of the request to the model server for `request`, with Host `host`.
std::string upstreamRequestHead(const Request& request, std::string_view host);

// An interim (1xx) response's head as passed on to an HTTP/1.1 client.
std::string interimResponseHead(const ResponseHead& interim);

// Appends the head of the response to the client (see proxy_heads.cpp); `contentLength` is set
// for a whole body, empty for a stream.
void appendResponseHead(std::string& out, const ResponseHead& upstream,
                        std::string_view contentType, const ProxyRequest& what,
                        std::optional<std::size_t> contentLength);

}  // namespace holdback::gateway
