// configs/k8s/: YAML syntax, and the references between the objects that kubectl would
// only find wrong at run time (RBAC rules the scaler needs, names, selectors, the config).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "tidegate/scaler/config.h"

namespace tidegate::scaler {
namespace {

namespace fs = std::filesystem;

struct Manifests {
  std::map<std::string, std::vector<YAML::Node>> by_kind;
  YAML::Node find(const std::string& kind, const std::string& name) const {
    const auto it = by_kind.find(kind);
    if (it == by_kind.end()) return {};
    for (const auto& n : it->second)
      if (n["metadata"]["name"].as<std::string>() == name) return n;
    return {};
  }
};

Manifests load() {
  Manifests m;
  const fs::path dir = fs::path(TIDEGATE_SOURCE_ROOT) / "configs" / "k8s";
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    for (const auto& doc : YAML::LoadAllFromFile(entry.path().string())) {
      EXPECT_TRUE(doc["apiVersion"] && doc["kind"]) << entry.path();
      const auto kind = doc["kind"].as<std::string>();
      if (kind != "Kustomization") {
        EXPECT_TRUE(doc["metadata"]["name"]) << entry.path() << " " << kind;
      }
      m.by_kind[kind].push_back(doc);
    }
  }
  return m;
}

bool labels_match(const YAML::Node& selector, const YAML::Node& labels) {
  for (const auto& kv : selector) {
    const auto key = kv.first.as<std::string>();
    if (!labels[key] || labels[key].as<std::string>() != kv.second.as<std::string>()) return false;
  }
  return true;
}

TEST(K8sManifests, ParseAndEveryDeploymentSelectsItsPods) {
  const auto m = load();
  ASSERT_GE(m.by_kind.at("Deployment").size(), 3u);
  for (const auto& d : m.by_kind.at("Deployment")) {
    EXPECT_EQ(d["apiVersion"].as<std::string>(), "apps/v1");
    EXPECT_TRUE(labels_match(d["spec"]["selector"]["matchLabels"], d["spec"]["template"]["metadata"]["labels"]))
        << d["metadata"]["name"];
  }
}

TEST(K8sManifests, RbacGrantsWhatTheScalerCalls) {
  const auto m = load();
  const auto role = m.find("Role", "tidegate-scaler");
  ASSERT_TRUE(role);
  std::set<std::string> grants;  // "group/resource:verb"
  for (const auto& rule : role["rules"])
    for (const auto& g : rule["apiGroups"])
      for (const auto& r : rule["resources"])
        for (const auto& v : rule["verbs"])
          grants.insert(g.as<std::string>() + "/" + r.as<std::string>() + ":" + v.as<std::string>());
  for (const char* need : {"apps/deployments/scale:get", "apps/deployments/scale:patch", "apps/deployments:get",
                           "discovery.k8s.io/endpointslices:list", "discovery.k8s.io/endpointslices:watch",
                           "/pods:patch"})
    EXPECT_TRUE(grants.count(need)) << need;
  EXPECT_FALSE(grants.count("apps/deployments:delete")) << "least privilege";

  const auto binding = m.find("RoleBinding", "tidegate-scaler");
  ASSERT_TRUE(binding);
  EXPECT_EQ(binding["roleRef"]["name"].as<std::string>(), "tidegate-scaler");
  const auto sa = binding["subjects"][0]["name"].as<std::string>();
  EXPECT_TRUE(m.find("ServiceAccount", sa));
  const auto gw = m.find("Deployment", "tidegate");
  ASSERT_TRUE(gw);
  EXPECT_EQ(gw["spec"]["template"]["spec"]["serviceAccountName"].as<std::string>(), sa);
  EXPECT_TRUE(m.find("Service", "tidegate"));
}

TEST(K8sManifests, EmbeddedConfigParsesAndNamesExistingObjects) {
  const auto m = load();
  const auto cm = m.find("ConfigMap", "tidegate-config");
  ASSERT_TRUE(cm);
  const auto gw = m.find("Deployment", "tidegate");
  bool mounted = false;
  for (const auto& v : gw["spec"]["template"]["spec"]["volumes"])
    mounted = mounted || (v["configMap"] && v["configMap"]["name"].as<std::string>() == "tidegate-config");
  EXPECT_TRUE(mounted);

  const auto root = YAML::Load(cm["data"]["tidegate.yaml"].as<std::string>());
  const auto cfg = parse_scaler_config(root["scaler"], "scaler");
  ASSERT_EQ(cfg->pools.size(), 1u);
  const auto& k = cfg->pools[0].kubernetes;
  ASSERT_EQ(cfg->pools[0].actuator, ActuatorKind::kKubernetes);
  for (const auto& [dep, svc] : {std::pair{k.deployment, k.service}, std::pair{k.warm_deployment, k.warm_service}}) {
    const auto d = m.find("Deployment", dep);
    const auto s = m.find("Service", svc);
    ASSERT_TRUE(d) << dep;
    ASSERT_TRUE(s) << svc;
    EXPECT_TRUE(labels_match(s["spec"]["selector"], d["spec"]["template"]["metadata"]["labels"])) << svc;
  }
  // The warm Service must not select active pods, or warm and routed would mix.
  const auto active = m.find("Deployment", k.deployment);
  EXPECT_FALSE(labels_match(m.find("Service", k.warm_service)["spec"]["selector"],
                            active["spec"]["template"]["metadata"]["labels"]));
}

// The gateway runs as several replicas: the Lease its scalers elect through is granted exactly
// (get/update on that name, create), a PodDisruptionBudget keeps a quorum, Redis is reachable.
TEST(K8sManifests, ReplicatedGatewayHasItsLeaseRbacPdbAndRedis) {
  const auto m = load();
  const auto cm = m.find("ConfigMap", "tidegate-config");
  ASSERT_TRUE(cm);
  const auto root = YAML::Load(cm["data"]["tidegate.yaml"].as<std::string>());
  const auto cfg = parse_scaler_config(root["scaler"], "scaler");
  const auto& le = cfg->leader_election;
  EXPECT_EQ(le.kind, ElectionKind::kKubernetes) << "three replicas need an elected scaler";
  EXPECT_LT(le.renew_deadline_s, le.lease_duration_s);

  const auto gw = m.find("Deployment", "tidegate");
  ASSERT_TRUE(gw);
  const int replicas = gw["spec"]["replicas"].as<int>();
  EXPECT_EQ(replicas, 3);
  EXPECT_NE(gw["spec"]["strategy"]["type"].as<std::string>(), "Recreate") << "a rollout keeps gateways up";

  // Lease verbs, exactly: get/update narrowed to the configured name, create (unnameable).
  std::set<std::string> named, unnamed;
  for (const auto& rule : m.find("Role", "tidegate-scaler")["rules"]) {
    bool leases = false;
    for (const auto& g : rule["apiGroups"])
      for (const auto& r : rule["resources"])
        leases = leases || (g.as<std::string>() == "coordination.k8s.io" && r.as<std::string>() == "leases");
    if (!leases) continue;
    std::vector<std::string> names;
    for (const auto& n : rule["resourceNames"]) names.push_back(n.as<std::string>());
    if (!names.empty()) {
      EXPECT_EQ(names, std::vector<std::string>{le.lease_name}) << "only the configured lease";
    }
    for (const auto& v : rule["verbs"]) (names.empty() ? unnamed : named).insert(v.as<std::string>());
  }
  EXPECT_EQ(named, (std::set<std::string>{"get", "update"}));
  EXPECT_EQ(unnamed, (std::set<std::string>{"create"}));

  const auto pdb = m.find("PodDisruptionBudget", "tidegate");
  ASSERT_TRUE(pdb);
  EXPECT_EQ(pdb["apiVersion"].as<std::string>(), "policy/v1");
  EXPECT_TRUE(labels_match(pdb["spec"]["selector"]["matchLabels"], gw["spec"]["template"]["metadata"]["labels"]));
  const int min_available = pdb["spec"]["minAvailable"].as<int>();
  EXPECT_GE(min_available, 2) << "a quorum of gateways stays up";
  EXPECT_LT(min_available, replicas) << "or no node could ever be drained";

  // redis.address names a Service in the namespace, on one of its ports, selecting a Deployment.
  const auto address = root["redis"]["address"].as<std::string>();
  const auto colon = address.rfind(':');
  ASSERT_NE(colon, std::string::npos) << address;
  const auto svc = m.find("Service", address.substr(0, colon));
  ASSERT_TRUE(svc) << address;
  bool port_found = false;
  for (const auto& p : svc["spec"]["ports"]) port_found = port_found || p["port"].as<std::string>() == address.substr(colon + 1);
  EXPECT_TRUE(port_found) << address;
  bool selected = false;
  for (const auto& d : m.by_kind.at("Deployment"))
    selected = selected || labels_match(svc["spec"]["selector"], d["spec"]["template"]["metadata"]["labels"]);
  EXPECT_TRUE(selected) << "the redis Service selects no Deployment";
  EXPECT_EQ(root["redis"]["expected_gateways"].as<int>(), replicas);
  for (const auto& [kind, docs] : m.by_kind)
    for (const auto& d : docs)
      if (kind != "Namespace" && kind != "Kustomization") {
        EXPECT_EQ(d["metadata"]["namespace"].as<std::string>(), "tidegate") << kind;
      }
}

// A removed model-server pod leaves the EndpointSlices at once, but the requests already on it
// came from every gateway: SIGTERM waits for them (engine-drain.py, from the kustomization's
// ConfigMap), within a bound the grace period leaves room for.
TEST(K8sManifests, ModelServersWaitForEveryGatewaysRequestsBeforeSigterm) {
  const auto m = load();
  int model_servers = 0;
  for (const auto& d : m.by_kind.at("Deployment")) {
    const auto pod = d["spec"]["template"]["spec"];
    const auto c = pod["containers"][0];
    if (!c["resources"]["limits"]["nvidia.com/gpu"]) continue;
    ++model_servers;
    const auto name = d["metadata"]["name"].as<std::string>();
    const auto cmd = c["lifecycle"]["preStop"]["exec"]["command"];
    ASSERT_TRUE(cmd && cmd.IsSequence()) << name << ": no preStop command";
    std::vector<std::string> args;
    for (const auto& a : cmd) args.push_back(a.as<std::string>());
    EXPECT_NE(std::find(args.begin(), args.end(), "/etc/tidegate/engine-drain.py"), args.end()) << name;
    const auto wait = std::find(args.begin(), args.end(), "--max-wait");
    ASSERT_NE(wait, args.end()) << name;
    ASSERT_NE(wait + 1, args.end()) << name;
    const double max_wait = std::stod(*(wait + 1));
    EXPECT_GE(pod["terminationGracePeriodSeconds"].as<double>(), max_wait + 5) << name << ": the kubelet would cut the wait";
    bool mounted = false;
    for (const auto& vm : c["volumeMounts"])
      if (vm["mountPath"].as<std::string>() == "/etc/tidegate")
        for (const auto& v : pod["volumes"])
          mounted |= v["name"].as<std::string>() == vm["name"].as<std::string>() && v["configMap"] &&
                     v["configMap"]["name"].as<std::string>() == "engine-drain";
    EXPECT_TRUE(mounted) << name << ": /etc/tidegate is not the engine-drain ConfigMap";
  }
  EXPECT_EQ(model_servers, 2);
  bool generated = false;
  for (const auto& k : m.by_kind.at("Kustomization"))
    for (const auto& g : k["configMapGenerator"])
      if (g["name"].as<std::string>() == "engine-drain")
        for (const auto& f : g["files"])
          generated |= f.as<std::string>() == "engine-drain.py" &&
                       fs::exists(fs::path(TIDEGATE_SOURCE_ROOT) / "configs" / "k8s" / "engine-drain.py");
  EXPECT_TRUE(generated) << "kustomization.yaml does not make the engine-drain ConfigMap from engine-drain.py";
}

}  // namespace
}  // namespace tidegate::scaler
