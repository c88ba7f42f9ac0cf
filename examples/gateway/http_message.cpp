#include "http_message.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace holdback::gateway {

Fields::const_iterator Fields::find(http::field code) const {
  return std::find_if(fields_.begin(), fields_.end(),
                      [code](const Field& f) { return f.name() == code; });
}

Fields::const_iterator Fields::find(std::string_view name) const {
  return std::find_if(fields_.begin(), fields_.end(), [name](const Field& f) {
    return f.name_string().size() == name.size() && beast::iequals(f.name_string(), name);
  });
}

std::string_view Fields::operator[](http::field code) const {
  const auto it = find(code);
  return it == end() ? std::string_view() : it->value();
}

std::string_view Fields::operator[](std::string_view name) const {
  const auto it = find(name);
  return it == end() ? std::string_view() : it->value();
}

std::size_t Fields::count(http::field code) const {
  return static_cast<std::size_t>(std::count_if(
      fields_.begin(), fields_.end(), [code](const Field& f) { return f.name() == code; }));
}

void Fields::insert(http::field code, std::string_view value) {
  const beast::string_view name = http::to_string(code);
  fields_.emplace_back(code, std::string_view(name.data(), name.size()), keep(value));
}

namespace {

// Whether `value` follows `name` in one "Name: value" line of the input (a parsed field whose
// value was not rebuilt from folded lines): the bytes after the name are ':' and blanks up to the
// value. The scan stops at the first other byte, within the line.
bool valueFollowsName(std::string_view name, std::string_view value) {
  if (name.empty() || value.empty()) return false;
  const auto end = reinterpret_cast<std::uintptr_t>(name.data() + name.size());
  const auto at = reinterpret_cast<std::uintptr_t>(value.data());
  if (at <= end || at - end > 64 || name.data()[name.size()] != ':') return false;
  for (const char* p = name.data() + name.size() + 1;; ++p) {
    if (reinterpret_cast<std::uintptr_t>(p) == at) return true;
    if (*p != ' ' && *p != '\t') return false;
  }
}

}  // namespace

void Fields::insert(http::field code, std::string_view name, std::string_view value) {
  fields_.emplace_back(code, keep(name), keep(value));
}

void Fields::insertParsed(http::field code, std::string_view name, std::string_view value) {
  if (valueFollowsName(name, value)) {  // one copy of the line keeps both
    const auto gap = static_cast<std::size_t>(value.data() - name.data());
    const std::string_view line = keep(std::string_view(name.data(), gap + value.size()));
    fields_.emplace_back(code, line.substr(0, name.size()), line.substr(gap));
    return;
  }
  fields_.emplace_back(code, keep(name), keep(value));
}

void Fields::erase(http::field code) {
  fields_.erase(std::remove_if(fields_.begin(), fields_.end(),
                               [code](const Field& f) { return f.name() == code; }),
                fields_.end());
}

std::string_view Fields::keep(std::string_view s) {
  if (s.empty()) return {};
  if (capacity_ - used_ < s.size()) {
    capacity_ = std::max<std::size_t>(s.size(), 4096);
    blocks_.push_back(std::make_unique<char[]>(capacity_));
    top_ = blocks_.back().get();
    used_ = 0;
  }
  char* at = top_ + used_;
  std::memcpy(at, s.data(), s.size());
  used_ += s.size();
  return {at, s.size()};
}

Request::Request(http::verb method, std::string_view target, unsigned version) {
  const beast::string_view m = http::to_string(method);
  start(method, std::string_view(m.data(), m.size()), target, version);
  keepAlive_ = version >= 11;
}

void Request::start(http::verb method, std::string_view methodString, std::string_view target,
                    unsigned version) {
  method_ = method;
  methodString_ = keep(methodString);
  target_ = keep(target);
  version_ = version;
}

void RequestParser::on_request_impl(http::verb method, beast::string_view methodString,
                                    beast::string_view target, int version, beast::error_code& ec) {
  ec = {};
  request_.start(method, std::string_view(methodString.data(), methodString.size()),
                 std::string_view(target.data(), target.size()), static_cast<unsigned>(version));
}

void RequestParser::on_field_impl(http::field name, beast::string_view nameString,
                                  beast::string_view value, beast::error_code& ec) {
  ec = {};
  request_.insertParsed(name, std::string_view(nameString.data(), nameString.size()),
                        std::string_view(value.data(), value.size()));
}

void RequestParser::on_header_impl(beast::error_code& ec) {
  ec = {};
  request_.keep_alive(keep_alive());
}

// As Beast's string_body: room for a declared length up front (within body_limit, which the
// parser checked against the Content-Length already).
void RequestParser::on_body_init_impl(const boost::optional<std::uint64_t>& length,
                                      beast::error_code& ec) {
  ec = {};
  if (!length) return;
  if (*length > request_.body().max_size()) {
    ec = http::error::buffer_overflow;
    return;
  }
  request_.body().reserve(static_cast<std::size_t>(*length));
}

std::size_t RequestParser::on_body_impl(beast::string_view body, beast::error_code& ec) {
  ec = {};
  request_.body().append(body.data(), body.size());
  return body.size();
}

std::size_t RequestParser::on_chunk_body_impl(std::uint64_t /*remain*/, beast::string_view body,
                                              beast::error_code& ec) {
  return on_body_impl(body, ec);
}

void ResponseParser::on_response_impl(int code, beast::string_view /*reason*/, int version,
                                      beast::error_code& ec) {
  ec = {};
  head_.start(static_cast<unsigned>(code), static_cast<unsigned>(version));
}

void ResponseParser::on_field_impl(http::field name, beast::string_view nameString,
                                   beast::string_view value, beast::error_code& ec) {
  ec = {};
  head_.insertParsed(name, std::string_view(nameString.data(), nameString.size()),
                     std::string_view(value.data(), value.size()));
}

void ResponseParser::on_header_impl(beast::error_code& ec) {
  ec = {};
}

void ResponseParser::on_body_init_impl(const boost::optional<std::uint64_t>& /*length*/,
                                       beast::error_code& ec) {
  ec = {};
}

std::size_t ResponseParser::on_body_impl(beast::string_view body, beast::error_code& ec) {
  ec = {};
  if (body_ == nullptr || body.size() > bodyLimit_ - body_->size()) {
    ec = http::error::body_limit;
    return 0;
  }
  body_->append(body.data(), body.size());
  bodyBytes_ += body.size();
  return body.size();
}

std::size_t ResponseParser::on_chunk_body_impl(std::uint64_t /*remain*/, beast::string_view body,
                                               beast::error_code& ec) {
  return on_body_impl(body, ec);
}

}  // namespace holdback::gateway
