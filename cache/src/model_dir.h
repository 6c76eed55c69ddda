#pragma once
// Where the minilm embedder's files come from. Shared by the config parser, so that
// `tidegate --check-config` fails on a missing folder instead of the gateway at start, and by
// the factory, which logs the folder it loads.
//
//  - model_dir set: that folder and no other. parse_cache_config has already made a relative one
//    absolute against the config file's folder (or the working directory when it was given no
//    file). A folder that is missing is an error, never a reason to look somewhere else.
//  - model_dir unset: kDefaultMiniLMDir in the working directory, then in the source tree this
//    binary was built from (so tests and tools work from any directory). The choice is logged.
#include <string>

namespace tidegate::cache {

struct ModelDirChoice {
  std::string dir;     // the folder to load; empty when none qualifies
  std::string origin;  // "config" (model_dir), "default in the working directory", "default in the source tree"
  std::string error;   // why no folder qualifies; empty when `dir` is usable
};

// "" when `dir` holds what the minilm loader needs (config.json, vocab.txt, model.safetensors),
// else what is missing, naming the folder.
std::string model_dir_problem(const std::string& dir);

// `configured` is EmbedderConfig::model_dir (already resolved by the parser).
ModelDirChoice choose_model_dir(const std::string& configured);

}  // namespace tidegate::cache
