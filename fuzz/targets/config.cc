// The config loader the gateway runs for `--config`, `--check-config` and SIGHUP:
// app::load_sections (gateway/app/config_load.cc): load_gateway_config(path) (read, YAML parse,
// the gateway's keys), then the cache, cost and scaler sections through their parsers inside the
// wrapper that turns their exceptions into ConfigError, then the checks across sections. Its
// contract: only ConfigError leaves it (a yaml-cpp exception from a section's parser once
// escaped and, on SIGHUP, ended the running gateway). So ConfigError returns 0 and any other
// exception propagates: libFuzzer reports it as a crash.
//
// With FUZZ_CONFIG_STRICT=1 in the environment the section parsers are also called bare, and a
// non-ConfigError out of one of them aborts: the loader's wrapper turns those into ConfigError,
// so they are not bugs of the loader, but they are the places whose messages are the wrapper's
// generic "not the shape this section expects" rather than the section's own.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <yaml-cpp/yaml.h>

#include "config_load.h"
#include "fuzz_util.h"
#include "tidegate/cache/cache_config.h"
#include "tidegate/cache/semantic_cache.h"
#include "tidegate/common/config_error.h"
#include "tidegate/cost/accounting.h"
#include "tidegate/cost/config.h"
#include "tidegate/gateway/config.h"
#include "tidegate/scaler/config.h"

namespace fuzz {
extern std::string g_default_model_dir;  // stubs/config_stubs.cc
}

namespace {

using namespace tidegate;
namespace fs = std::filesystem;

fs::path g_dir;
std::string g_path;
bool g_strict = false;

bool present(const YAML::Node& n) { return n && !n.IsNull(); }

template <typename F>
void bare(const char* name, F&& parse) {
  try {
    parse();
  } catch (const ConfigError&) {
  } catch (const std::exception& e) {
    fuzz::fail("a section parser threw something other than ConfigError", name, e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_dir = fs::path(fs::is_directory("/dev/shm") ? "/dev/shm" : fs::temp_directory_path()) / ("tidegate_fuzz_config." + std::to_string(::getpid()));
  fs::remove_all(g_dir);
  // A folder that passes the model check, as the default and as `model_dir: model`.
  fs::create_directories(g_dir / "model");
  for (const char* f : {"config.json", "vocab.txt", "model.safetensors"}) std::ofstream(g_dir / "model" / f) << "x";
  fuzz::g_default_model_dir = (g_dir / "model").string();
  g_path = (g_dir / "tidegate.yaml").string();
  g_strict = std::getenv("FUZZ_CONFIG_STRICT") != nullptr;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  {
    std::ofstream out(g_path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    (void)app::load_sections(g_path);
  } catch (const ConfigError&) {
  }
  if (g_strict) {
    YAML::Node root;
    try {
      root = YAML::Load(std::string(reinterpret_cast<const char*>(data), size));
    } catch (const YAML::Exception&) {
      return 0;
    }
    if (!root.IsMap()) return 0;
    if (present(root["cache"])) bare("cache", [&] { (void)cache::parse_cache_config(root["cache"], "cache", g_dir.string()); });
    if (present(root["cost"])) bare("cost", [&] { (void)cost::parse_cost_config(root["cost"], "cost"); });
    if (present(root["scaler"])) bare("scaler", [&] { (void)scaler::parse_scaler_config(root["scaler"], "scaler"); });
  }
  return 0;
}
