#pragma once
// Locates the model folder and the reference fixture for the encoder tests.
#include <boost/json.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tidegate::encoder::testing {

inline std::string model_dir() {
  if (const char* env = std::getenv("TIDEGATE_MINILM_DIR")) return env;
  return std::string(TIDEGATE_SOURCE_ROOT) + "/third_party/models/all-MiniLM-L6-v2";
}

inline bool have_model() { return std::filesystem::exists(model_dir() + "/model.safetensors"); }

inline constexpr const char* kNoModel = "MiniLM weights not installed (run scripts/setup.sh); looked in ";

inline boost::json::object reference() {
  std::ifstream in(std::string(TIDEGATE_SOURCE_ROOT) + "/encoder/tests/data/minilm_reference.json");
  std::stringstream text;
  text << in.rdbuf();
  return boost::json::parse(text.str()).as_object();
}

}  // namespace tidegate::encoder::testing
