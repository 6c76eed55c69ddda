// tidegate-replay: replays a request trace through the live scaler policy and the simulator's
// timing model in virtual time; compares with baselines and the offline optimum; tunes the
// policy on one part of the trace and validates it on the rest.
#include <unistd.h>

#include <boost/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "tidegate/common/config_error.h"
#include "tidegate/common/log.h"
#include "tidegate/replay/cli.h"
#include "tidegate/replay/optimum.h"
#include "tidegate/replay/report.h"
#include "tidegate/replay/suite.h"
#include "tidegate/replay/variants.h"

namespace tr = tidegate::replay;

namespace {

void progress_bar(double done, double total) {
  const double frac = total > 0 ? std::min(1.0, done / total) : 1.0;
  const int width = 40, filled = static_cast<int>(frac * width);
  std::fprintf(stderr, "\r  replay [%.*s%*s] %3.0f%%  %.1f/%.1f min virtual", filled,
               "########################################", width - filled, "", frac * 100, done / 60, total / 60);
  if (frac >= 1.0) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

void report_trace(const tr::Trace& trace, const tr::CliArgs& args) {
  std::fprintf(stderr, "trace %s: %zu requests over %.1f s (%s)\n", args.trace.c_str(), trace.requests.size(),
               trace.duration_s(), tr::to_string(trace.format).c_str());
  if (trace.bad_row_count) {
    std::fprintf(stderr, "warning: skipped %zu malformed rows:\n", trace.bad_row_count);
    for (std::size_t i = 0; i < trace.bad_rows.size() && i < 10; ++i)
      std::fprintf(stderr, "  %s:%zu: %s\n", args.trace.c_str(), trace.bad_rows[i].line,
                   trace.bad_rows[i].reason.c_str());
    if (trace.bad_row_count > 10) std::fprintf(stderr, "  ... (%zu more)\n", trace.bad_row_count - 10);
  }
  if (trace.out_of_order_rows)
    std::fprintf(stderr, "warning: %zu rows out of timestamp order (first at line %zu); sorted by arrival\n",
                 trace.out_of_order_rows, trace.first_out_of_order_line);
  if (trace.outside_window_rows)
    std::fprintf(stderr, "window: %zu rows outside [%g, %g) s not replayed\n", trace.outside_window_rows,
                 args.window_from_s, args.window_to_s);
  if (trace.other_model_rows)
    std::fprintf(stderr, "model %s: %zu rows of other models not replayed\n", args.trace_model.c_str(),
                 trace.other_model_rows);
  if (trace.zero_output_rows)
    std::fprintf(stderr, "note: %zu rows with 0 output tokens replayed as 1 token\n", trace.zero_output_rows);
  if (trace.block_tokens == 0)
    std::fprintf(stderr, "note: the trace carries no prefix block ids: prefix caching is off in this replay\n");
  else
    std::fprintf(stderr, "prefix blocks: %zu of %zu requests carry %d-token block ids\n", trace.requests_with_blocks,
                 trace.requests.size(), trace.block_tokens);
  if (trace.non_chain_block_ids)
    std::fprintf(stderr,
                 "warning: %zu block ids follow a different prefix than where first seen (first at line %zu): not a "
                 "prefix chain; reuse is counted only for identical prefixes\n",
                 trace.non_chain_block_ids, trace.first_non_chain_line);
  if (trace.block_count_mismatch_rows)
    std::fprintf(stderr, "warning: %zu rows have block ids that do not cover ceil(input_length / %d) blocks\n",
                 trace.block_count_mismatch_rows, trace.block_tokens);
  if (args.repeat > 1) std::fprintf(stderr, "repeated %d times end to end\n", args.repeat);
  if (args.variant != "none")
    std::fprintf(stderr, "variant %s: %zu requests over %.1f s\n", tr::describe(tr::parse_variant(args.variant)).c_str(),
                 trace.requests.size(), trace.duration_s());
}

void warn_about(const tr::ReplayOptions& o, const tr::Trace& trace, const tidegate::scaler::PolicyConfig& policy) {
  for (const auto& tier : policy.tiers) {
    if (tier.price_fraction >= 1)
      std::fprintf(stderr, "note: tier %s costs %.2fx an active replica: the policy never uses it\n", tier.name.c_str(),
                   tier.price_fraction);
    else if (tier.promotion_s >= o.profile.cold_start_s)
      std::fprintf(stderr, "note: tier %s wakes in %.0f s, no faster than a cold start: the policy never uses it\n",
                   tier.name.c_str(), tier.promotion_s);
  }
  if (o.profile.cold_start_s > trace.duration_s())
    std::fprintf(stderr,
                 "warning: the cold start (%.0f s) is longer than the trace (%.0f s): no replica started during it can "
                 "serve any of its requests\n",
                 o.profile.cold_start_s, trace.duration_s());
}

void write_outputs(const tr::CliArgs& args, const tr::ReplayResult& run, const tr::TidegatePolicy& policy) {
  std::filesystem::create_directories(args.out_dir);
  const std::filesystem::path dir(args.out_dir);
  std::ostringstream csv, decisions;
  tr::write_timeline_csv(run.timeline, csv);
  write_file(dir / "timeline.csv", csv.str());
  tr::write_decisions_csv(policy.decisions(), decisions);
  write_file(dir / "decisions.csv", decisions.str());
  write_file(dir / "timeline.svg",
             tr::render_svg(run.timeline,
                            "tidegate-replay: " + std::filesystem::path(args.trace).filename().string() +
                                " (policy: tidegate)",
                            args.config.options.slo.ttft_s));
}

// Static, optimum, HPA, KPA and Tidegate with and without a warm pool, cheapest first.
void run_baselines(const tr::CliArgs& args, const tr::Trace& trace, const tr::ReplayOptions& options,
                   const tr::StaticSearchResult& fixed, const std::optional<tr::OptimumResult>& optimum,
                   unsigned threads, boost::json::object& summary) {
  const auto& cfg = args.config;
  std::vector<tr::ReplaySummary> rows;
  rows.push_back(fixed.summary);
  rows.back().policy =
      "static (cheapest N=" + std::to_string(fixed.replicas) + ")" + (fixed.found ? "" : " none meets");
  if (optimum) {
    rows.push_back(optimum->summary);
    if (!optimum->found) rows.back().policy = "optimum (none found)";
  }
  for (const auto& r : tr::run_all(trace, tr::comparison_policies(cfg), options, threads)) rows.push_back(r.summary);
  for (auto& r : rows) tr::annotate(r, &fixed.summary, optimum ? &optimum->summary : nullptr);
  const auto table = tr::comparison_table(rows, cfg.options.slo);
  std::printf("\nCost against SLO (TTFT <= %.0f ms for >= %.1f%% of requests):\n%s", cfg.options.slo.ttft_s * 1000,
              cfg.options.slo.attainment * 100, table.c_str());
  if (!fixed.found) {
    double best = 0;
    for (const auto& s : fixed.tried) best = std::max(best, s.ttft_slo_attainment);
    std::printf("No static fleet up to %d replicas meets the SLO; the best reaches %.3f%%.\n",
                cfg.options.replicas_max, best * 100);
  }
  boost::json::array arr;
  for (const auto& r : rows) {
    auto j = tr::summary_json(r, cfg.options);
    if (r.policy.rfind("optimum", 0) == 0) j["policy"] = "optimum";
    arr.push_back(std::move(j));
  }
  summary["baselines"] = std::move(arr);
  if (!args.out_dir.empty()) write_file(std::filesystem::path(args.out_dir) / "baselines.txt", table);
}

void run_tuner(const tr::CliArgs& args, const tr::Trace& trace, int initial, unsigned threads, bool show_progress,
               boost::json::object& summary) {
  auto tune_cfg = args.config;
  tune_cfg.options.initial_active = initial;
  const auto tuned = tr::tune(trace, tune_cfg, args.grid, threads, [&](std::size_t n, std::size_t total) {
    if (show_progress) progress_bar(static_cast<double>(n), static_cast<double>(total));
  });
  std::vector<tr::ReplaySummary> rows;
  for (const auto& p : tuned.frontier) {
    rows.push_back(p.summary);
    rows.back().policy = tr::describe(p.config) + (p.robust ? "" : " *");
  }
  const auto& slo = args.config.options.slo;
  std::printf("\nTuner: %zu settings on the first %.0f s of the trace; Pareto frontier there (GPU-hours vs TTFT "
              "attainment; * = misses the SLO on one of its halves):\n%s",
              tuned.all.size(), tuned.tune_until_s, tr::comparison_table(rows, slo).c_str());
  if (tuned.cheapest_meeting_slo < 0) {
    std::printf("\nNo setting in the grid meets the SLO on the tuning part and on both its halves.\n");
    return;
  }
  const auto& best = tuned.all[static_cast<std::size_t>(tuned.cheapest_meeting_slo)];
  std::printf("\nCheapest setting meeting the SLO there (%.3f GPU-h = %.3fx that part's cheapest static fleet):\n%s",
              best.summary.gpu_hours, best.summary.gpu_hours_vs_static, tr::policy_yaml(best.config).c_str());
  summary["tuned_best"] = tr::summary_json(best.summary, args.config.options);
  if (tuned.held_back) {
    std::vector<tr::ReplaySummary> held{*tuned.held_back, *tuned.held_back_default, *tuned.held_back_static};
    held.back().policy = "static (that part's cheapest)";
    std::printf("\nHeld-back part (the last %.0f s, never seen by the tuner):\n%s",
                trace.duration_s() - tuned.tune_until_s, tr::comparison_table(held, slo).c_str());
    std::printf("The tuned setting %s the SLO on the held-back part.\n",
                tuned.held_back->meets_slo(slo) ? "meets" : "MISSES");
    summary["tuned_held_back"] = tr::summary_json(*tuned.held_back, args.config.options);
    summary["default_held_back"] = tr::summary_json(*tuned.held_back_default, args.config.options);
  }
}

int run(const tr::CliArgs& args) {
  // The live lifecycle controller logs every replica transition; in a replay that is noise.
  tidegate::log::set_min_level(tidegate::log::Level::kWarn);
  const auto& cfg = args.config;
  tr::validate(cfg.options);
  tr::ParseOptions po;
  po.format = args.format;
  po.on_bad_row = args.on_bad_row;
  po.on_unsorted = args.on_unsorted;
  po.load_factor = args.load_factor;
  po.window_from_s = args.window_from_s;
  po.window_to_s = args.window_to_s;
  po.model = args.trace_model;
  const auto trace =
      tr::make_variant(tr::repeat_trace(tr::parse_trace_file(args.trace, po), args.repeat), tr::parse_variant(args.variant));
  report_trace(trace, args);
  warn_about(cfg.options, trace, cfg.tidegate.policy);

  auto options = cfg.options;
  const tr::StaticSearchResult fixed = tr::cheapest_static(trace, cfg.options);
  if (options.initial_active == 0) options.initial_active = fixed.replicas;
  std::optional<tr::OptimumResult> optimum;
  if (args.baselines && args.optimum) {
    tr::OptimumOptions search;
    if (fixed.found) search.static_fleet = fixed.replicas;
    optimum = tr::offline_optimum(trace, options, search);
  }

  const auto wall0 = std::chrono::steady_clock::now();
  const bool show_progress = args.progress == tr::ProgressMode::kOn ||
                             (args.progress == tr::ProgressMode::kAuto && isatty(STDERR_FILENO) &&
                              trace.duration_s() > 600);
  if (show_progress) options.progress = progress_bar;
  auto main_cfg = cfg.tidegate;
  main_cfg.record_decisions = !args.out_dir.empty();
  tr::TidegatePolicy policy(main_cfg, "tidegate");
  auto main_run = tr::run_replay(trace, policy, options);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  tr::annotate(main_run.summary, &fixed.summary, optimum ? &optimum->summary : nullptr);
  auto summary = tr::summary_json(main_run.summary, cfg.options);
  summary["trace"] = args.trace;
  summary["variant"] = tr::describe(tr::parse_variant(args.variant));
  summary["repeat"] = args.repeat;
  summary["replay_wall_s"] = std::round(wall * 1000) / 1000;
  summary["initial_replicas"] = options.initial_active;
  if (trace.block_tokens > 0) summary["ideal_prefix_cache_hit_rate"] = std::round(tr::ideal_prefix_hit_rate(trace) * 1e4) / 1e4;
  if (!args.out_dir.empty()) write_outputs(args, main_run, policy);
  if (!args.json) {
    const auto& s = main_run.summary;
    std::printf("policy tidegate: %.3f GPU-h (%.3fx static), $%.2f, TTFT attainment %.3f%% (SLO %.0f ms), p50 %.0f ms, "
                "p99 %.0f ms, mean %.2f / max %d replicas, %zu scale events (replayed in %.2f s)\n",
                s.gpu_hours, s.gpu_hours_vs_static, s.cost_usd, s.ttft_slo_attainment * 100,
                cfg.options.slo.ttft_s * 1000, s.ttft_p50_s * 1000, s.ttft_p99_s * 1000, s.mean_replicas,
                s.max_replicas, s.scale_events, wall);
  }

  const unsigned threads = args.threads ? args.threads : std::max(1u, std::thread::hardware_concurrency());
  if (args.baselines) run_baselines(args, trace, options, fixed, optimum, threads, summary);
  if (args.tune) run_tuner(args, trace, options.initial_active, threads, show_progress, summary);
  if (args.json) std::printf("%s\n", boost::json::serialize(summary).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const auto args = tr::parse_cli(argc, argv);
    if (args.help) {
      std::fputs(tr::usage().c_str(), stdout);
      return 0;
    }
    return run(args);
  } catch (const tr::CliError& e) {
    std::fprintf(stderr, "tidegate-replay: %s\n\n%s", e.what(), tr::usage().c_str());
  } catch (const tidegate::ConfigError& e) {
    std::fprintf(stderr, "tidegate-replay: %s\n", e.what());
  } catch (const tr::TraceError& e) {
    std::fprintf(stderr, "tidegate-replay: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tidegate-replay: %s\n", e.what());
  }
  return 2;
}
