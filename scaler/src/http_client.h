#pragma once
// A small blocking HTTP/1.1 client with one deadline over the whole exchange, for the
// scaler's own calls (health probes, /metrics scrapes, the Kubernetes API). Never throws.
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tidegate::scaler::http {

struct TlsOptions {
  std::string ca_file;               // PEM bundle; empty = system default paths
  bool insecure_skip_verify = false;  // tests and labs only
};

struct Result {
  int status = 0;
  std::string body;
  std::string content_type;
  std::string error;  // transport failure (connect, TLS, timeout); empty when an answer came
  bool ok() const { return error.empty(); }
};

Result request(const std::string& method, const std::string& url,
               const std::vector<std::pair<std::string, std::string>>& headers, const std::string& body,
               double timeout_s, const TlsOptions& tls = {});

inline Result get(const std::string& url, double timeout_s) { return request("GET", url, {}, {}, timeout_s); }

}  // namespace tidegate::scaler::http
