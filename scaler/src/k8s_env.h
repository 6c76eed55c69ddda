#pragma once
// What a pod knows about its cluster: the API server from the Service environment variables,
// and the service-account files (token, namespace). Shared by the Kubernetes actuator and the
// Lease elector.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace tidegate::scaler {

// A file's text without its trailing newline; empty when unreadable.
inline std::string read_trimmed_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// https://<KUBERNETES_SERVICE_HOST>:<KUBERNETES_SERVICE_PORT> (IPv6 bracketed); empty outside a pod.
inline std::string in_cluster_api_server() {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !port) return {};
  const std::string h(host);
  return "https://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + port;
}

}  // namespace tidegate::scaler
