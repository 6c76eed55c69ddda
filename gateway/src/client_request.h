#pragma once
// A client's request as its connection keeps it: the request line, the header fields and the
// body in buffers that the connection reuses from one request to the next, so that a warm
// connection parses a request without allocating. Beast's request_parser<string_body> would
// allocate a node per field, index the names and allocate the body for every request.
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/verb.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tidegate::gateway {

class ClientRequest final {
 public:
  struct Field {
    boost::beast::http::field name;  // field::unknown for names Beast has no enum for
    std::string_view name_string;
    std::string_view value;
  };

  boost::beast::http::verb method() const { return method_; }
  std::string_view method_string() const { return view(method_at_); }
  std::string_view target() const { return view(target_at_); }
  int version() const { return version_; }
  bool keep_alive() const { return keep_alive_; }
  const std::string& body() const { return body_; }

  // The first value of a field ("" when absent): a walk over the request's few fields.
  std::string_view header(boost::beast::http::field name) const {
    for (const auto& f : fields_)
      if (f.name == name) return view(f.value);
    return {};
  }
  std::string_view header(std::string_view name) const {
    for (const auto& f : fields_)
      if (boost::beast::iequals(view(f.name_string), name)) return view(f.value);
    return {};
  }
  template <class Visit>
  void for_each_field(Visit&& visit) const {
    for (const auto& f : fields_) visit(Field{f.name, view(f.name_string), view(f.value)});
  }

 private:
  friend class ClientRequestParser;
  struct Span {
    std::uint32_t at = 0, size = 0;
  };
  struct StoredField {
    boost::beast::http::field name;
    Span name_string, value;
  };

  // Keeps the capacity of the buffers, up to a point: an idle connection should not hold on to
  // the memory of one large request.
  static constexpr std::size_t kKeptBodyBytes = 64 * 1024;
  void clear() {
    head_.clear();
    fields_.clear();
    if (body_.capacity() > kKeptBodyBytes) std::string().swap(body_);
    body_.clear();
    method_ = boost::beast::http::verb::unknown;
    method_at_ = target_at_ = {};
    version_ = 11;
    keep_alive_ = false;
  }
  Span store(boost::beast::string_view s) {
    const Span span{static_cast<std::uint32_t>(head_.size()), static_cast<std::uint32_t>(s.size())};
    head_.append(s.data(), s.size());
    return span;
  }
  // Views are made on demand: head_ may move while the head is still being parsed.
  std::string_view view(Span s) const { return std::string_view(head_).substr(s.at, s.size); }

  std::string head_;  // the request line's and the fields' bytes, back to back
  std::vector<StoredField> fields_;
  std::string body_;
  boost::beast::http::verb method_ = boost::beast::http::verb::unknown;
  Span method_at_, target_at_;
  int version_ = 11;
  bool keep_alive_ = false;
};

// Parses one request into a ClientRequest (cleared first). Limits and framing are
// basic_parser's, as for Beast's own request_parser.
class ClientRequestParser final : public boost::beast::http::basic_parser<true> {
 public:
  explicit ClientRequestParser(ClientRequest& out) : out_(out) { out_.clear(); }

 private:
  using error_code = boost::beast::error_code;
  using string_view = boost::beast::string_view;

  void on_request_impl(boost::beast::http::verb method, string_view method_str, string_view target, int version,
                       error_code&) override {
    out_.method_ = method;
    out_.method_at_ = out_.store(method_str);
    out_.target_at_ = out_.store(target);
    out_.version_ = version;
  }
  void on_response_impl(int, string_view, int, error_code&) override {}
  void on_field_impl(boost::beast::http::field name, string_view name_string, string_view value, error_code& ec) override {
    // RFC 9112 6.1: a request whose last transfer coding is not chunked has no knowable length
    // (400 and close). Taking Content-Length instead is how requests get smuggled past a proxy.
    // Only plain `chunked` is accepted: the gateway decodes no other coding, and a list whose
    // elements Beast does not parse as tokens ("a=b, chunked") made it read the body as the
    // next request while a proxy in front read it as chunked (the fuzzer's K1).
    if (name == boost::beast::http::field::transfer_encoding && !is_plain_chunked(value)) {
      ec = boost::beast::http::error::bad_transfer_encoding;
      return;
    }
    out_.fields_.push_back({name, out_.store(name_string), out_.store(value)});
  }
  static bool is_plain_chunked(string_view value) {
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    return boost::beast::iequals(value, "chunked");
  }
  void on_header_impl(error_code&) override { out_.keep_alive_ = keep_alive(); }
  void on_body_init_impl(const boost::optional<std::uint64_t>& length, error_code&) override {
    if (length) out_.body_.reserve(static_cast<std::size_t>(*length));  // within body_limit
  }
  std::size_t on_body_impl(string_view s, error_code&) override {
    out_.body_.append(s.data(), s.size());
    return s.size();
  }
  void on_chunk_header_impl(std::uint64_t, string_view, error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, string_view s, error_code&) override {
    out_.body_.append(s.data(), s.size());
    return s.size();
  }
  void on_finish_impl(error_code&) override {}

  ClientRequest& out_;
};

}  // namespace tidegate::gateway
