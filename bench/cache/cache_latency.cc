// Semantic cache latency driver. Prints one JSON object.
//   embed:  MiniLM embedding of short prompts (< 32 tokens), one request at a time, p50/p99.
//           The prompts are a seeded sample of the real questions in --prompts CSV (column
//           question1; default ../shared/data/paraphrase/quora_dev.csv) under 32 tokens, or a
//           built-in list of 20 when that file is absent.
//   per size N (synthetic 384-d unit vectors, clustered like sentence embeddings):
//     search alone, flat and HNSW, p50/p99 over single queries, and HNSW recall@1 against flat;
//     end to end = embed + search of a real prompt's vector in the N-entry index.
// HNSW of 1M vectors is built in chunks until --build-budget seconds pass; the size actually
// reached is reported (an honest number on a 2-core machine beats an estimate).
// --ef-sweep 128,256 also measures HNSW search latency and recall@1 at those ef values;
// --storage fp16|fp32 picks how HNSW keeps its vectors (default fp16, as the cache);
// --intra-op N[,M...] lets one embed call use N threads (embedder.intra_op_threads, default 1),
// each setting measured in turn against the same indexes;
// --prompts CSV and --prompt-count K (default 200) pick the prompts.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <cmath>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>

#include <boost/json.hpp>

#include "tidegate/cache/cache_config.h"
#include "tidegate/cache/cache_factory.h"
#include "tidegate/cache/faiss_index.h"
#include "tidegate/encoder/minilm.h"
#include "csv.h"

using namespace tidegate::cache;
using namespace tidegate::encoder;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kDim = 384;

const char* kPrompts[] = {
    "What is the capital of France?", "How do I reset my password?", "Explain recursion in simple terms.",
    "What is the weather like in Tokyo in May?", "How many legs does a spider have?",
    "Write a haiku about autumn.", "What is the difference between TCP and UDP?",
    "How can I learn Python quickly?", "Who wrote Pride and Prejudice?", "What does HTTP 404 mean?",
    "How do I boil an egg?", "What is a black hole?", "Translate hello into Spanish.",
    "What are good books on machine learning?", "How do vaccines work?", "Why is the sky blue?",
    "What is the best way to save money?", "How do I center a div in CSS?", "What is inflation?",
    "Recommend a movie for tonight."};

// A seeded sample of distinct question1 texts of 3 to 31 tokens ([CLS] and [SEP] included).
std::vector<std::string> sample_prompts(const std::string& csv_path, const WordPieceTokenizer& tok, std::size_t count) {
  std::ifstream in(csv_path);
  if (!in) throw std::runtime_error("cannot read " + csv_path);
  const auto rows = parse_csv(in);
  if (rows.empty()) throw std::runtime_error(csv_path + ": empty CSV");
  const auto c1 = csv_column(rows.front(), "question1");
  std::vector<std::string> texts;
  for (std::size_t r = 1; r < rows.size(); ++r) {
    if (rows[r].size() <= c1) continue;
    const auto n = tok.encode(rows[r][c1], 512).size();
    if (n >= 3 && n < 32) texts.push_back(rows[r][c1]);
  }
  std::sort(texts.begin(), texts.end());
  texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
  std::shuffle(texts.begin(), texts.end(), std::mt19937(2026));
  if (texts.size() > count) texts.resize(count);
  return texts;
}

std::vector<float> embed_one(Embedder& embedder, const std::string& prompt) {
  return embedder.embed({prompt}, Clock::now() + std::chrono::seconds(10));
}

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

void normalise(float* v) {
  double n = 0;
  for (std::size_t j = 0; j < kDim; ++j) n += double(v[j]) * v[j];
  const auto s = static_cast<float>(1.0 / std::sqrt(n));
  for (std::size_t j = 0; j < kDim; ++j) v[j] *= s;
}

// Clustered data: 1 centroid per 100 vectors, each vector = centroid + noise, normalised.
std::vector<float> synthetic(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  const std::size_t clusters = std::max<std::size_t>(1, n / 100);
  std::vector<float> c(clusters * kDim);
  for (std::size_t i = 0; i < clusters; ++i) {
    for (std::size_t j = 0; j < kDim; ++j) c[i * kDim + j] = d(rng);
    normalise(&c[i * kDim]);
  }
  std::vector<float> v(n * kDim);
  std::uniform_int_distribution<std::size_t> pick(0, clusters - 1);
  for (std::size_t i = 0; i < n; ++i) {
    const auto k = pick(rng);
    for (std::size_t j = 0; j < kDim; ++j) v[i * kDim + j] = c[k * kDim + j] + 0.06f * d(rng);
    normalise(&v[i * kDim]);
  }
  return v;
}

// Paraphrase-like queries: a stored vector plus noise (cosine about 0.9 to it).
std::vector<float> near_queries(const std::vector<float>& base, std::size_t n, std::size_t nq, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::uniform_int_distribution<std::size_t> pick(0, n - 1);
  std::vector<float> q(nq * kDim);
  for (std::size_t i = 0; i < nq; ++i) {
    const auto k = pick(rng);
    for (std::size_t j = 0; j < kDim; ++j) q[i * kDim + j] = base[k * kDim + j] + 0.025f * d(rng);
    normalise(&q[i * kDim]);
  }
  return q;
}

// k > ef_search raises the HNSW search's ef to k (FaissVectorIndex::search), so asking for
// k results and keeping the first measures top-1 at ef = k without rebuilding the graph.
boost::json::object search_stats(const FaissVectorIndex& ix, const std::vector<float>& q, std::size_t nq,
                                 std::vector<std::int64_t>* top1, std::size_t k = 1) {
  std::vector<double> lat;
  for (std::size_t i = 0; i < nq; ++i) {
    const auto t = Clock::now();
    const auto h = ix.search(1, q.data() + i * kDim, k);
    lat.push_back(ms(Clock::now() - t));
    if (top1) top1->push_back(h[0].id);
  }
  return {{"p50_ms", pct(lat, 0.5)}, {"p99_ms", pct(lat, 0.99)}};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::size_t> sizes = {10000, 100000, 1000000};
  double build_budget_s = 240;
  std::size_t nq = 1000;
  std::size_t chunk = 50000;
  std::vector<std::size_t> ef_sweep;
  IndexConfig icfg;  // the cache's defaults unless overridden below
  std::string embedder_type = "minilm";
  std::vector<int> intra_ops = {1};  // embedder.intra_op_threads settings, each measured
  std::string prompts_csv = std::string(TIDEGATE_SOURCE_ROOT) + "/../shared/data/paraphrase/quora_dev.csv";
  std::size_t prompt_count = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--sizes") {
      sizes.clear();
      std::stringstream ss(v);
      std::string x;
      while (std::getline(ss, x, ',')) sizes.push_back(std::stoul(x));
    } else if (a == "--build-budget") build_budget_s = std::stod(v);
    else if (a == "--queries") nq = std::stoul(v);
    else if (a == "--chunk") chunk = std::stoul(v);
    else if (a == "--ef-sweep") {  // extra search-time ef values measured on the built HNSW
      std::stringstream ss(v);
      for (std::string item; std::getline(ss, item, ',');) ef_sweep.push_back(std::stoul(item));
    }
    else if (a == "--m") icfg.hnsw_m = std::stoi(v);
    else if (a == "--ef-construction") icfg.ef_construction = std::stoi(v);
    else if (a == "--ef-search") icfg.ef_search = std::stoi(v);
    else if (a == "--embedder") embedder_type = v;
    else if (a == "--intra-op") {
      intra_ops.clear();
      std::stringstream ss(v);
      for (std::string item; std::getline(ss, item, ',');) intra_ops.push_back(std::stoi(item));
    }
    else if (a == "--prompts") prompts_csv = v;
    else if (a == "--prompt-count") prompt_count = std::stoul(v);
    else if (a == "--storage") icfg.storage = v == "fp32" ? IndexConfig::Storage::kFp32 : IndexConfig::Storage::kFp16;
  }
  boost::json::object out;
  out["hnsw"] = {{"m", icfg.hnsw_m},
                 {"ef_construction", icfg.ef_construction},
                 {"ef_search", icfg.ef_search},
                 {"storage", icfg.storage == IndexConfig::Storage::kFp32 ? "fp32" : "fp16"}};

  // Token counts from the model's own vocabulary (run from the repository root or a build dir).
  const auto tok = WordPieceTokenizer::from_vocab_file(std::string(TIDEGATE_SOURCE_ROOT) + "/" +
                                                       kDefaultMiniLMDir + "/vocab.txt", {});
  std::vector<std::string> prompts;
  std::string prompt_source = prompts_csv;
  if (std::filesystem::exists(prompts_csv)) {
    prompts = sample_prompts(prompts_csv, tok, prompt_count);
  } else {
    prompt_source = "built-in list (" + prompts_csv + " not found)";
    prompts.assign(std::begin(kPrompts), std::end(kPrompts));
  }
  std::vector<std::size_t> prompt_tokens;
  for (const auto& p : prompts) prompt_tokens.push_back(tok.encode(p, 512).size());
  {
    std::vector<double> lengths(prompt_tokens.begin(), prompt_tokens.end());
    out["prompts"] = {{"source", prompt_source},
                      {"count", prompts.size()},
                      {"tokens_min", pct(lengths, 0.0)},
                      {"tokens_p50", pct(lengths, 0.5)},
                      {"tokens_max", pct(lengths, 1.0)}};
  }

  // Embedding latency of real short prompts, one at a time as the cache does per request.
  std::vector<std::shared_ptr<Embedder>> embedders;
  boost::json::array encoders;
  for (const int threads : intra_ops) {
    EmbedderConfig ecfg;
    ecfg.type = embedder_type;
    ecfg.intra_op_threads = threads;
    embedders.push_back(make_embedder(ecfg));
    Embedder& embedder = *embedders.back();
    for (const auto& p : prompts) embed_one(embedder, p);  // warms caches and the pool
    std::vector<double> embed_ms;
    for (int round = 0; round < 3; ++round)
      for (const auto& p : prompts) {
        const auto t = Clock::now();
        embed_one(embedder, p);
        embed_ms.push_back(ms(Clock::now() - t));
      }
    std::cerr << "intra-op " << threads << ": embed p50 " << pct(embed_ms, 0.5) << " ms over " << prompts.size()
              << " prompts\n";
    // Single prompts across the range, up to the longest under the target (31 tokens).
    const char* by_length[] = {
        "Why is the sky blue?",
        "What is the difference between TCP and UDP, and when should I use each one?",
        "I am planning a two week trip to Japan in the spring; which cities should I visit first and why?",
        "Can you explain how a hash map handles collisions, what open addressing is, and when chaining is the better "
        "choice for small tables in C?"};
    boost::json::array lengths;
    for (const char* p : by_length) {
      std::vector<double> t;
      for (int i = 0; i < 30; ++i) {
        const auto t0 = Clock::now();
        embed_one(embedder, p);
        t.push_back(ms(Clock::now() - t0));
      }
      t.erase(t.begin(), t.begin() + 5);
      lengths.push_back(boost::json::object{
          {"prompt", p}, {"tokens", tok.encode(p, 512).size()}, {"p50_ms", pct(t, 0.5)}, {"p99_ms", pct(t, 0.99)}});
    }
    encoders.push_back(boost::json::object{{"embedder", embedder.name()},
                                           {"intra_op_threads", threads},
                                           {"n", embed_ms.size()},
                                           {"p50_ms", pct(embed_ms, 0.5)},
                                           {"p99_ms", pct(embed_ms, 0.99)},
                                           {"by_length", std::move(lengths)}});
  }
  out["embed"] = std::move(encoders);

  boost::json::array runs;
  for (const auto n : sizes) {
    std::cerr << "size " << n << ": generating\n";
    const auto base = synthetic(n, 42);
    std::vector<std::int64_t> ids(n);
    for (std::size_t i = 0; i < n; ++i) ids[i] = static_cast<std::int64_t>(i);
    boost::json::object run{{"entries", n}};

    FaissVectorIndex hnsw(kDim, icfg, IndexConfig::Type::kHnsw);
    const auto t0 = Clock::now();
    std::size_t built = 0;
    while (built < n) {
      const auto c = std::min(chunk, n - built);
      hnsw.add(c, base.data() + built * kDim, ids.data() + built);
      built += c;
      if (std::chrono::duration<double>(Clock::now() - t0).count() > build_budget_s) break;
    }
    const double build_s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::cerr << "size " << n << ": hnsw built " << built << " in " << build_s << " s\n";
    run["hnsw_built_entries"] = built;
    run["hnsw_build_s"] = build_s;

    FaissVectorIndex flat(kDim, icfg, IndexConfig::Type::kFlat);
    flat.add(built, base.data(), ids.data());  // same contents as the HNSW, for a fair recall

    const auto q_near = near_queries(base, built, nq, 7);
    std::vector<std::int64_t> top_flat, top_hnsw;
    const auto flat_stats = search_stats(flat, q_near, std::min<std::size_t>(nq, n >= 1000000 ? 500 : nq), &top_flat);
    // The flat scan just evicted everything: warm up on other queries so that the first HNSW
    // configuration measured does not pay for the cold caches the later ones do not.
    const auto q_warm = near_queries(base, built, 200, 13);
    search_stats(hnsw, q_warm, 200, nullptr);
    const auto hnsw_stats = search_stats(hnsw, q_near, top_flat.size(), &top_hnsw);
    std::size_t same = 0;
    for (std::size_t i = 0; i < top_flat.size(); ++i) same += top_flat[i] == top_hnsw[i];
    run["search_flat"] = flat_stats;
    run["search_hnsw"] = hnsw_stats;
    run["hnsw_recall_at_1"] = double(same) / double(top_flat.size());
    {  // The same graph searched by FAISS's own loop, for comparison with the prefetching one.
      std::vector<std::int64_t> top;
      hnsw.use_faiss_search(true);
      auto stats = search_stats(hnsw, q_near, top_flat.size(), &top);
      hnsw.use_faiss_search(false);
      std::size_t agree = 0;
      for (std::size_t i = 0; i < top_flat.size(); ++i) agree += top_flat[i] == top[i];
      stats["recall_at_1"] = double(agree) / double(top_flat.size());
      run["search_hnsw_faiss_loop"] = std::move(stats);
    }
    run["recall_queries"] = top_flat.size();
    boost::json::array sweep;
    for (const auto ef : ef_sweep) {
      if (ef < static_cast<std::size_t>(icfg.ef_search)) {  // the index would search at ef_search
        std::cerr << "ef-sweep: skipping " << ef << ", below the index's ef_search " << icfg.ef_search
                  << " (rerun with --ef-search " << ef << ")\n";
        continue;
      }
      std::vector<std::int64_t> top;
      auto stats = search_stats(hnsw, q_near, top_flat.size(), &top, ef);
      std::size_t agree = 0;
      for (std::size_t i = 0; i < top_flat.size(); ++i) agree += top_flat[i] == top[i];
      stats["ef_search"] = ef;
      stats["recall_at_1"] = double(agree) / double(top_flat.size());
      sweep.push_back(std::move(stats));
    }
    if (!ef_sweep.empty()) run["search_hnsw_ef_sweep"] = std::move(sweep);

    // End to end: embed a real prompt, search it in this index (the prompt vectors are
    // not in the synthetic set, so this is the cost of a miss, which equals a hit's).
    // Separate loops: a flat scan between two lookups would evict the encoder's weights from
    // the caches and charge that to the HNSW lookup.
    // By prompt length too: the encoder's cost grows with it.
    boost::json::array e2e;
    for (std::size_t e = 0; e < embedders.size(); ++e) {
      std::vector<double> e2e_flat, e2e_hnsw, embed_part, search_part;  // the HNSW lookups split
      std::vector<double> by_bucket[3];  // HNSW lookups of prompts of < 16, 16-23, 24-31 tokens
      for (auto* ix : {&hnsw, &flat})
        for (int round = 0; round < (ix == &hnsw ? 2 : 1); ++round)
          for (std::size_t i = 0; i < prompts.size(); ++i) {
            const auto t0 = Clock::now();
            const auto v = embed_one(*embedders[e], prompts[i]);
            const auto t1 = Clock::now();
            ix->search(1, v.data(), 1);
            const auto t2 = Clock::now();
            const double took = ms(t2 - t0);
            if (ix == &hnsw) {
              embed_part.push_back(ms(t1 - t0));
              search_part.push_back(ms(t2 - t1));
            }
            (ix == &hnsw ? e2e_hnsw : e2e_flat).push_back(took);
            if (ix == &hnsw) by_bucket[prompt_tokens[i] < 16 ? 0 : prompt_tokens[i] < 24 ? 1 : 2].push_back(took);
          }
      boost::json::array buckets;
      const char* bucket_names[] = {"3-15", "16-23", "24-31"};
      for (int k = 0; k < 3; ++k)
        buckets.push_back(boost::json::object{{"tokens", bucket_names[k]},
                                              {"lookups", by_bucket[k].size()},
                                              {"p50_ms", pct(by_bucket[k], 0.5)},
                                              {"p99_ms", pct(by_bucket[k], 0.99)}});
      e2e.push_back(boost::json::object{{"intra_op_threads", intra_ops[e]},
                                        {"hnsw", {{"p50_ms", pct(e2e_hnsw, 0.5)},
                                                  {"p99_ms", pct(e2e_hnsw, 0.99)},
                                                  {"embed_p50_ms", pct(embed_part, 0.5)},
                                                  {"search_p50_ms", pct(search_part, 0.5)}}},
                                        {"flat", {{"p50_ms", pct(e2e_flat, 0.5)}, {"p99_ms", pct(e2e_flat, 0.99)}}},
                                        {"hnsw_by_tokens", std::move(buckets)}});
    }
    run["e2e"] = std::move(e2e);
    if (built < n) {
      // The HNSW did not reach n in the budget: still measure exact search over all n.
      FaissVectorIndex all(kDim, icfg, IndexConfig::Type::kFlat);
      all.add(n, base.data(), ids.data());
      const auto q_all = near_queries(base, n, 100, 11);
      run["search_flat_all_entries"] = search_stats(all, q_all, 100, nullptr);
    }
    runs.push_back(std::move(run));
    std::cerr << "size " << n << ": done\n";
  }
  out["runs"] = std::move(runs);
  std::cout << boost::json::serialize(out) << "\n";
}
