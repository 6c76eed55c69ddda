#include "kubernetes_lease.h"

#include <boost/json.hpp>

#include <stdexcept>

#include "http_client.h"
#include "k8s_env.h"

namespace tidegate::scaler {
namespace {

namespace json = boost::json;

std::string str(const json::object& o, const char* key) {
  const auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

int integer(const json::object& o, const char* key) {
  const auto* v = o.if_contains(key);
  return v && v->is_int64() ? static_cast<int>(v->as_int64()) : 0;
}

}  // namespace

LeaderElectionConfig resolve_lease_config(LeaderElectionConfig c) {
  if (c.api_server.empty()) c.api_server = in_cluster_api_server();
  if (c.api_server.empty())
    throw std::invalid_argument(
        "scaler.leader_election.api_server: no API server (set it, or run in a pod with KUBERNETES_SERVICE_HOST)");
  if (c.ns.empty()) c.ns = read_trimmed_file(c.namespace_file);
  if (c.ns.empty()) c.ns = "default";
  return c;
}

std::string lease_json(const LeaderElectionConfig& c, const LeaseRecord& r) {
  json::object meta{{"name", c.lease_name}, {"namespace", c.ns}};
  if (!r.resource_version.empty()) meta["resourceVersion"] = r.resource_version;
  json::object spec{{"leaseDurationSeconds", r.lease_duration_s}, {"leaseTransitions", r.transitions}};
  // An empty holder is written as absent: the field is optional, and absent means released.
  if (!r.holder.empty()) spec["holderIdentity"] = r.holder;
  if (!r.acquire_time.empty()) spec["acquireTime"] = r.acquire_time;
  if (!r.renew_time.empty()) spec["renewTime"] = r.renew_time;
  return json::serialize(json::object{{"apiVersion", "coordination.k8s.io/v1"},
                                      {"kind", "Lease"},
                                      {"metadata", std::move(meta)},
                                      {"spec", std::move(spec)}});
}

std::optional<LeaseRecord> parse_lease(const std::string& body) {
  boost::system::error_code ec;
  const auto v = json::parse(body, ec);
  if (ec || !v.is_object()) return std::nullopt;
  const auto* meta = v.as_object().if_contains("metadata");
  if (!meta || !meta->is_object()) return std::nullopt;
  LeaseRecord r;
  r.resource_version = str(meta->as_object(), "resourceVersion");
  if (r.resource_version.empty()) return std::nullopt;  // no precondition to write with
  if (const auto* spec = v.as_object().if_contains("spec"); spec && spec->is_object()) {
    const auto& s = spec->as_object();
    r.holder = str(s, "holderIdentity");
    r.lease_duration_s = integer(s, "leaseDurationSeconds");
    r.acquire_time = str(s, "acquireTime");
    r.renew_time = str(s, "renewTime");
    r.transitions = integer(s, "leaseTransitions");
  }
  return r;
}

KubernetesLeaseClient::KubernetesLeaseClient(LeaderElectionConfig config) : config_(std::move(config)) {}

std::string KubernetesLeaseClient::collection() const {
  return "/apis/coordination.k8s.io/v1/namespaces/" + config_.ns + "/leases";
}

LeaseCall KubernetesLeaseClient::send(const std::string& method, const std::string& path, const std::string& body) {
  // Re-read per call: projected service-account tokens rotate.
  const std::string token = config_.token.empty() ? read_trimmed_file(config_.token_file) : config_.token;
  std::vector<std::pair<std::string, std::string>> headers{{"Accept", "application/json"}};
  if (!token.empty()) headers.emplace_back("Authorization", "Bearer " + token);
  if (!body.empty()) headers.emplace_back("Content-Type", "application/json");
  const http::TlsOptions tls{config_.ca_file, config_.insecure_skip_tls_verify};
  const auto r = http::request(method, config_.api_server + path, headers, body, config_.request_timeout_s, tls);
  LeaseCall out;
  if (!r.ok()) {
    out.error = method + " " + path + ": " + r.error;
    return out;
  }
  if (r.status == 404) {
    out.outcome = LeaseCall::Outcome::kNotFound;
    return out;
  }
  if (r.status == 409) {  // Conflict on PUT, AlreadyExists on POST: another candidate wrote first
    out.outcome = LeaseCall::Outcome::kConflict;
    out.error = method + " " + path + ": 409 " + r.body.substr(0, 200);
    return out;
  }
  if (r.status / 100 != 2) {
    out.error = method + " " + path + ": HTTP " + std::to_string(r.status) + " " + r.body.substr(0, 200);
    return out;
  }
  out.record = parse_lease(r.body);
  if (!out.record) {
    out.error = method + " " + path + ": not a Lease with a resourceVersion";
    return out;
  }
  out.outcome = LeaseCall::Outcome::kOk;
  return out;
}

LeaseCall KubernetesLeaseClient::get() { return send("GET", collection() + "/" + config_.lease_name, ""); }

LeaseCall KubernetesLeaseClient::create(const LeaseRecord& r) {
  LeaseRecord fresh = r;
  fresh.resource_version.clear();  // a create carries none
  return send("POST", collection(), lease_json(config_, fresh));
}

LeaseCall KubernetesLeaseClient::update(const LeaseRecord& r) {
  return send("PUT", collection() + "/" + config_.lease_name, lease_json(config_, r));
}

LeaseCall KubernetesLeaseClient::release(const LeaseRecord& observed, const std::string& micro_time_now) {
  LeaseRecord r = observed;
  r.holder.clear();
  r.lease_duration_s = 1;
  r.renew_time = micro_time_now;
  return update(r);
}

}  // namespace tidegate::scaler
