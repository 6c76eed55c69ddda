#pragma once
// The three actuators and their settings (parsed by parse_scaler_config).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tidegate/scaler/actuator.h"

namespace tidegate::scaler {

// Replicas as child processes of this host (tidegate-sim for demos, vLLM on a GPU box).
struct ProcessActuatorConfig {
  std::string model;
  // argv, no shell; {port}, {gpu} ("0" or "0,1"), {model} and {replica} are substituted.
  std::vector<std::string> command;
  std::map<std::string, std::string> env;  // values substituted too (CUDA_VISIBLE_DEVICES: "{gpu}")
  std::vector<int> gpus;                   // devices to hand out; empty = none
  int gpus_per_replica = 1;
  int port_from = 20000;
  int port_to = 20999;
  std::string host = "127.0.0.1";
  std::string health_path = "/health";
  double health_timeout_s = 0.3;
  double stop_grace_s = 10;
  std::string log_dir;  // child stdout/stderr to <log_dir>/<replica>.log; empty = /dev/null
  // The standby tier, through the engine's own API (vLLM with --enable-sleep-mode; tidegate-sim):
  // POSTed to the replica. Empty: no standby (park() fails, replicas stay warm).
  std::string sleep_path = "/sleep?level=1";
  std::string wake_path = "/wake_up";
  double sleep_timeout_s = 30;  // vLLM answers /sleep and /wake_up once done
};

struct KubernetesActuatorConfig {
  std::string model;
  std::string api_server;  // https://host:port; empty = in-cluster (KUBERNETES_SERVICE_HOST/PORT)
  std::string token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  std::string namespace_file = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
  std::string token;      // inline token (overrides token_file)
  std::string ns;         // empty = read namespace_file
  std::string deployment;       // active replicas
  std::string service;          // EndpointSlices of the active Deployment
  std::string warm_deployment;  // optional warm pool (ready pods, not routed until promoted)
  std::string warm_service;
  std::string port_name;  // EndpointSlice port to use; empty = the first
  bool insecure_skip_tls_verify = false;
  double request_timeout_s = 5;
  int retries = 4;              // per call, on transport errors, 409, 429 and 5xx
  double backoff_initial_s = 0.2;
  double backoff_max_s = 5;
  bool set_pod_deletion_cost = true;  // so the Deployment removes the pod we drained
  // The standby tier through the engine's API at the pod's address (see ProcessActuatorConfig);
  // the pod's readiness probe should pass while asleep (vLLM's /health does).
  std::string sleep_path;  // e.g. /sleep?level=1; empty: no standby
  std::string wake_path = "/wake_up";
  double sleep_timeout_s = 30;
};

struct StaticActuatorConfig {
  std::vector<Endpoint> endpoints;
};

std::unique_ptr<Actuator> make_process_actuator(ProcessActuatorConfig config);
std::unique_ptr<Actuator> make_kubernetes_actuator(KubernetesActuatorConfig config);
std::unique_ptr<Actuator> make_static_actuator(StaticActuatorConfig config);

// Replaces {name} placeholders; unknown names are left as they are.
std::string substitute(const std::string& text, const std::map<std::string, std::string>& values);

}  // namespace tidegate::scaler
