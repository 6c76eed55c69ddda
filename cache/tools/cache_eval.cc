// tidegate-cache-eval: quality of the semantic cache's matching on labelled question pairs.
// Loads every question1 into one exact (flat) index, queries each question2, and counts:
//   predicted duplicate = the best match of q2 among all q1s is its own q1 (same text) with
//   similarity >= threshold. precision = TP / predicted, recall = TP / labelled duplicates.
// It also reports the cache's view: a "hit" is any best match >= threshold, and a hit is
// correct only when it is the pair's own q1 and the pair is a duplicate (cache_precision).
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unordered_map>

#include "tidegate/cache/cache_config.h"
#include "tidegate/cache/cache_factory.h"
#include "tidegate/cache/calibration.h"
#include "tidegate/cache/faiss_index.h"
#include "tidegate/encoder/pair_verifier.h"
#include "tidegate/cache/policy.h"
#include "csv.h"
#include "tier_report.h"

using namespace tidegate::cache;
namespace encoder = tidegate::encoder;

namespace {

struct Pair {
  std::string q1, q2;
  bool dup = false;
};

std::vector<float> embed_all(encoder::Embedder& e, const std::vector<std::string>& texts, const char* what) {
  std::vector<float> out;
  out.reserve(texts.size() * e.dim());
  constexpr std::size_t kBatch = 32;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < texts.size(); i += kBatch) {
    std::vector<std::string> batch(texts.begin() + i, texts.begin() + std::min(texts.size(), i + kBatch));
    auto v = e.embed(batch, std::chrono::steady_clock::now() + std::chrono::minutes(5));
    out.insert(out.end(), v.begin(), v.end());
    if ((i / kBatch) % 50 == 0)
      std::cerr << "embedding " << what << ": " << i << "/" << texts.size() << "\n";
  }
  const auto s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cerr << "embedded " << texts.size() << " " << what << " in " << s << " s\n";
  return out;
}

int usage() {
  std::cerr << "usage: tidegate-cache-eval --pairs CSV [--config FILE] [--embedder minilm|hash] "
               "[--model-dir DIR] [--threshold X] [--limit N] [--vectors FILE] [--dump FILE] [--no-guard]\n"
               "       [--split even|odd] [--verifier DIR] [--candidates K] [--floor X] [--verifier-guards LIST]\n"
               "       [--write-calibration FILE] [--dump-candidates FILE]\n"
               "  --no-guard      similarity only, without the cache's lexical guard (numbers, names)\n"
               "  --vectors FILE  reuse the embeddings saved in FILE (computed and saved when absent)\n"
               "  --dump FILE     write per-pair similarity, own-match and label as CSV\n"
               "  --split P       score only pairs whose 0-based row index is even or odd (all question1s\n"
               "                  stay in the index): tune on one half, report on the other\n"
               "  --verifier DIR  also report the tiers (cosine only, + guards, + pair verifier over the top\n"
               "                  K candidates above the floor): thresholds chosen on the even rows,\n"
               "                  figures reported on the odd rows (\"tiers\" in the output)\n"
               "  --verifier-guards LIST  guard checks before the verifier (default: the calibration's, or all):\n"
               "                  numbers,names,negation,order (any subset) or none\n"
               "  --write-calibration FILE  the verifier's calibration scores (even rows) for calibration.csv\n"
               "  --dump-candidates FILE  every verified candidate: row, cosine, probability, the guard checks it\n"
               "                  fails, own question1 or not, the row's label (CSV)\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string pairs_path, config_path, embedder_type, model_dir, vectors_path, dump_path;
  std::optional<double> threshold;
  std::size_t limit = 0;
  std::optional<bool> guard_flag;
  int split = -1;  // -1 all pairs, 0 even rows, 1 odd rows
  std::string verifier_dir, calibration_out, candidates_out;
  std::optional<std::size_t> candidates_flag;
  std::optional<double> floor_flag;
  std::optional<GuardChecks> verifier_guards_flag;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument("missing value for " + a);
      return argv[++i];
    };
    try {
      if (a == "--pairs") pairs_path = next();
      else if (a == "--config") config_path = next();
      else if (a == "--embedder") embedder_type = next();
      else if (a == "--model-dir") model_dir = next();
      else if (a == "--threshold") threshold = std::stod(next());
      else if (a == "--limit") limit = std::stoul(next());
      else if (a == "--vectors") vectors_path = next();
      else if (a == "--dump") dump_path = next();
      else if (a == "--no-guard") guard_flag = false;
      else if (a == "--guard") guard_flag = true;
      else if (a == "--verifier") verifier_dir = next();
      else if (a == "--candidates") candidates_flag = std::stoul(next());
      else if (a == "--floor") floor_flag = std::stod(next());
      else if (a == "--verifier-guards") {
        verifier_guards_flag = parse_guard_checks(next());
        if (!verifier_guards_flag) throw std::invalid_argument("--verifier-guards: a comma-separated subset of numbers,names,negation,order, or none");
      }
      else if (a == "--write-calibration") calibration_out = next();
      else if (a == "--dump-candidates") candidates_out = next();
      else if (a == "--split") {
        const auto v = next();
        if (v != "even" && v != "odd") return usage();
        split = v == "even" ? 0 : 1;
      }
      else return usage();
    } catch (const std::exception& e) {
      std::cerr << e.what() << "\n";
      return usage();
    }
  }
  if (pairs_path.empty()) return usage();
  // Both files come from the verifier's tiers: without --verifier they would silently not appear.
  if (verifier_dir.empty() && (!calibration_out.empty() || !candidates_out.empty())) {
    std::cerr << "--write-calibration and --dump-candidates need --verifier DIR\n";
    return usage();
  }
  try {
    std::shared_ptr<const CacheConfig> config = std::make_shared<CacheConfig>();
    // A --model-dir on the command line is read from the working directory.
    if (!model_dir.empty()) model_dir = std::filesystem::absolute(model_dir).lexically_normal().string();
    if (!config_path.empty()) {
      const auto root = YAML::LoadFile(config_path);
      auto section = YAML::Clone(root["cache"] ? root["cache"] : root);
      // The command line's embedder settings go in before parsing, so the file is checked as it
      // will run (--embedder hash needs no model folder, whatever the file's embedder).
      if (!embedder_type.empty() || !model_dir.empty()) {
        if (!section["embedder"] || !section["embedder"].IsMap()) {
          YAML::Node e(YAML::NodeType::Map);
          if (section["embedder"] && section["embedder"].IsScalar()) e["type"] = section["embedder"].Scalar();
          section["embedder"] = e;
        }
        if (!embedder_type.empty()) section["embedder"]["type"] = embedder_type;
        if (!model_dir.empty()) section["embedder"]["model_dir"] = model_dir;
      }
      // Relative paths in the file are read from its folder, as the gateway reads them.
      const auto dir = std::filesystem::absolute(config_path).parent_path().string();
      config = parse_cache_config(section, "cache", dir);
    }
    auto ecfg = config->embedder;
    if (!embedder_type.empty()) ecfg.type = embedder_type;
    if (!model_dir.empty()) ecfg.model_dir = model_dir;
    const double t = threshold.value_or(config->threshold);

    std::ifstream in(pairs_path);
    if (!in) throw std::runtime_error("cannot read " + pairs_path);
    auto rows = parse_csv(in);
    if (rows.empty()) throw std::runtime_error("empty CSV");
    const auto& header = rows.front();
    auto col = [&](const std::string& name) { return csv_column(header, name); };
    const auto c1 = col("question1"), c2 = col("question2"), cd = col("is_duplicate");
    std::vector<Pair> pairs;
    for (std::size_t r = 1; r < rows.size() && (limit == 0 || pairs.size() < limit); ++r) {
      const auto& row = rows[r];
      if (row.size() <= std::max({c1, c2, cd})) continue;
      pairs.push_back({row[c1], row[c2], row[cd] == "1"});
    }
    auto embedder = make_embedder(ecfg);
    std::vector<std::string> q1s, q2s;
    for (const auto& p : pairs) {
      q1s.push_back(p.q1);
      q2s.push_back(p.q2);
    }
    std::vector<float> v1, v2;
    const std::size_t want = pairs.size() * embedder->dim();
    if (!vectors_path.empty()) {
      std::ifstream vin(vectors_path, std::ios::binary);
      std::vector<float> all(2 * want);
      if (vin && vin.read(reinterpret_cast<char*>(all.data()), static_cast<std::streamsize>(all.size() * sizeof(float))) &&
          vin.peek() == std::char_traits<char>::eof()) {
        v1.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(want));
        v2.assign(all.begin() + static_cast<std::ptrdiff_t>(want), all.end());
        std::cerr << "loaded vectors from " << vectors_path << "\n";
      }
    }
    if (v1.empty()) {
      v1 = embed_all(*embedder, q1s, "question1");
      v2 = embed_all(*embedder, q2s, "question2");
      if (!vectors_path.empty()) {
        std::ofstream vout(vectors_path, std::ios::binary | std::ios::trunc);
        vout.write(reinterpret_cast<const char*>(v1.data()), static_cast<std::streamsize>(v1.size() * sizeof(float)));
        vout.write(reinterpret_cast<const char*>(v2.data()), static_cast<std::streamsize>(v2.size() * sizeof(float)));
      }
    }

    IndexConfig icfg;
    FaissVectorIndex index(embedder->dim(), icfg, IndexConfig::Type::kFlat);
    std::vector<std::int64_t> ids(pairs.size());
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>(i);
    index.add(pairs.size(), v1.data(), ids.data());
    const auto hits = index.search(pairs.size(), v2.data(), 1);

    const bool use_guard = guard_flag.value_or(config->lexical_guard);
    std::vector<bool> own(pairs.size()), guard_ok(pairs.size());
    std::vector<float> sim(pairs.size());
    std::size_t positives = 0;
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      const auto& h = hits[i];
      own[i] = h.id >= 0 && pairs[static_cast<std::size_t>(h.id)].q1 == pairs[i].q1;
      sim[i] = h.score;
      guard_ok[i] = h.id >= 0 && (!use_guard || lexical_guard(pairs[static_cast<std::size_t>(h.id)].q1, pairs[i].q2));
    }
    auto scored = [&](std::size_t i) { return split < 0 || static_cast<int>(i % 2) == split; };
    std::size_t scored_n = 0;
    for (std::size_t i = 0; i < pairs.size(); ++i)
      if (scored(i)) {
        ++scored_n;
        positives += pairs[i].dup;
      }
    if (!dump_path.empty()) {
      std::ofstream d(dump_path);
      d << "similarity,best_is_own_q1,is_duplicate,guard_ok\n";
      for (std::size_t i = 0; i < pairs.size(); ++i)
        d << sim[i] << "," << own[i] << "," << pairs[i].dup << "," << guard_ok[i] << "\n";
    }
    auto at = [&](double th) {
      std::size_t tp = 0, fp = 0, hits_n = 0, correct = 0;
      for (std::size_t i = 0; i < pairs.size(); ++i) {
        if (!scored(i) || sim[i] < th || !guard_ok[i]) continue;
        ++hits_n;
        if (own[i]) (pairs[i].dup ? tp : fp)++;
        if (own[i] && pairs[i].dup) ++correct;
      }
      const double precision = tp + fp ? double(tp) / double(tp + fp) : 1.0;
      const double recall = positives ? double(tp) / double(positives) : 0.0;
      const double f1 = precision + recall > 0 ? 2 * precision * recall / (precision + recall) : 0.0;
      boost::json::object o{{"threshold", std::round(th * 1000) / 1000},
                            {"precision", precision},
                            {"recall", recall},
                            {"f1", f1},
                            {"tp", tp},
                            {"fp", fp},
                            {"fn", positives - tp},
                            {"cache_hits", hits_n},
                            {"cache_hit_rate", scored_n ? double(hits_n) / double(scored_n) : 0.0},
                            {"cache_precision", hits_n ? double(correct) / double(hits_n) : 1.0}};
      return o;
    };
    boost::json::object out;
    out["pairs"] = scored_n;
    out["duplicates"] = positives;
    out["embedder"] = embedder->name();
    out["lexical_guard"] = use_guard;
    out["split"] = split < 0 ? "all" : split == 0 ? "even" : "odd";
    out["at_threshold"] = at(t);
    boost::json::array sweep;
    std::optional<double> first_p95, first_cp95;
    // 0.70..0.98 by 0.01 as asked, then finer steps up to 0.999 where precision keeps rising.
    std::vector<double> grid;
    for (int k = 70; k <= 98; ++k) grid.push_back(k / 100.0);
    for (double x : {0.985, 0.99, 0.995, 0.999}) grid.push_back(x);
    for (const double th : grid) {
      auto o = at(th);
      if (!first_p95 && o["precision"].as_double() >= 0.95) first_p95 = th;
      if (!first_cp95 && o["cache_precision"].as_double() >= 0.95) first_cp95 = th;
      sweep.push_back(std::move(o));
    }
    out["sweep"] = std::move(sweep);
    out["lowest_threshold_precision_0_95"] = first_p95 ? boost::json::value(*first_p95) : nullptr;
    out["lowest_threshold_cache_precision_0_95"] = first_cp95 ? boost::json::value(*first_cp95) : nullptr;
    if (!verifier_dir.empty()) {
      TierInputs in;
      in.q1 = &q1s;
      in.q2 = &q2s;
      in.v1 = &v1;
      in.v2 = &v2;
      in.dim = embedder->dim();
      for (const auto& p : pairs) in.duplicate.push_back(p.dup);
      in.candidates = candidates_flag.value_or(config->verifier.candidates);
      in.floor = floor_flag.value_or(config->verifier.floor);
      // Unless told, the checks the verifier folder's calibration was measured with.
      GuardChecks guards = config->verifier.guards;
      if (const auto cal = std::filesystem::path(verifier_dir) / kCalibrationFile; std::filesystem::exists(cal))
        read_calibration_rows(cal.string(), nullptr, &guards);
      in.verifier_guards = verifier_guards_flag.value_or(guards);
      in.confidence = config->verifier.confidence;
      in.candidates_out = candidates_out;
      const auto minilm = encoder::MiniLMModel::load(ecfg.type == "minilm" && !ecfg.model_dir.empty() ? ecfg.model_dir
                                                                                            : resolve_minilm_dir());
      encoder::PairVerifierOptions vo;
      vo.precision = config->verifier.precision;
      const auto verifier = encoder::PairVerifier::load(verifier_dir, minilm, vo);
      out["tiers"] = tier_report(in, *verifier, calibration_out);
    }
    std::cout << boost::json::serialize(out) << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tidegate-cache-eval: " << e.what() << "\n";
    return 1;
  }
}
