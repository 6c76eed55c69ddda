// Lookup latency with the pair verifier (issue 19). Prints one JSON object.
//   prompts: a seeded sample of real questions (question2 of --pairs, default
//            ../shared/data/paraphrase/quora_dev.csv) of 3 to 31 tokens, as the cache bench.
//   index:   --entries N (default 100000) 384-d unit vectors in HNSW (the cache's defaults):
//            synthetic (random directions, the default), or with --entry-texts CSV[,CSV...] the
//            MiniLM vectors of those files' distinct questions (question1 and question2, the
//            prompts measured left out; the rest of N random if they hold fewer). Random
//            directions are the hard case for HNSW: real prompts cluster, and a search in a
//            cache of them settles sooner.
//   one lookup, one request at a time: embed the prompt (MiniLM), search the top --candidates
//   (default 4), then one verifier call on the prompt against that many real cached questions
//   (question1 texts of 3 to 31 tokens, whatever the search found: the verifier's cost depends
//   on the tokens, not on which texts they are). p50/p99 of each part and of the sum.
//   --matrix-tiles off runs bf16 on AVX512-BF16's dot instruction instead of the CPU's AMX
//   tiles (where it has them): the peer the tile kernel is measured against.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <unordered_set>

#include <boost/json.hpp>

#include "tidegate/cache/faiss_index.h"
#include "tidegate/encoder/minilm.h"
#include "tidegate/encoder/pair_verifier.h"
#include "csv.h"

using namespace tidegate::cache;
using namespace tidegate::encoder;
using Clock = std::chrono::steady_clock;

namespace {

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

boost::json::object summary(const std::vector<double>& v) {
  return {{"p50_ms", pct(v, 0.5)}, {"p99_ms", pct(v, 0.99)}, {"n", v.size()}};
}

}  // namespace

int main(int argc, char** argv) {
  std::string pairs = "../shared/data/paraphrase/quora_dev.csv";
  std::string model_dir = std::string(TIDEGATE_SOURCE_ROOT) + "/" + kDefaultMiniLMDir;
  std::string verifier_dir = std::string(TIDEGATE_SOURCE_ROOT) + "/cache/verifier/model";
  std::string entry_texts;
  MiniLMPrecision verifier_precision = MiniLMPrecision::kAuto;
  std::size_t entries = 100000, candidates = 4, count = 200;
  int threads = 1;
  bool matrix_tiles = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--pairs") pairs = v;
    else if (a == "--model-dir") model_dir = v;
    else if (a == "--verifier") verifier_dir = v;
    else if (a == "--entries") entries = std::stoul(v);
    else if (a == "--candidates") candidates = std::stoul(v);
    else if (a == "--prompt-count") count = std::stoul(v);
    else if (a == "--intra-op") threads = std::stoi(v);
    else if (a == "--entry-texts") entry_texts = v;
    else if (a == "--matrix-tiles") {
      if (v != "on" && v != "off") throw std::invalid_argument("--matrix-tiles: on or off");
      matrix_tiles = v == "on";
    }
    else if (a == "--verifier-precision") {
      if (v == "bf16") verifier_precision = MiniLMPrecision::kBf16;
      else if (v == "fp32") verifier_precision = MiniLMPrecision::kFp32;
      else if (v == "auto") verifier_precision = MiniLMPrecision::kAuto;
      else throw std::invalid_argument("--verifier-precision: auto, fp32 or bf16");
    }
    else {
      std::cerr << "usage: tidegate_bench_verifier [--pairs CSV] [--model-dir DIR] [--verifier DIR] [--entries N]\n"
                   "       [--candidates K] [--prompt-count N] [--intra-op T] [--entry-texts CSV]\n"
                   "       [--verifier-precision auto|fp32|bf16] [--matrix-tiles on|off]\n";
      return 2;
    }
  }
  try {
    const auto model = MiniLMModel::load(model_dir);
    MiniLMOptions mo;
    mo.intra_op_threads = threads;
    mo.matrix_tiles = matrix_tiles;
    auto embedder = make_minilm_embedder(model, mo);
    PairVerifierOptions vo;
    vo.intra_op_threads = threads;
    vo.matrix_tiles = matrix_tiles;
    vo.precision = verifier_precision;
    const auto verifier = PairVerifier::load(verifier_dir, model, vo);

    std::ifstream in(pairs);
    if (!in) throw std::runtime_error("cannot read " + pairs);
    const auto rows = parse_csv(in);
    const auto c1 = csv_column(rows.front(), "question1"), c2 = csv_column(rows.front(), "question2");
    auto short_enough = [&](const std::string& t) {
      const auto n = model->tokenizer().encode(t, 512).size();
      return n >= 3 && n < 32;
    };
    std::vector<std::string> queries, cached;
    for (std::size_t r = 1; r < rows.size(); ++r) {
      if (rows[r].size() <= std::max(c1, c2)) continue;
      if (short_enough(rows[r][c2])) queries.push_back(rows[r][c2]);
      if (short_enough(rows[r][c1])) cached.push_back(rows[r][c1]);
    }
    std::mt19937 rng(2026);
    std::shuffle(queries.begin(), queries.end(), rng);
    std::shuffle(cached.begin(), cached.end(), rng);
    if (queries.size() > count) queries.resize(count);
    if (cached.size() < candidates) throw std::runtime_error("too few cached questions");

    // The index, HNSW with the cache's defaults: real questions' vectors first, if asked for,
    // then random unit vectors up to --entries.
    std::vector<std::string> entry_questions;
    if (!entry_texts.empty()) {
      std::unordered_set<std::string> seen(queries.begin(), queries.end());
      std::stringstream list(entry_texts);
      for (std::string file; std::getline(list, file, ',');) {
        std::ifstream et(file);
        if (!et) throw std::runtime_error("cannot read " + file);
        const auto erows = parse_csv(et);
        const auto e1 = csv_column(erows.front(), "question1"), e2 = csv_column(erows.front(), "question2");
        for (std::size_t r = 1; r < erows.size() && entry_questions.size() < entries; ++r)
          for (const auto c : {e1, e2})
            if (erows[r].size() > c && entry_questions.size() < entries && seen.insert(erows[r][c]).second)
              entry_questions.push_back(erows[r][c]);
      }
    }
    IndexConfig icfg;
    FaissVectorIndex index(384, icfg, IndexConfig::Type::kHnsw);
    std::normal_distribution<float> normal;
    double embed_entries_s = 0;
    std::vector<float> real;
    {
      const auto t = Clock::now();
      constexpr std::size_t kBatch = 32;
      for (std::size_t s = 0; s < entry_questions.size(); s += kBatch) {
        const std::vector<std::string> batch(entry_questions.begin() + static_cast<std::ptrdiff_t>(s),
                                             entry_questions.begin() + static_cast<std::ptrdiff_t>(std::min(s + kBatch, entry_questions.size())));
        const auto v = embedder->embed(batch, Clock::now() + std::chrono::minutes(1));
        real.insert(real.end(), v.begin(), v.end());
      }
      embed_entries_s = std::chrono::duration<double>(Clock::now() - t).count();
    }
    const auto t_build = Clock::now();
    constexpr std::size_t kChunk = 10000;
    for (std::size_t s = 0; s < entries; s += kChunk) {
      const std::size_t n = std::min(kChunk, entries - s);
      std::vector<float> v(n * 384);
      for (std::size_t r = 0; r < n; ++r) {
        float* row = v.data() + r * 384;
        if (s + r < entry_questions.size()) {
          std::copy(real.begin() + static_cast<std::ptrdiff_t>((s + r) * 384),
                    real.begin() + static_cast<std::ptrdiff_t>((s + r + 1) * 384), row);
          continue;
        }
        double norm = 0;
        for (std::size_t d = 0; d < 384; ++d) row[d] = normal(rng), norm += double(row[d]) * row[d];
        for (std::size_t d = 0; d < 384; ++d) row[d] = static_cast<float>(row[d] / std::sqrt(norm));
      }
      std::vector<std::int64_t> ids(n);
      for (std::size_t r = 0; r < n; ++r) ids[r] = static_cast<std::int64_t>(s + r);
      index.add(n, v.data(), ids.data());
    }
    const double build_s = std::chrono::duration<double>(Clock::now() - t_build).count();

    std::vector<double> embed_ms, search_ms, verify_ms, total_ms;
    std::size_t tokens = 0;
    for (std::size_t q = 0; q < queries.size(); ++q) {
      std::vector<std::string> cands;
      for (std::size_t k = 0; k < candidates; ++k) cands.push_back(cached[(q * candidates + k) % cached.size()]);
      const auto t0 = Clock::now();
      const auto v = embedder->embed({queries[q]}, Clock::now() + std::chrono::seconds(10));
      const auto t1 = Clock::now();
      const auto hits = index.search(1, v.data(), candidates);
      const auto t2 = Clock::now();
      const auto p = verifier->verify(queries[q], cands, Clock::now() + std::chrono::seconds(10));
      const auto t3 = Clock::now();
      if (hits.empty() || p.size() != cands.size()) throw std::runtime_error("bad result");
      for (const auto& c : cands) tokens += verifier->encode(queries[q], c).ids.size();
      embed_ms.push_back(ms(t1 - t0));
      search_ms.push_back(ms(t2 - t1));
      verify_ms.push_back(ms(t3 - t2));
      total_ms.push_back(ms(t3 - t0));
    }
    boost::json::object out{{"entries", entries},
                            {"index", "hnsw"},
                            {"real_entries", entry_questions.size()},
                            {"embed_entries_s", embed_entries_s},
                            {"build_s", build_s},
                            {"candidates", candidates},
                            {"prompts", queries.size()},
                            {"intra_op_threads", threads},
                            {"verifier_layers", verifier->layers()},
                            {"verifier_precision", verifier->precision()},
                            {"matrix_tiles", verifier->matrix_tiles()},
                            {"mean_pair_tokens", double(tokens) / double(queries.size() * candidates)},
                            {"embed", summary(embed_ms)},
                            {"search", summary(search_ms)},
                            {"verify", summary(verify_ms)},
                            {"lookup", summary(total_ms)}};
    std::cout << boost::json::serialize(out) << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tidegate_bench_verifier: " << e.what() << "\n";
    return 1;
  }
}
