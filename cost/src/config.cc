#include <yaml-cpp/yaml.h>
#include <stdexcept>


#include "tidegate/common/config_error.h"
#include "tidegate/common/url.h"
#include "tidegate/cost/accounting.h"
#include "tidegate/cost/config.h"

namespace tidegate::cost {
namespace {

constexpr ReplicaState kPricedStates[] = {ReplicaState::kStarting, ReplicaState::kWarm, ReplicaState::kActive,
                                          ReplicaState::kDraining, ReplicaState::kStandby};

// Prometheus label names: [a-zA-Z_][a-zA-Z0-9_]*, not reserved (__), and short. A loop, not
// std::regex, whose recursive matcher overflowed the stack on a 200,000-character name.
constexpr std::size_t kMaxLabelNameBytes = 64;

bool valid_label_name(const std::string& s) {
  if (s.empty() || s.size() > kMaxLabelNameBytes || s.rfind("__", 0) == 0) return false;
  const auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!alpha(s.front())) return false;
  for (const char c : s)
    if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
  return true;
}

ReplicaClass parse_class(const std::string& name, const YAML::Node& node, const std::string& path) {
  if (!node.IsMap()) throw ConfigError(path, yaml_line(node), "expected a mapping with usd_per_hour");
  yaml_reject_unknown(node, path, {"usd_per_hour", "state_fraction", "state_usd_per_hour"});
  ReplicaClass c;
  c.name = name;
  c.usd_per_hour = yaml_double(node, "usd_per_hour", path, std::nullopt, 0.0);
  const auto fractions = node["state_fraction"];
  const auto explicit_prices = node["state_usd_per_hour"];
  const std::vector<std::string> state_keys{"starting", "warm", "active", "draining", "standby"};
  yaml_reject_unknown(fractions, path_join(path, "state_fraction"), state_keys);
  yaml_reject_unknown(explicit_prices, path_join(path, "state_usd_per_hour"), state_keys);
  for (const auto st : kPricedStates) {
    const std::string key(to_string(st));
    const bool has_fraction = fractions && fractions.IsMap() && fractions[key];
    const bool has_price = explicit_prices && explicit_prices.IsMap() && explicit_prices[key];
    if (has_fraction && has_price)
      throw ConfigError(path_join(path, "state_usd_per_hour." + key), yaml_line(explicit_prices[key]),
                        "give either a fraction or a price for a state, not both");
    double per_hour = c.usd_per_hour;  // a GPU bills the same whatever it is doing, unless told
    if (has_fraction)
      per_hour = c.usd_per_hour * yaml_double(fractions, key, path_join(path, "state_fraction"), std::nullopt, 0.0);
    if (has_price) per_hour = yaml_double(explicit_prices, key, path_join(path, "state_usd_per_hour"), std::nullopt, 0.0);
    c.usd_per_second[static_cast<std::size_t>(st)] = per_hour / 3600.0;
  }
  return c;
}

BudgetRule parse_budget(const YAML::Node& node, const std::string& path, const CostConfig& cfg) {
  if (!node.IsMap()) throw ConfigError(path, yaml_line(node), "expected a mapping with scope, period, limits");
  yaml_reject_unknown(node, path, {"scope", "period", "soft_usd", "hard_usd"});
  BudgetRule r;
  const auto scope = yaml_string(node, "scope", path);
  const auto colon = scope.find(':');
  const int line = yaml_line(node["scope"]);
  const auto bad_scope = [&](const std::string& why) {
    return ConfigError(path_join(path, "scope"), line, why + " (use key:NAME, tenant:NAME, tag:KEY=VALUE; * for each)");
  };
  if (colon == std::string::npos || colon + 1 >= scope.size()) throw bad_scope("malformed scope '" + scope + "'");
  const auto kind = scope.substr(0, colon);
  auto rest = scope.substr(colon + 1);
  if (kind == "key") r.kind = ScopeKind::kKey;
  else if (kind == "tenant") r.kind = ScopeKind::kTenant;
  else if (kind == "tag") {
    r.kind = ScopeKind::kTag;
    const auto eq = rest.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 >= rest.size()) throw bad_scope("tag scope needs KEY=VALUE");
    r.tag_key = rest.substr(0, eq);
    rest = rest.substr(eq + 1);
    if (std::find(cfg.tags.labels.begin(), cfg.tags.labels.end(), r.tag_key) == cfg.tags.labels.end())
      throw bad_scope("tag '" + r.tag_key + "' is not in tags.labels");
  } else {
    throw bad_scope("unknown scope kind '" + kind + "'");
  }
  r.match = rest;
  r.period = yaml_enum<BudgetPeriod>(node, "period", path, {{"month", BudgetPeriod::kMonth}, {"day", BudgetPeriod::kDay}});
  r.soft_usd = yaml_double(node, "soft_usd", path, 0.0, 0.0);
  r.hard_usd = yaml_double(node, "hard_usd", path, 0.0, 0.0);
  if (r.soft_usd == 0 && r.hard_usd == 0)
    throw ConfigError(path, yaml_line(node), "a budget needs soft_usd or hard_usd");
  if (r.hard_usd > 0 && r.soft_usd > r.hard_usd)
    throw ConfigError(path_join(path, "soft_usd"), yaml_line(node["soft_usd"]), "soft_usd must not exceed hard_usd");
  return r;
}

void parse_tags(const YAML::Node& node, const std::string& path, TagPolicy& tags) {
  if (!node) return;
  if (!node.IsMap()) throw ConfigError(path, yaml_line(node), "expected a mapping");
  yaml_reject_unknown(node, path, {"labels", "values", "max_values"});
  const auto labels = node["labels"];
  if (labels) {
    if (!labels.IsSequence()) throw ConfigError(path_join(path, "labels"), yaml_line(labels), "expected a list");
    for (std::size_t i = 0; i < labels.size(); ++i) {
      const auto name = labels[i].Scalar();
      const std::string p = path_join(path, "labels[" + std::to_string(i) + "]");
      if (!valid_label_name(name)) throw ConfigError(p, yaml_line(labels[i]), "not a valid Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, at most 64 characters, not starting with __)");
      if (name == "model" || name == "tenant" || name == "kind" || name == "type")
        throw ConfigError(p, yaml_line(labels[i]), "'" + name + "' is reserved");
      tags.labels.push_back(name);
    }
  }
  const auto values = node["values"];
  if (values) {
    if (!values.IsMap()) throw ConfigError(path_join(path, "values"), yaml_line(values), "expected a mapping");
    for (const auto& kv : values) {
      const auto key = kv.first.Scalar();
      const std::string p = path_join(path, "values." + key);
      if (std::find(tags.labels.begin(), tags.labels.end(), key) == tags.labels.end())
        throw ConfigError(p, yaml_line(kv.first), "tag is not in tags.labels");
      if (!kv.second.IsSequence()) throw ConfigError(p, yaml_line(kv.second), "expected a list of values");
      for (const auto& v : kv.second) tags.values[key].insert(v.Scalar());
    }
  }
  tags.max_values = static_cast<std::size_t>(yaml_int(node, "max_values", path, 20, 1, 1000));
}

}  // namespace

std::string to_string(BudgetPeriod p) { return p == BudgetPeriod::kDay ? "day" : "month"; }

std::string scope_name(const BudgetRule& r) {
  switch (r.kind) {
    case ScopeKind::kKey: return "key:" + r.match;
    case ScopeKind::kTenant: return "tenant:" + r.match;
    case ScopeKind::kTag: return "tag:" + r.tag_key + "=" + r.match;
  }
  return "?";
}

std::shared_ptr<const CostConfig> parse_cost_config(const YAML::Node& node, const std::string& path) {
  auto cfg = std::make_shared<CostConfig>();
  if (!node || node.IsNull()) return cfg;  // no prices: everything costs 0, budgets off
  if (!node.IsMap()) throw ConfigError(path, yaml_line(node), "expected a mapping");
  yaml_reject_unknown(node, path,
                      {"data_dir", "replica_classes", "models", "api_models", "attribution", "cache_lookup_usd",
                       "savings_ewma_alpha", "tags", "budgets", "alerts", "reporting"});
  cfg->data_dir = yaml_string(node, "data_dir", path, std::string());

  const auto classes = node["replica_classes"];
  const auto classes_path = path_join(path, "replica_classes");
  if (classes) {
    if (!classes.IsMap()) throw ConfigError(classes_path, yaml_line(classes), "expected a mapping of class -> prices");
    for (const auto& kv : classes) {
      const auto name = kv.first.Scalar();
      cfg->replica_classes[name] = parse_class(name, kv.second, path_join(classes_path, name));
    }
  }
  const auto models = node["models"];
  if (models) {
    if (!models.IsMap()) throw ConfigError(path_join(path, "models"), yaml_line(models), "expected model: class");
    for (const auto& kv : models) {
      const auto model = kv.first.Scalar();
      const auto cls = kv.second.Scalar();
      if (!cfg->has_class(cls))
        throw ConfigError(path_join(path, "models." + model), yaml_line(kv.second), "unknown replica class '" + cls + "'");
      cfg->model_classes[model] = cls;
    }
  }
  const auto apis = node["api_models"];
  if (apis) {
    const auto apis_path = path_join(path, "api_models");
    if (!apis.IsMap()) throw ConfigError(apis_path, yaml_line(apis), "expected a mapping of model -> prices");
    for (const auto& kv : apis) {
      const auto p = path_join(apis_path, kv.first.Scalar());
      yaml_reject_unknown(kv.second, p, {"input_usd_per_1m", "output_usd_per_1m"});
      ApiPrice price;
      price.input_usd_per_1m = yaml_double(kv.second, "input_usd_per_1m", p, std::nullopt, 0.0);
      price.output_usd_per_1m = yaml_double(kv.second, "output_usd_per_1m", p, std::nullopt, 0.0);
      cfg->api_models[kv.first.Scalar()] = price;
    }
  }
  const auto attribution = node["attribution"];
  const auto attr_path = path_join(path, "attribution");
  yaml_reject_unknown(attribution, attr_path, {"w_prefill", "w_decode", "w_cached_prompt"});
  cfg->w_prefill = yaml_double(attribution, "w_prefill", attr_path, 1.0, 0.0);
  cfg->w_decode = yaml_double(attribution, "w_decode", attr_path, 4.0, 0.0);
  if (cfg->w_prefill + cfg->w_decode <= 0)
    throw ConfigError(attr_path, yaml_line(attribution), "w_prefill and w_decode cannot both be 0");
  // By default a tenth of a prefilled token (cost/README.md); never more than one.
  cfg->w_cached_prompt = yaml_double(attribution, "w_cached_prompt", attr_path, 0.1 * cfg->w_prefill, 0.0);
  if (cfg->w_cached_prompt > cfg->w_prefill)
    throw ConfigError(attr_path + ".w_cached_prompt", yaml_line(attribution["w_cached_prompt"]),
                      "must not exceed w_prefill (a cached token skips work, it adds none)");
  cfg->cache_lookup_usd = yaml_double(node, "cache_lookup_usd", path, cfg->cache_lookup_usd, 0.0);
  cfg->savings_ewma_alpha = yaml_double(node, "savings_ewma_alpha", path, 0.1, 0.001, 1.0);
  parse_tags(node["tags"], path_join(path, "tags"), cfg->tags);

  const auto budgets = node["budgets"];
  if (budgets) {
    const auto bp = path_join(path, "budgets");
    if (!budgets.IsSequence()) throw ConfigError(bp, yaml_line(budgets), "expected a list");
    for (std::size_t i = 0; i < budgets.size(); ++i) {
      auto rule = parse_budget(budgets[i], bp + "[" + std::to_string(i) + "]", *cfg);
      // A budget on a tag value must be able to see that value: admit it to a fixed list.
      if (rule.kind == ScopeKind::kTag && rule.match != "*" && cfg->tags.values.count(rule.tag_key))
        cfg->tags.values[rule.tag_key].insert(rule.match);
      cfg->budgets.push_back(std::move(rule));
    }
  }
  const auto alerts = node["alerts"];
  const auto ap = path_join(path, "alerts");
  yaml_reject_unknown(alerts, ap, {"webhook_url", "webhook_timeout"});
  cfg->webhook_url = yaml_string(alerts, "webhook_url", ap, std::string());
  if (!cfg->webhook_url.empty()) {
    try {
      common::parse_http_url(cfg->webhook_url);  // the dispatcher parses it again per alert; refuse at load
    } catch (const std::invalid_argument& e) {
      throw ConfigError(path_join(ap, "webhook_url"), yaml_line(alerts["webhook_url"]), e.what());
    }
  }
  cfg->webhook_timeout_s = yaml_seconds(alerts, "webhook_timeout", ap, 2.0);

  const auto reporting = node["reporting"];
  const auto rp = path_join(path, "reporting");
  yaml_reject_unknown(reporting, rp, {"bucket", "horizon", "idle_hint_fraction", "live_step", "live_points"});
  cfg->bucket_s = yaml_seconds(reporting, "bucket", rp, 60.0);
  cfg->horizon_s = yaml_seconds(reporting, "horizon", rp, 7 * 86400.0);
  if (cfg->bucket_s < 1) throw ConfigError(path_join(rp, "bucket"), yaml_line(reporting["bucket"]), "must be >= 1s");
  if (cfg->horizon_s / cfg->bucket_s > 200000)
    throw ConfigError(path_join(rp, "horizon"), yaml_line(reporting["horizon"]), "more than 200000 buckets; raise bucket");
  cfg->idle_hint_fraction = yaml_double(reporting, "idle_hint_fraction", rp, 0.3, 0.0, 1.0);
  cfg->live_step_s = yaml_seconds(reporting, "live_step", rp, 5.0);
  if (cfg->live_step_s < 0.1) throw ConfigError(path_join(rp, "live_step"), yaml_line(reporting["live_step"]), "must be >= 100ms");
  cfg->live_points = static_cast<int>(yaml_int(reporting, "live_points", rp, 120, 2, 2000));
  return cfg;
}

}  // namespace tidegate::cost
