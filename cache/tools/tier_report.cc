#include "tier_report.h"

#include <algorithm>
#include <array>
#include <boost/math/distributions/binomial.hpp>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <stdexcept>

#include "../src/model_dir.h"
#include "tidegate/cache/cache_config.h"
#include "tidegate/cache/calibration.h"
#include "tidegate/cache/faiss_index.h"
#include "tidegate/cache/policy.h"

namespace tidegate::cache {
namespace {

constexpr double kNoHit = -std::numeric_limits<double>::infinity();
// recall_at_precision ignores thresholds accepting fewer tuning rows than this: precision over a
// handful of rows says nothing.
constexpr std::size_t kMinAccepted = 30;

// What serving the lookup's chosen candidate would have been: its own question1 on a pair
// labelled duplicate (kTrue), its own question1 on a pair labelled not duplicate (kFalse), or
// another question1 (kOther: no label says it is right; the cache's precision counts it wrong).
enum class Outcome { kTrue, kFalse, kOther };

struct Row {
  double score = kNoHit;  // kNoHit: no candidate, the lookup cannot hit
  Outcome outcome = Outcome::kOther;
  bool duplicate = false;
};

struct Counts {
  std::size_t tp = 0, fp = 0, other = 0, positives = 0, rows = 0;
  std::size_t hits() const { return tp + fp + other; }
};

Counts count(const std::vector<Row>& rows, int half, double threshold) {
  Counts c;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (static_cast<int>(i % 2) != half) continue;
    const auto& r = rows[i];
    ++c.rows;
    c.positives += r.duplicate;
    if (r.score == kNoHit || r.score < threshold) continue;
    if (r.outcome == Outcome::kTrue) ++c.tp;
    else if (r.outcome == Outcome::kFalse) ++c.fp;
    else ++c.other;
  }
  return c;
}

// Two-sided 95% Clopper-Pearson interval of k successes in n.
boost::json::array interval(std::size_t k, std::size_t n) {
  using boost::math::binomial_distribution;
  if (n == 0) return {0.0, 1.0};
  const double lo = k == 0 ? 0.0
                           : binomial_distribution<>::find_lower_bound_on_p(
                                 double(n), double(k), 0.025, binomial_distribution<>::clopper_pearson_exact_interval);
  const double hi = k == n ? 1.0
                           : binomial_distribution<>::find_upper_bound_on_p(
                                 double(n), double(k), 0.025, binomial_distribution<>::clopper_pearson_exact_interval);
  auto r4 = [](double x) { return std::round(x * 1e4) / 1e4; };
  return {r4(lo), r4(hi)};
}

double ratio(std::size_t a, std::size_t b, double empty) { return b ? double(a) / double(b) : empty; }

// Precision had the pairs been balanced (as many labelled duplicates as not, as the issue states
// its target): each false hit weighs positives / negatives, the expected false hits of a set
// with the negatives subsampled to the positives' number.
double balanced_precision(const Counts& c) {
  const auto negatives = c.rows - c.positives;
  if (!negatives || !c.positives) return ratio(c.tp, c.tp + c.fp, 1.0);
  const double fp = double(c.fp) * double(c.positives) / double(negatives);
  return c.tp + fp > 0 ? double(c.tp) / (double(c.tp) + fp) : 1.0;
}

// The figures at `threshold` on one half, with 95% intervals.
boost::json::object figures(const std::vector<Row>& rows, int half, double threshold) {
  const auto c = count(rows, half, threshold);
  return {{"threshold", threshold},
          {"precision", ratio(c.tp, c.tp + c.fp, 1.0)},
          {"balanced_precision", balanced_precision(c)},
          {"precision_ci95", interval(c.tp, c.tp + c.fp)},
          {"recall", ratio(c.tp, c.positives, 0.0)},
          {"recall_ci95", interval(c.tp, c.positives)},
          {"cache_precision", ratio(c.tp, c.hits(), 1.0)},
          {"cache_precision_ci95", interval(c.tp, c.hits())},
          {"tp", c.tp},
          {"fp", c.fp},
          {"other_hits", c.other},
          {"positives", c.positives}};
}

// Distinct finite scores of one half, highest first.
std::vector<double> thresholds(const std::vector<Row>& rows, int half) {
  std::vector<double> t;
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (static_cast<int>(i % 2) == half && rows[i].score != kNoHit) t.push_back(rows[i].score);
  std::sort(t.begin(), t.end(), std::greater<>());
  t.erase(std::unique(t.begin(), t.end()), t.end());
  return t;
}

boost::json::object tier(const std::vector<Row>& rows) {
  constexpr int kTune = 0, kReport = 1;
  const auto ts = thresholds(rows, kTune);
  // One pass over the tuning half's thresholds, highest first.
  std::vector<Counts> at;
  at.reserve(ts.size());
  {
    std::vector<std::pair<double, Outcome>> sorted;
    std::size_t positives = 0;
    for (std::size_t i = 0; i < rows.size(); i += 2) {
      positives += rows[i].duplicate;
      if (rows[i].score != kNoHit) sorted.emplace_back(rows[i].score, rows[i].outcome);
    }
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    Counts c;
    c.positives = positives;
    c.rows = (rows.size() + 1) / 2;
    std::size_t j = 0;
    for (const double t : ts) {
      for (; j < sorted.size() && sorted[j].first >= t; ++j) {
        if (sorted[j].second == Outcome::kTrue) ++c.tp;
        else if (sorted[j].second == Outcome::kFalse) ++c.fp;
        else ++c.other;
      }
      at.push_back(c);
    }
  }
  boost::json::object out;
  boost::json::object par;
  for (const double r : {0.5, 0.6, 0.7}) {
    const auto key = "recall_" + std::to_string(r).substr(0, 3);
    std::optional<double> chosen;
    for (std::size_t k = 0; k < ts.size() && !chosen; ++k)
      if (ratio(at[k].tp, at[k].positives, 0.0) >= r) chosen = ts[k];
    if (chosen) par[key] = figures(rows, kReport, *chosen);
    else par[key] = nullptr;  // the tier never reaches that recall on the tuning half
  }
  out["precision_at_recall"] = std::move(par);
  boost::json::object rap;
  for (const double p : {0.95, 0.97, 0.99}) {
    const auto key = "precision_" + std::to_string(p).substr(0, 4);
    std::optional<double> chosen;
    for (std::size_t k = 0; k < ts.size(); ++k)
      if (at[k].tp + at[k].fp >= kMinAccepted && ratio(at[k].tp, at[k].tp + at[k].fp, 1.0) >= p) chosen = ts[k];
    if (chosen) rap[key] = figures(rows, kReport, *chosen);
    else rap[key] = nullptr;
  }
  out["recall_at_precision"] = std::move(rap);
  // The same with balanced precision (the "balanced pairs"), chosen on the tuning half.
  boost::json::object rabp;
  for (const double p : {0.95, 0.97, 0.99}) {
    const auto key = "balanced_precision_" + std::to_string(p).substr(0, 4);
    std::optional<double> chosen;
    for (std::size_t k = 0; k < ts.size(); ++k)
      if (at[k].tp + at[k].fp >= kMinAccepted && balanced_precision(at[k]) >= p) chosen = ts[k];
    if (chosen) rabp[key] = figures(rows, kReport, *chosen);
    else rabp[key] = nullptr;
  }
  out["recall_at_balanced_precision"] = std::move(rabp);
  // The precision-recall curve of the report half, at the tuning half's recall steps of 0.05.
  boost::json::array curve;
  double next = 0.05;
  for (std::size_t k = 0; k < ts.size(); ++k) {
    if (ratio(at[k].tp, at[k].positives, 0.0) + 1e-12 < next) continue;
    auto f = figures(rows, kReport, ts[k]);
    curve.push_back(boost::json::object{{"threshold", ts[k]},
                                        {"precision", f["precision"]},
                                        {"balanced_precision", f["balanced_precision"]},
                                        {"recall", f["recall"]},
                                        {"cache_precision", f["cache_precision"]}});
    while (next <= ratio(at[k].tp, at[k].positives, 0.0) + 1e-12) next += 0.05;
  }
  out["curve_report_half"] = std::move(curve);
  return out;
}

// The labelled candidates `label` gives 0 or 1 for (-1: not used), for fit_combiner.
template <typename Label>
std::vector<CombinerSample> combiner_samples(const std::vector<std::vector<std::size_t>>& kept,
                                             const std::vector<std::vector<float>>& cosines,
                                             const std::vector<float>& prob, Label label) {
  std::vector<CombinerSample> out;
  std::size_t at = 0;
  for (std::size_t i = 0; i < kept.size(); ++i)
    for (std::size_t k = 0; k < kept[i].size(); ++k, ++at) {
      const int l = label(i, kept[i][k]);
      if (l >= 0) out.push_back({cosines[i][k], prob[at], l == 1});
    }
  return out;
}

}  // namespace

std::string resolve_minilm_dir() {
  const auto choice = choose_model_dir("");
  if (!choice.error.empty()) throw std::runtime_error(choice.error);
  return choice.dir;
}

boost::json::object tier_report(const TierInputs& in, const encoder::PairVerifier& verifier, const std::string& calibration_out) {
  const auto& q1 = *in.q1;
  const auto& q2 = *in.q2;
  const std::size_t n = q1.size();
  IndexConfig icfg;
  FaissVectorIndex index(in.dim, icfg, IndexConfig::Type::kFlat);
  std::vector<std::int64_t> ids(n);
  for (std::size_t i = 0; i < n; ++i) ids[i] = static_cast<std::int64_t>(i);
  index.add(n, in.v1->data(), ids.data());
  // Several rows can share a question1; the cache holds one entry per text, so a few extra
  // neighbours are fetched and duplicates of a text dropped.
  const std::size_t fetch = in.candidates + 4;
  const auto hits = index.search(n, in.v2->data(), fetch);

  std::vector<Row> cosine(n), guarded(n), verified(n);
  auto outcome_of = [&](std::size_t i, std::size_t j) {
    if (q1[j] != q1[i]) return Outcome::kOther;
    return in.duplicate[i] ? Outcome::kTrue : Outcome::kFalse;
  };
  // Per lookup: its kept candidates (top k above the floor that pass the guard) and their cosines.
  std::vector<std::vector<std::size_t>> kept(n);
  std::vector<std::vector<float>> kept_cos(n);
  std::vector<encoder::PairTokens> pairs;
  std::vector<std::size_t> pair_owner;
  for (std::size_t i = 0; i < n; ++i) {
    cosine[i].duplicate = guarded[i].duplicate = verified[i].duplicate = in.duplicate[i];
    const encoder::SearchHit* h = &hits[i * fetch];
    if (h[0].id >= 0) {
      const auto j = static_cast<std::size_t>(h[0].id);
      cosine[i].score = h[0].score;
      cosine[i].outcome = guarded[i].outcome = outcome_of(i, j);
      if (lexical_guard(q1[j], q2[i])) guarded[i].score = h[0].score;
    }
    std::vector<std::string> texts;
    std::size_t seen = 0;
    for (std::size_t c = 0; c < fetch && seen < in.candidates; ++c) {
      if (h[c].id < 0 || h[c].score < in.floor) break;
      const auto j = static_cast<std::size_t>(h[c].id);
      if (std::find(texts.begin(), texts.end(), q1[j]) != texts.end()) continue;
      texts.push_back(q1[j]);
      ++seen;  // a candidate takes its place whether or not the guard keeps it, as in the cache
      if (!lexical_guard(q2[i], q1[j], in.verifier_guards)) continue;
      kept[i].push_back(j);
      kept_cos[i].push_back(h[c].score);
      pairs.push_back(verifier.encode(q2[i], q1[j]));
      pair_owner.push_back(i);
    }
  }
  std::cerr << "verifying " << pairs.size() << " candidate pairs of " << n << " lookups\n";
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<float> prob;
  prob.reserve(pairs.size());
  constexpr std::size_t kChunk = 64;
  for (std::size_t s = 0; s < pairs.size(); s += kChunk) {
    std::vector<encoder::PairTokens> chunk(pairs.begin() + static_cast<std::ptrdiff_t>(s),
                                  pairs.begin() + static_cast<std::ptrdiff_t>(std::min(pairs.size(), s + kChunk)));
    const auto p = verifier.score(chunk);
    prob.insert(prob.end(), p.begin(), p.end());
    if ((s / kChunk) % 100 == 0) std::cerr << "verified " << s << "/" << pairs.size() << "\n";
  }
  const double verify_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!in.candidates_out.empty()) {
    std::ofstream f(in.candidates_out, std::ios::trunc);
    if (!f) throw std::runtime_error("cannot write " + in.candidates_out);
    f << "row,cosine,probability,fails_numbers,fails_names,fails_negation,fails_order,own,duplicate\n";
    f.precision(9);
    // Each check alone, in the header's order.
    constexpr bool GuardChecks::*kChecks[] = {&GuardChecks::numbers, &GuardChecks::names, &GuardChecks::negation,
                                              &GuardChecks::order};
    std::size_t at = 0;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = 0; k < kept[i].size(); ++k, ++at) {
        const auto j = kept[i][k];
        f << i << "," << kept_cos[i][k] << "," << prob[at];
        for (const auto check : kChecks) {
          GuardChecks only{false, false, false, false};
          only.*check = true;
          f << "," << (lexical_guard(q2[i], q1[j], only) ? 0 : 1);
        }
        f << "," << (q1[j] == q1[i] ? 1 : 0) << "," << (in.duplicate[i] ? 1 : 0) << "\n";
      }
  }
  // The decision score: the verifier's probability combined with the candidate's cosine by a
  // logistic layer fitted on the rows 0 mod 4 (labelled candidates: each lookup's own
  // question1); the calibration rows are 2 mod 4, the reported ones odd.
  const auto combine = fit_combiner(combiner_samples(kept, kept_cos, prob, [&](std::size_t i, std::size_t j) {
    if (i % 4 != 0 || q1[j] != q1[i]) return -1;
    return in.duplicate[i] ? 1 : 0;
  }));
  std::vector<Row> raw(n);  // the verifier's probability alone
  auto decide = [&](std::vector<Row>& rows, const std::array<double, 3>& c) {
    std::size_t at = 0;
    for (std::size_t i = 0; i < n; ++i) {
      rows[i].duplicate = in.duplicate[i];
      double best = kNoHit;
      std::size_t best_j = 0;
      for (std::size_t k = 0; k < kept[i].size(); ++k, ++at) {
        const double score = combined_score(c, kept_cos[i][k], prob[at]);
        if (score > best) {
          best = score;
          best_j = kept[i][k];
        }
      }
      rows[i].score = best;
      if (best != kNoHit) rows[i].outcome = outcome_of(i, best_j);
    }
  };
  decide(raw, {0, 0, 1});
  decide(verified, combine);

  boost::json::object out;
  out["protocol"] =
      "thresholds chosen on the even rows (0-based), every figure measured on the odd rows; precision = TP / "
      "(TP + FP) over hits on the pair's own question1, cache_precision = TP / all hits (a hit on another "
      "question1 counts as wrong); intervals: two-sided 95% Clopper-Pearson";
  out["candidates"] = in.candidates;
  out["floor"] = in.floor;
  out["verifier_guards"] = to_string(in.verifier_guards);
  out["verifier_layers"] = verifier.layers();
  out["verifier_precision"] = verifier.precision();
  out["verified_pairs"] = pairs.size();
  out["verify_seconds"] = verify_s;
  out["cosine_only"] = tier(cosine);
  out["cosine_guards"] = tier(guarded);
  out["cosine_guards_verifier_alone"] = tier(raw);
  out["cosine_guards_verifier"] = tier(verified);
  out["combine"] = boost::json::array{combine[0], combine[1], combine[2]};
  out["combine_rule"] =
      "score = sigmoid(a + b * cosine + c * logit(verifier probability)), fitted on rows 0 mod 4 (own "
      "question1 candidates, label = duplicate); calibration rows 2 mod 4; report rows odd";

  // The calibrated decision as the cache makes it: a threshold on the verifier's probability
  // from the even rows' scores, then the false-hit rate it gives on the odd rows.
  // Only labelled outcomes calibrate: a lookup whose best candidate is another row's question1
  // (often the same question asked again, which no label covers) is left out, as precision does.
  std::vector<CalibrationRow> calib;
  for (std::size_t i = 2; i < n; i += 4)
    if (verified[i].score != kNoHit && verified[i].outcome != Outcome::kOther)
      calib.push_back({verified[i].score, verified[i].outcome == Outcome::kTrue});
  boost::json::object calibrated;
  for (const double rate : {0.01, 0.03, 0.05, 0.1, 0.15, 0.2}) {
    const auto c = calibrate_threshold(calib, rate, in.confidence);
    boost::json::object o{{"ok", c.ok}, {"calibration_rows", c.rows}};
    if (c.ok) {
      const auto counts = count(verified, 1, c.threshold);
      o["probability_threshold"] = c.threshold;
      o["calibration_accepted"] = c.accepted;
      o["calibration_false_hits"] = c.false_hits;
      o["calibration_upper_bound"] = c.upper_bound;
      o["report_labelled_hits"] = counts.tp + counts.fp;
      o["report_false_hits"] = counts.fp;
      o["report_false_hit_rate"] = ratio(counts.fp, counts.tp + counts.fp, 0.0);
      o["report_false_hit_rate_ci95"] = interval(counts.fp, counts.tp + counts.fp);
      o["report_recall"] = ratio(counts.tp, counts.positives, 0.0);
      o["report_hits_on_other_questions"] = counts.other;
      o["report_cache_precision"] = ratio(counts.tp, counts.hits(), 1.0);
    } else {
      o["why"] = c.why;
    }
    calibrated[std::to_string(rate).substr(0, 4)] = std::move(o);
  }
  out["calibrated_max_false_hit_rate"] = std::move(calibrated);

  if (!calibration_out.empty()) {
    std::ofstream f(calibration_out, std::ios::trunc);
    if (!f) throw std::runtime_error("cannot write " + calibration_out);
    f << "# Pair verifier calibration scores (tidegate-cache-eval --write-calibration): for each row 2 mod 4 (0-based)\n"
         "# of the pairs file whose lookup had a candidate (top "
      << in.candidates << " above cosine " << in.floor
      << ", lexical guard) and whose best candidate was its own question1, the verifier's\n# highest "
         "decision score and the pair's label (1: duplicate, so serving it was right). The score is\n"
         "# sigmoid(a + b * cosine + c * logit(verifier probability)), a b c on the combine line (fitted on rows 0 mod 4).\n";
    f.precision(9);
    f << "combine," << combine[0] << "," << combine[1] << "," << combine[2] << "\nguards," << to_string(in.verifier_guards)
      << "\nscore,correct\n";
    for (const auto& r : calib) f << r.score << "," << (r.correct ? 1 : 0) << "\n";
  }
  return out;
}

}  // namespace tidegate::cache
