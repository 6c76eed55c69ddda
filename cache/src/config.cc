// Parsing of the `cache:` section. Unknown keys are rejected so typos fail at startup.
#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "model_dir.h"
#include "tidegate/cache/cache_config.h"
#include "tidegate/encoder/minilm.h"
#include "tidegate/cache/semantic_cache.h"
#include "tidegate/common/config_error.h"

namespace tidegate::cache {
namespace {

ContextConfig parse_context(const YAML::Node& node, const std::string& path) {
  if (!node.IsMap()) throw ConfigError(path, yaml_line(node), "expected a mapping {mode, turns}");
  yaml_reject_unknown(node, path, {"mode", "turns"});
  ContextConfig c;
  c.mode = yaml_enum<ContextConfig::Mode>(node, "mode", path, {{"scope", ContextConfig::Mode::kScope}, {"window", ContextConfig::Mode::kWindow}});
  c.turns = static_cast<int>(yaml_int(node, "turns", path, 1, 1, 64));
  return c;
}

// A relative model_dir names a folder beside the config file, wherever the gateway is started
// from (base_dir: the file's folder; empty when the YAML came from elsewhere, then the working
// directory). Stored absolute, so the factory never has to guess.
std::string resolve_model_dir(const std::string& raw, const std::string& base_dir) {
  namespace fs = std::filesystem;
  if (raw.empty() || fs::path(raw).is_absolute()) return raw;
  std::error_code ec;
  const fs::path base = base_dir.empty() ? fs::current_path(ec) : fs::absolute(base_dir, ec);
  return ec ? raw : (base / raw).lexically_normal().string();
}

// Checked at load, like bf16 below: a cache whose model folder is missing cannot start, so
// --check-config must say so, naming the key and the folder it looked at.
void check_model_dir(const EmbedderConfig& e, const YAML::Node& node, const std::string& path,
                     const std::string& raw, const std::string& base_dir) {
  if (e.type != "minilm") return;
  const auto choice = choose_model_dir(e.model_dir);
  if (choice.error.empty()) return;
  const auto key = path_join(path, "model_dir");
  const bool has_key = node && node.IsMap() && node["model_dir"];
  std::string why = choice.error;
  if (!raw.empty() && raw != e.model_dir)
    why += " (model_dir: " + raw + " is relative, so it is read from " +
           (base_dir.empty() ? std::string("the working directory") : "the config file's folder " + base_dir) + ")";
  throw ConfigError(key, has_key ? yaml_line(node["model_dir"]) : yaml_line(node), why);
}

encoder::MiniLMPrecision parse_precision(const YAML::Node& node, const std::string& path) {
  const auto precision = yaml_enum<encoder::MiniLMPrecision>(
      node, "precision", path,
      {{"auto", encoder::MiniLMPrecision::kAuto}, {"fp32", encoder::MiniLMPrecision::kFp32}, {"bf16", encoder::MiniLMPrecision::kBf16}});
  // Checked here, not at first use: a config that cannot run on this host should not load.
  if (precision == encoder::MiniLMPrecision::kBf16 && !encoder::minilm_bf16_supported())
    throw ConfigError(path_join(path, "precision"), yaml_line(node["precision"]),
                      "bf16 needs a CPU with AVX512-BF16, which this one lacks; use auto or fp32");
  return precision;
}

EmbedderConfig parse_embedder(const YAML::Node& node, const std::string& path) {
  EmbedderConfig e;
  if (!node) return e;
  if (node.IsScalar()) {  // shorthand: `embedder: hash`
    e.type = node.Scalar();
  } else {
    if (!node.IsMap()) throw ConfigError(path, yaml_line(node), "expected a mapping");
    yaml_reject_unknown(node, path,
                        {"type", "device", "precision", "model_dir", "url", "model", "api_key_env", "timeout", "threads",
                         "intra_op_threads", "max_batch",
                         "dim"});
    e.type = yaml_string(node, "type", path, e.type);
    using Device = EmbedderConfig::Device;
    e.device = yaml_enum<Device>(node, "device", path, {{"auto", Device::kAuto}, {"cpu", Device::kCpu}, {"gpu", Device::kGpu}});
    e.precision = parse_precision(node, path);
    e.model_dir = yaml_string(node, "model_dir", path, e.model_dir);
    e.url = yaml_string(node, "url", path, e.url);
    e.model = yaml_string(node, "model", path, e.model);
    e.api_key_env = yaml_string(node, "api_key_env", path, e.api_key_env);
    e.timeout_s = yaml_seconds(node, "timeout", path, e.timeout_s);
    e.threads = static_cast<int>(yaml_int(node, "threads", path, e.threads, 1, 64));
    e.intra_op_threads = static_cast<int>(yaml_int(node, "intra_op_threads", path, e.intra_op_threads, 1, 64));
    e.max_batch = static_cast<int>(yaml_int(node, "max_batch", path, e.max_batch, 1, 4096));
    e.dim = static_cast<int>(yaml_int(node, "dim", path, e.dim, 8, 4096));
  }
  if (e.type != "minilm" && e.type != "openai" && e.type != "hash")
    throw ConfigError(path_join(path, "type"), yaml_line(node), "expected minilm, openai or hash");
  if (e.type != "minilm" && e.device == EmbedderConfig::Device::kGpu)
    throw ConfigError(path_join(path, "device"), yaml_line(node["device"]),
                      "gpu is only available for the minilm embedder");
  if (e.type == "openai" && e.url.empty())
    throw ConfigError(path_join(path, "url"), yaml_line(node), "required for the openai embedder");
  if (e.timeout_s <= 0) throw ConfigError(path_join(path, "timeout"), yaml_line(node), "must be > 0");
  return e;
}

IndexConfig parse_index(const YAML::Node& node, const std::string& path) {
  IndexConfig ix;
  if (!node) return ix;
  // Not `map = node; map = YAML::Node()`: yaml-cpp assignment writes through to `node`.
  YAML::Node map;
  std::string type;
  if (node.IsScalar()) {  // shorthand: `index: flat`
    type = node.Scalar();
  } else {
    map.reset(node);
    if (!node.IsMap()) throw ConfigError(path, yaml_line(node), "expected hnsw, flat, gpu-flat or a mapping");
    yaml_reject_unknown(node, path,
                        {"type", "m", "ef_construction", "ef_search", "flat_max", "rebuild_fraction", "storage"});
    type = yaml_string(node, "type", path, std::string("hnsw"));
  }
  if (type == "hnsw") {
    ix.type = IndexConfig::Type::kHnsw;
  } else if (type == "flat") {
    ix.type = IndexConfig::Type::kFlat;
  } else if (type == "gpu-flat") {
    ix.type = IndexConfig::Type::kGpuFlat;
  } else {
    throw ConfigError(node.IsScalar() ? path : path_join(path, "type"),
                      yaml_line(node.IsScalar() ? node : node["type"]), "expected hnsw, flat or gpu-flat");
  }
  if (map.IsMap()) {
    ix.hnsw_m = static_cast<int>(yaml_int(map, "m", path, ix.hnsw_m, 4, 128));
    ix.ef_construction = static_cast<int>(yaml_int(map, "ef_construction", path, ix.ef_construction, 8, 4096));
    ix.ef_search = static_cast<int>(yaml_int(map, "ef_search", path, ix.ef_search, 1, 4096));
    ix.flat_max = static_cast<std::size_t>(yaml_int(map, "flat_max", path, static_cast<std::int64_t>(ix.flat_max), 0));
    ix.rebuild_fraction = yaml_double(map, "rebuild_fraction", path, ix.rebuild_fraction, 0.01, 0.9);
    ix.storage = yaml_enum<IndexConfig::Storage>(map, "storage", path, {{"fp16", IndexConfig::Storage::kFp16}, {"fp32", IndexConfig::Storage::kFp32}});
  }
  return ix;
}

double parse_threshold(const YAML::Node& node, const std::string& path, double fallback) {
  return yaml_double(node, "threshold", path, fallback, 0.0, 1.0);
}

double parse_false_hit_rate(const YAML::Node& node, const std::string& path) {
  const double rate = yaml_double(node, "max_false_hit_rate", path, 0.05, 0.0, 0.5);
  if (rate <= 0) throw ConfigError(path_join(path, "max_false_hit_rate"), yaml_line(node["max_false_hit_rate"]), "must be > 0");
  return rate;
}

// Unset: the default folder in the working directory if it holds a calibration, else the one in
// the source tree this binary was built from (as model_dir's default).
std::string default_verifier_dir() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto here = (fs::current_path(ec) / kDefaultVerifierDir).lexically_normal();
  if (fs::is_regular_file(here / kCalibrationFile, ec)) return here.string();
#ifdef TIDEGATE_SOURCE_ROOT
  const auto tree = (fs::path(TIDEGATE_SOURCE_ROOT) / kDefaultVerifierDir).lexically_normal();
  if (fs::is_regular_file(tree / kCalibrationFile, ec)) return tree.string();
#endif
  return here.string();
}

VerifierConfig parse_verifier(const YAML::Node& node, const std::string& path, const std::string& base_dir) {
  VerifierConfig v;
  if (node) {
    if (!node.IsMap()) throw ConfigError(path, yaml_line(node), "expected a mapping");
    yaml_reject_unknown(node, path,
                        {"dir", "device", "precision", "timeout", "intra_op_threads", "candidates", "floor",
                         "confidence"});
    v.dir = resolve_model_dir(yaml_string(node, "dir", path, std::string()), base_dir);
    using Device = EmbedderConfig::Device;
    v.device = yaml_enum<Device>(node, "device", path, {{"auto", Device::kAuto}, {"cpu", Device::kCpu}, {"gpu", Device::kGpu}});
    v.precision = parse_precision(node, path);
    v.timeout_s = yaml_seconds(node, "timeout", path, v.timeout_s);
    if (v.timeout_s <= 0) throw ConfigError(path_join(path, "timeout"), yaml_line(node["timeout"]), "must be > 0");
    v.intra_op_threads = static_cast<int>(yaml_int(node, "intra_op_threads", path, v.intra_op_threads, 1, 64));
    v.candidates = static_cast<std::size_t>(yaml_int(node, "candidates", path, static_cast<std::int64_t>(v.candidates), 1, 32));
    v.floor = yaml_double(node, "floor", path, v.floor, -1.0, 1.0);
    v.confidence = yaml_double(node, "confidence", path, v.confidence, 0.5, 0.999);
  }
  if (v.dir.empty()) v.dir = default_verifier_dir();
  return v;
}

AuditConfig parse_audit(const YAML::Node& node, const std::string& path) {
  AuditConfig a;
  if (!node) return a;
  if (!node.IsMap()) throw ConfigError(path, yaml_line(node), "expected a mapping");
  yaml_reject_unknown(node, path, {"fraction", "max_in_flight", "timeout", "judge_threshold", "max_scopes"});
  a.fraction = yaml_double(node, "fraction", path, a.fraction, 0.0, 1.0);
  a.max_in_flight = static_cast<std::size_t>(
      yaml_int(node, "max_in_flight", path, static_cast<std::int64_t>(a.max_in_flight), 1, 1024));
  a.timeout_s = yaml_seconds(node, "timeout", path, a.timeout_s);
  if (a.timeout_s <= 0) throw ConfigError(path_join(path, "timeout"), yaml_line(node["timeout"]), "must be > 0");
  a.judge_threshold = yaml_double(node, "judge_threshold", path, a.judge_threshold, -1.0, 1.0);
  a.max_scopes = static_cast<std::size_t>(
      yaml_int(node, "max_scopes", path, static_cast<std::int64_t>(a.max_scopes), 1, 10000000));
  return a;
}

// The threshold on the verifier's probability for `rate`, from the shipped calibration scores;
// a rate the calibration cannot support refuses the config (the key and line are named).
Calibration calibrate_for(const std::vector<CalibrationRow>& rows, double rate, const VerifierConfig& v,
                          const YAML::Node& node, const std::string& path) {
  auto c = calibrate_threshold(rows, rate, v.confidence);
  if (!c.ok)
    throw ConfigError(path_join(path, "max_false_hit_rate"), yaml_line(node["max_false_hit_rate"]),
                      "cannot be met with confidence " + std::to_string(v.confidence) + " on the calibration set " +
                          (std::filesystem::path(v.dir) / kCalibrationFile).string() + ": " + c.why);
  return c;
}

}  // namespace

std::shared_ptr<const CacheConfig> parse_cache_config(const YAML::Node& node, const std::string& path,
                                                     const std::string& base_dir) {
  auto c = std::make_shared<CacheConfig>();
  if (!node || node.IsNull()) return c;  // absent section: cache off
  if (node.IsScalar()) {                 // `cache: true|false`
    try {
      c->enabled = node.as<bool>();
    } catch (const YAML::Exception&) {
      throw ConfigError(path, yaml_line(node), "expected true, false or a mapping");
    }
    if (c->enabled) check_model_dir(c->embedder, node, path_join(path, "embedder"), "", base_dir);  // the default
    return c;
  }
  if (!node.IsMap()) throw ConfigError(path, yaml_line(node), "expected a mapping");
  yaml_reject_unknown(node, path,
                      {"enabled", "embedder", "index", "threshold", "context", "models", "ttl", "max_ttl",
                       "max_entries", "max_bytes", "max_temperature", "cache_tool_calls", "lexical_guard", "max_prompt_bytes",
                       "data_dir", "snapshot_interval", "snapshot_log_bytes", "lookup_timeout", "workers",
                       "max_queue", "max_false_hit_rate", "verifier", "exact_tier", "audit"});
  c->enabled = yaml_bool(node, "enabled", path, true);
  const auto enode = node["embedder"];
  const auto epath = path_join(path, "embedder");
  c->embedder = parse_embedder(enode, epath);
  const auto raw_model_dir = c->embedder.model_dir;
  c->embedder.model_dir = resolve_model_dir(raw_model_dir, base_dir);
  c->index = parse_index(node["index"], path_join(path, "index"));
  c->threshold = parse_threshold(node, path, c->threshold);
  if (node["max_false_hit_rate"]) c->max_false_hit_rate = parse_false_hit_rate(node, path);
  c->verifier = parse_verifier(node["verifier"], path_join(path, "verifier"), base_dir);
  c->exact_tier = yaml_bool(node, "exact_tier", path, c->exact_tier);
  c->audit = parse_audit(node["audit"], path_join(path, "audit"));
  if (node["context"]) c->context = parse_context(node["context"], path_join(path, "context"));
  c->ttl_s = yaml_seconds(node, "ttl", path, c->ttl_s);
  c->max_ttl_s = yaml_seconds(node, "max_ttl", path, std::max(c->max_ttl_s, c->ttl_s));
  if (c->ttl_s <= 0) throw ConfigError(path_join(path, "ttl"), yaml_line(node["ttl"]), "must be > 0");
  c->max_entries = static_cast<std::uint64_t>(
      yaml_int(node, "max_entries", path, static_cast<std::int64_t>(c->max_entries), 1));
  c->max_bytes = yaml_bytes(node, "max_bytes", path, c->max_bytes);
  if (c->max_bytes < 4096)
    throw ConfigError(path_join(path, "max_bytes"), yaml_line(node["max_bytes"]), "must be at least 4KiB");
  c->max_temperature = yaml_double(node, "max_temperature", path, c->max_temperature, 0.0, 10.0);
  c->cache_tool_calls = yaml_bool(node, "cache_tool_calls", path, c->cache_tool_calls);
  c->lexical_guard = yaml_bool(node, "lexical_guard", path, c->lexical_guard);
  c->max_prompt_bytes = static_cast<std::size_t>(
      yaml_int(node, "max_prompt_bytes", path, static_cast<std::int64_t>(c->max_prompt_bytes), 16, 1 << 20));
  c->data_dir = yaml_string(node, "data_dir", path, c->data_dir);
  c->snapshot_interval_s = yaml_seconds(node, "snapshot_interval", path, c->snapshot_interval_s);
  c->snapshot_log_bytes = yaml_bytes(node, "snapshot_log_bytes", path, c->snapshot_log_bytes);
  c->lookup_timeout_s = yaml_seconds(node, "lookup_timeout", path, c->lookup_timeout_s);
  if (c->lookup_timeout_s <= 0)
    throw ConfigError(path_join(path, "lookup_timeout"), yaml_line(node["lookup_timeout"]), "must be > 0");
  c->workers = static_cast<int>(yaml_int(node, "workers", path, c->workers, 1, 64));
  c->max_queue = static_cast<std::size_t>(yaml_int(node, "max_queue", path, static_cast<std::int64_t>(c->max_queue), 1));

  if (const auto models = node["models"]) {
    const auto mpath = path_join(path, "models");
    if (!models.IsMap()) throw ConfigError(mpath, yaml_line(models), "expected a mapping of model name to settings");
    for (const auto& kv : models) {
      const auto name = kv.first.Scalar();
      const auto p = mpath + "." + name;
      const auto& m = kv.second;
      if (!m.IsMap()) throw ConfigError(p, yaml_line(m), "expected a mapping");
      yaml_reject_unknown(m, p, {"enabled", "threshold", "shared", "ttl", "context", "max_false_hit_rate"});
      ModelCacheConfig mc;
      if (m["enabled"]) mc.enabled = yaml_bool(m, "enabled", p);
      if (m["threshold"]) mc.threshold = parse_threshold(m, p, 0);
      if (m["max_false_hit_rate"]) {
        if (m["threshold"])
          throw ConfigError(path_join(p, "max_false_hit_rate"), yaml_line(m["max_false_hit_rate"]),
                            "set threshold (cosine) or max_false_hit_rate (verifier), not both");
        mc.max_false_hit_rate = parse_false_hit_rate(m, p);
      }
      mc.shared = yaml_bool(m, "shared", p, false);
      if (m["ttl"]) {
        mc.ttl_s = yaml_seconds(m, "ttl", p);
        if (*mc.ttl_s <= 0) throw ConfigError(path_join(p, "ttl"), yaml_line(m["ttl"]), "must be > 0");
      }
      if (m["context"]) mc.context = parse_context(m["context"], path_join(p, "context"));
      c->models.emplace(name, mc);
    }
  }
  // The calibrated thresholds, once every key has been read. The scores are small and shipped
  // beside the weights, so a rate that cannot be met refuses the config at load.
  if (c->verifier_needed()) {
    const auto file = (std::filesystem::path(c->verifier.dir) / kCalibrationFile).string();
    std::vector<CalibrationRow> rows;
    const auto vnode = node["verifier"];
    try {
      rows = read_calibration_rows(file, &c->verifier.combine, &c->verifier.guards);
    } catch (const std::exception& e) {
      throw ConfigError(path_join(path, vnode && vnode["dir"] ? "verifier.dir" : "max_false_hit_rate"),
                        yaml_line(vnode && vnode["dir"] ? vnode["dir"] : node), e.what());
    }
    if (c->max_false_hit_rate) c->calibration = calibrate_for(rows, *c->max_false_hit_rate, c->verifier, node, path);
    for (auto& [name, mc] : c->models) {
      if (!mc.max_false_hit_rate) continue;
      const auto mnode = node["models"][name];
      mc.calibration = calibrate_for(rows, *mc.max_false_hit_rate, c->verifier, mnode, path_join(path, "models") + "." + name);
    }
  }
  // Last, so a typo elsewhere is reported first; a disabled cache loads no model.
  if (c->enabled) check_model_dir(c->embedder, enode ? enode : node, epath, raw_model_dir, base_dir);
  return c;
}

double CacheConfig::threshold_for(const std::string& model) const {
  const auto it = models.find(model);
  return it != models.end() && it->second.threshold ? *it->second.threshold : threshold;
}
const Calibration* CacheConfig::calibration_for(const std::string& model) const {
  const auto it = models.find(model);
  if (it != models.end()) {
    if (it->second.calibration) return &*it->second.calibration;
    if (it->second.threshold) return nullptr;  // this pool asked for cosine
  }
  return calibration ? &*calibration : nullptr;
}
bool CacheConfig::verifier_needed() const {
  if (max_false_hit_rate) return true;
  for (const auto& [name, m] : models)
    if (m.max_false_hit_rate) return true;
  return false;
}
bool CacheConfig::shared_for(const std::string& model) const {
  const auto it = models.find(model);
  return it != models.end() && it->second.shared;
}
double CacheConfig::ttl_for(const std::string& model) const {
  const auto it = models.find(model);
  return it != models.end() && it->second.ttl_s ? *it->second.ttl_s : ttl_s;
}
bool CacheConfig::enabled_for(const std::string& model) const {
  const auto it = models.find(model);
  return enabled && (it == models.end() || !it->second.enabled || *it->second.enabled);
}
const ContextConfig& CacheConfig::context_for(const std::string& model) const {
  const auto it = models.find(model);
  return it != models.end() && it->second.context ? *it->second.context : context;
}

}  // namespace tidegate::cache
