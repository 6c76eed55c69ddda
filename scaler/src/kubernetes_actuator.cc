// Kubernetes: replicas are pods of a Deployment (apps/v1). Capacity changes go through the
// `scale` subresource (merge patch of spec.replicas); the pool is read from EndpointSlices
// of the Deployment's Service. The warm pool is a second Deployment whose ready pods the
// gateway does not route until the controller promotes them. Before a scale-down the pod we
// drained gets a low controller.kubernetes.io/pod-deletion-cost so the ReplicaSet removes
// that pod and not a busy one.
#include <boost/json.hpp>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "http_client.h"
#include "k8s_env.h"
#include "tidegate/common/log.h"
#include "tidegate/scaler/actuators.h"

namespace tidegate::scaler {
namespace {

namespace json = boost::json;

std::string read_file(const std::string& path) { return read_trimmed_file(path); }

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Pool {
  std::string deployment;
  std::string service;
  bool warm = false;
  int spec_replicas = 0;
  std::vector<ObservedReplica> endpoints;
};

class KubernetesActuator final : public Actuator {
 public:
  explicit KubernetesActuator(KubernetesActuatorConfig c) : config_(std::move(c)) {
    if (config_.api_server.empty()) config_.api_server = in_cluster_api_server();
    if (config_.ns.empty()) config_.ns = read_file(config_.namespace_file);
    if (config_.ns.empty()) config_.ns = "default";
    pools_.push_back({config_.deployment, config_.service, false, 0, {}});
    if (!config_.warm_deployment.empty()) pools_.push_back({config_.warm_deployment, config_.warm_service, true, 0, {}});
  }

  std::string_view kind() const override { return "kubernetes"; }
  bool elastic() const override { return true; }

  bool start(bool for_warm_pool) override {
    Pool& p = for_warm_pool && pools_.size() > 1 ? pools_[1] : pools_[0];
    return resize(p, +1);
  }

  void stop(const std::string& id) override {
    for (auto& p : pools_) {
      for (const auto& e : p.endpoints) {
        if (e.id != id) continue;
        if (config_.set_pod_deletion_cost) {
          const std::string body =
              R"({"metadata":{"annotations":{"controller.kubernetes.io/pod-deletion-cost":"-10000"}}})";
          call("PATCH", "/api/v1/namespaces/" + config_.ns + "/pods/" + id, body);
        }
        tombstones_[id] = now_s();
        resize(p, -1);
        return;
      }
    }
    // Not visible yet: cancel one pending pod, warm pool first (it is the cheaper loss).
    for (auto it = pools_.rbegin(); it != pools_.rend(); ++it) {
      if (it->spec_replicas > static_cast<int>(it->endpoints.size())) {
        resize(*it, -1);
        return;
      }
    }
  }

  PoolObservation observe() override {
    const double now = now_s();
    std::erase_if(tombstones_, [&](const auto& kv) { return now - kv.second > 900; });
    PoolObservation obs;
    for (auto& p : pools_) {
      if (auto replicas = get_replicas(p.deployment)) p.spec_replicas = *replicas;
      // On an API error the last good view stands: pods are not declared dead for it.
      if (auto eps = list_endpoints(p.service)) p.endpoints = std::move(*eps);
      int live = 0;
      for (const auto& e : p.endpoints) {
        if (tombstones_.count(e.id)) continue;
        live += !e.exited;
        obs.replicas.push_back(e);
      }
      obs.pending += std::max(0, p.spec_replicas - live);
    }
    return obs;
  }

  ActuatorStats stats() const override { return stats_; }

  bool park(const std::string& id) override { return engine_call(id, config_.sleep_path); }
  bool unpark(const std::string& id) override { return engine_call(id, config_.wake_path); }

 private:
  bool engine_call(const std::string& id, const std::string& path) {
    if (path.empty() || config_.sleep_path.empty()) return false;
    for (const auto& p : pools_)
      for (const auto& e : p.endpoints) {
        if (e.id != id) continue;
        const auto r = http::request("POST", "http://" + e.endpoint.host + ":" + std::to_string(e.endpoint.port) + path,
                                     {}, "", config_.sleep_timeout_s);
        if (r.ok() && r.status / 100 == 2) return true;
        ++stats_.errors;
        stats_.last_error = id + ": POST " + path + " -> " + (r.ok() ? std::to_string(r.status) : r.error);
        return false;
      }
    return false;
  }

  std::string scale_path(const std::string& deployment) const {
    return "/apis/apps/v1/namespaces/" + config_.ns + "/deployments/" + deployment + "/scale";
  }

  // One API call with retries on transport errors, 409, 429 and 5xx; nullopt after the last.
  std::optional<json::value> call(const std::string& method, const std::string& path, const std::string& body = {}) {
    const std::string token = config_.token.empty() ? read_file(config_.token_file) : config_.token;
    std::vector<std::pair<std::string, std::string>> headers{{"Accept", "application/json"}};
    if (!token.empty()) headers.emplace_back("Authorization", "Bearer " + token);
    if (method == "PATCH") headers.emplace_back("Content-Type", "application/merge-patch+json");
    http::TlsOptions tls{config_.ca_file, config_.insecure_skip_tls_verify};
    double backoff = config_.backoff_initial_s;
    std::string error;
    for (int attempt = 0; attempt <= config_.retries; ++attempt) {
      if (attempt > 0) {
        ++stats_.retries;
        std::this_thread::sleep_for(std::chrono::duration<double>(backoff));
        backoff = std::min(backoff * 2, config_.backoff_max_s);
      }
      const auto r = http::request(method, config_.api_server + path, headers, body, config_.request_timeout_s, tls);
      if (!r.ok()) {
        error = r.error;
        continue;
      }
      if (r.status >= 200 && r.status < 300) {
        boost::system::error_code ec;
        auto v = json::parse(r.body, ec);
        if (!ec) return v;
        error = "unparseable response: " + ec.message();
        break;
      }
      error = "HTTP " + std::to_string(r.status) + ": " + r.body.substr(0, 200);
      if (r.status != 409 && r.status != 429 && r.status < 500) break;  // 4xx: retrying will not help
    }
    ++stats_.errors;
    stats_.last_error = method + " " + path + ": " + error;
    log::error("scaler.k8s_api_error", {{"model", config_.model}, {"method", method}, {"path", path}, {"error", error}});
    return std::nullopt;
  }

  std::optional<int> get_replicas(const std::string& deployment) {
    auto v = call("GET", scale_path(deployment));
    if (!v) return std::nullopt;
    const auto* spec = v->is_object() ? v->as_object().if_contains("spec") : nullptr;
    const auto* replicas = spec && spec->is_object() ? spec->as_object().if_contains("replicas") : nullptr;
    if (!replicas || !replicas->is_int64()) return 0;  // omitted replicas means 0 in a Scale
    return static_cast<int>(replicas->as_int64());
  }

  bool resize(Pool& p, int delta) {
    const auto current = get_replicas(p.deployment);
    if (!current) return false;
    const int next = std::max(0, *current + delta);
    const std::string body = R"({"spec":{"replicas":)" + std::to_string(next) + "}}";
    if (!call("PATCH", scale_path(p.deployment), body)) return false;
    p.spec_replicas = next;
    log::info("scaler.k8s_scaled", {{"deployment", p.deployment}, {"replicas", next}});
    return true;
  }

  std::optional<std::vector<ObservedReplica>> list_endpoints(const std::string& service) {
    auto v = call("GET", "/apis/discovery.k8s.io/v1/namespaces/" + config_.ns +
                             "/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3D" + service);
    if (!v || !v->is_object()) return std::nullopt;
    std::vector<ObservedReplica> out;
    const auto* items = v->as_object().if_contains("items");
    if (!items || !items->is_array()) return out;
    for (const auto& item : items->as_array()) {
      if (!item.is_object()) continue;
      const auto& slice = item.as_object();
      int port = 0;
      if (const auto* ports = slice.if_contains("ports"); ports && ports->is_array()) {
        for (const auto& pv : ports->as_array()) {
          if (!pv.is_object()) continue;
          const auto* name = pv.as_object().if_contains("name");
          const auto* num = pv.as_object().if_contains("port");
          const bool match = config_.port_name.empty() || (name && name->is_string() && name->as_string() == config_.port_name);
          if (match && num && num->is_int64()) {
            port = static_cast<int>(num->as_int64());
            break;
          }
        }
      }
      const auto* eps = slice.if_contains("endpoints");
      if (!eps || !eps->is_array()) continue;
      for (const auto& ev : eps->as_array()) {
        if (!ev.is_object()) continue;
        const auto& e = ev.as_object();
        const auto* addrs = e.if_contains("addresses");
        if (!addrs || !addrs->is_array() || addrs->as_array().empty() || !addrs->as_array()[0].is_string()) continue;
        ObservedReplica r;
        r.endpoint.host = std::string(addrs->as_array()[0].as_string());
        r.endpoint.port = static_cast<std::uint16_t>(port);
        r.id = r.endpoint.host;
        if (const auto* ref = e.if_contains("targetRef"); ref && ref->is_object())
          if (const auto* n = ref->as_object().if_contains("name"); n && n->is_string()) r.id = std::string(n->as_string());
        // A nil condition means unknown; Kubernetes asks consumers to read that as ready.
        r.ready = true;
        if (const auto* cond = e.if_contains("conditions"); cond && cond->is_object()) {
          const auto& c = cond->as_object();
          if (const auto* ready = c.if_contains("ready"); ready && ready->is_bool()) r.ready = ready->as_bool();
          if (const auto* term = c.if_contains("terminating"); term && term->is_bool() && term->as_bool()) {
            r.exited = true;
            r.detail = "pod terminating";
          }
        }
        out.push_back(std::move(r));
      }
    }
    return out;
  }

  KubernetesActuatorConfig config_;
  std::vector<Pool> pools_;
  std::map<std::string, double> tombstones_;
  ActuatorStats stats_;
};

}  // namespace

std::unique_ptr<Actuator> make_kubernetes_actuator(KubernetesActuatorConfig config) {
  return std::make_unique<KubernetesActuator>(std::move(config));
}

}  // namespace tidegate::scaler
