// What cache/src/config.cc links against outside the parser, without the encoder, FAISS or the
// kernels that cache/src/factory.cc and minilm_embedder.cc bring in.
//
// model_dir_problem / choose_model_dir decide, as factory.cc does, whether a folder holds a
// MiniLM model (config.json, vocab.txt, model.safetensors). The config target makes such a
// folder once (fuzz::g_default_model_dir) and uses it as the default, so a config without
// model_dir goes past the model check into the rest of the section, as on a set-up host.
#include <filesystem>
#include <string>

#include "model_dir.h"
#include "tidegate/encoder/minilm.h"

namespace fuzz {
std::string g_default_model_dir;  // set by the config target's LLVMFuzzerInitialize
}

namespace tidegate::cache {

std::string model_dir_problem(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return "folder " + dir + " does not exist";
  for (const char* file : {"config.json", "vocab.txt", "model.safetensors"})
    if (!fs::is_regular_file(fs::path(dir) / file, ec)) return "folder " + dir + " has no " + file;
  return "";
}

ModelDirChoice choose_model_dir(const std::string& configured) {
  if (!configured.empty()) return {configured, "config", model_dir_problem(configured)};
  if (!fuzz::g_default_model_dir.empty() && model_dir_problem(fuzz::g_default_model_dir).empty())
    return {fuzz::g_default_model_dir, "default", ""};
  return {"", "", "not set, and no default model folder"};
}

}  // namespace tidegate::cache

namespace tidegate::encoder {

// Both answers are reachable on real hosts; false makes `precision: bf16` a ConfigError, the
// path a host without AVX512-BF16 takes (the true path is plain assignment).
bool minilm_bf16_supported() { return false; }

}  // namespace tidegate::encoder

// scaler/src/policy.cc holds validate(), which parse_scaler_config runs, and decide(), which
// only the running scaler calls; decide()'s planners are not linked here.
#include <cstdlib>

#include "work_model.h"

namespace tidegate::scaler::detail {
WorkPlan plan_work(const PolicyConfig&, PolicyState&, const PolicyInput&, double) { std::abort(); }
std::vector<std::size_t> usable_tiers(const PolicyConfig&, double) { std::abort(); }
}  // namespace tidegate::scaler::detail
