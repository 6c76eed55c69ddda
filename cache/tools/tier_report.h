#pragma once
// tidegate-cache-eval --verifier: quality of each combination of the lookup's tiers (cosine only,
// + lexical guards, + pair verifier) on labelled pairs, with thresholds chosen on the even rows
// and every figure reported on the odd rows, so no reported number was fitted to the rows it is
// measured on.
#include <boost/json.hpp>
#include <string>
#include <vector>

#include "tidegate/cache/cache_config.h"
#include "tidegate/encoder/pair_verifier.h"

namespace tidegate::cache {

struct TierInputs {
  const std::vector<std::string>* q1 = nullptr;  // cached prompts (all in one index)
  const std::vector<std::string>* q2 = nullptr;  // lookups
  const std::vector<float>* v1 = nullptr;
  const std::vector<float>* v2 = nullptr;
  std::size_t dim = 0;
  std::vector<bool> duplicate;  // the pair's label
  std::size_t candidates = 4;
  double floor = 0.8;
  double confidence = 0.95;
  GuardChecks verifier_guards;  // the checks a candidate passes before the verifier scores it
  // Optional: one CSV line per verified candidate (lookup row, cosine, probability, which of
  // the four guard checks it fails, whether it is the row's own question1, the row's label),
  // for analyses of the decision outside the tool.
  std::string candidates_out;
};

// The MiniLM folder the verifier borrows its embeddings from (the cache's default rule).
std::string resolve_minilm_dir();

// `calibration_out` (optional): writes the verifier's calibration rows of the even half
// ("score,correct"), the file the cache reads as calibration.csv.
boost::json::object tier_report(const TierInputs& in, const encoder::PairVerifier& verifier, const std::string& calibration_out);

}  // namespace tidegate::cache
