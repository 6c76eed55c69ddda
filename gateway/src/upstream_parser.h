#pragma once
// Parses a replica's response without keeping its header fields. The proxy needs only the
// status, the content type and the framing, which basic_parser tracks itself (length, chunked,
// keep-alive); Beast's response_parser would allocate and index every field.
#include <boost/beast/http/basic_parser.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>

namespace tidegate::gateway {

class UpstreamResponseParser final : public boost::beast::http::basic_parser<false> {
 public:
  using error_code = boost::beast::error_code;
  using string_view = boost::beast::string_view;
  using field = boost::beast::http::field;

  // Where body bytes go next, as with buffer_body: put() fills it and advances it, and stops
  // with error::need_buffer when it is full (or was never set).
  struct Buffer {
    void* data = nullptr;
    std::size_t size = 0;
  };

  int status() const { return status_; }
  std::string_view content_type() const { return content_type_; }
  Buffer& body() { return body_; }
  // From now on body bytes are appended to `sink` instead (a body read whole): no buffer to
  // refill, no copy through it.
  void collect_into(std::string* sink) { sink_ = sink; }

 private:
  void on_request_impl(boost::beast::http::verb, string_view, string_view, int, error_code&) override {}
  void on_response_impl(int code, string_view, int, error_code&) override { status_ = code; }
  void on_field_impl(field name, string_view, string_view value, error_code&) override {
    if (name == field::content_type && content_type_.empty()) content_type_.assign(value.data(), value.size());
  }
  void on_header_impl(error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>&, error_code&) override {}
  std::size_t on_body_impl(string_view s, error_code& ec) override { return take(s, ec); }
  void on_chunk_header_impl(std::uint64_t, string_view, error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, string_view s, error_code& ec) override { return take(s, ec); }
  void on_finish_impl(error_code&) override {}

  std::size_t take(string_view s, error_code& ec) {
    if (sink_) {
      sink_->append(s.data(), s.size());
      return s.size();
    }
    if (!body_.data) {
      ec = boost::beast::http::error::need_buffer;
      return 0;
    }
    const std::size_t n = std::min(body_.size, s.size());
    if (n != 0) std::memcpy(body_.data, s.data(), n);  // an empty piece may have no data pointer
    body_.data = static_cast<char*>(body_.data) + n;
    body_.size -= n;
    if (n < s.size()) ec = boost::beast::http::error::need_buffer;
    return n;
  }

  int status_ = 0;
  std::string content_type_;
  Buffer body_;
  std::string* sink_ = nullptr;
};

}  // namespace tidegate::gateway
