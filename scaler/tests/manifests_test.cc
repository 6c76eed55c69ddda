// configs/k8s/: YAML syntax, and the references between the objects that kubectl would
// only find wrong at run time (RBAC rules the scaler needs, names, selectors, the config).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

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

}  // namespace
}  // namespace tidegate::scaler
