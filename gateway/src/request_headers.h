#pragma once
// What the gateway reads from a client's header fields: its request id, the bearer token and
// a Basic password. Header names and these values are ASCII: no locale lookups.
#include <cstdint>
#include <string>
#include <string_view>

namespace tidegate::gateway {

// A client's x-request-id is kept when it is 1-128 printable ASCII characters without quotes
// or backslashes: it goes into the JSON access log, the upstream request and the answer, and
// anything else (control bytes, non-UTF-8) made log lines that JSON readers reject.
inline bool usable_request_id(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (const char c : id)
    if (c < 0x21 || c > 0x7e || c == '"' || c == '\\') return false;
  return true;
}

// Header names are ASCII: no locale lookups per character.
inline std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + ('a' - 'A'));
  return out;
}

inline std::string_view bearer_token(std::string_view auth) {
  constexpr std::string_view prefix = "Bearer ";
  if (auth.size() > prefix.size() && lower(auth.substr(0, prefix.size())) == "bearer ") return auth.substr(prefix.size());
  return {};
}

// "Basic base64(user:password)" -> password (RFC 7617), so a browser can open a dashboard
// behind the admin key: it asks once and resends the credentials with every fetch.
inline std::string basic_password(std::string_view auth) {
  constexpr std::string_view prefix = "basic ";
  if (auth.size() <= prefix.size() || auth.size() > 1024 || lower(auth.substr(0, prefix.size())) != prefix) return {};
  std::string decoded;
  std::uint32_t acc = 0;
  int bits = 0;
  for (const char c : auth.substr(prefix.size())) {
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+') v = 62;
    else if (c == '/') v = 63;
    else if (c == '=') break;
    else return {};
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      decoded.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  const auto colon = decoded.find(':');
  return colon == std::string::npos ? std::string() : decoded.substr(colon + 1);
}

}  // namespace tidegate::gateway
