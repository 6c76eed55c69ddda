// tidegate-replay: replays a request trace through the live scaler policy and the simulator's
// timing model in virtual time; compares with baselines; tunes the policy.
#include <unistd.h>

#include <boost/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>

#include "tidegate/replay/cli.h"
#include "tidegate/common/config_error.h"
#include "tidegate/common/log.h"
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
  const auto trace = tr::make_variant(tr::parse_trace_file(args.trace, po), tr::parse_variant(args.variant));
  report_trace(trace, args);
  if (args.variant != "none")
    std::fprintf(stderr, "variant %s: %zu requests over %.1f s\n", tr::describe(tr::parse_variant(args.variant)).c_str(),
                 trace.requests.size(), trace.duration_s());

  auto options = cfg.options;
  std::optional<tr::StaticSearchResult> fixed;
  if (options.initial_active == 0 || args.baselines) fixed = tr::cheapest_static(trace, cfg.options);
  if (options.initial_active == 0) options.initial_active = fixed->replicas;
  const auto wall0 = std::chrono::steady_clock::now();
  const bool show_progress = args.progress == tr::ProgressMode::kOn ||
                             (args.progress == tr::ProgressMode::kAuto && isatty(STDERR_FILENO) &&
                              trace.duration_s() > 600);
  if (show_progress) options.progress = progress_bar;
  tr::TidegatePolicy policy(cfg.tidegate, "tidegate");
  const auto main_run = tr::run_replay(trace, policy, options);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  auto summary = tr::summary_json(main_run.summary, cfg.options);
  summary["trace"] = args.trace;
  summary["replay_wall_s"] = std::round(wall * 1000) / 1000;
  summary["initial_replicas"] = options.initial_active;

  if (!args.out_dir.empty()) {
    std::filesystem::create_directories(args.out_dir);
    const std::filesystem::path dir(args.out_dir);
    std::ostringstream csv;
    tr::write_timeline_csv(main_run.timeline, csv);
    write_file(dir / "timeline.csv", csv.str());
    write_file(dir / "timeline.svg",
               tr::render_svg(main_run.timeline,
                              "tidegate-replay: " + std::filesystem::path(args.trace).filename().string() +
                                  " (policy: tidegate)",
                              cfg.options.slo.ttft_s));
  }
  if (!args.json) {
    std::printf("policy tidegate: %.3f GPU-h, $%.2f, TTFT attainment %.3f%% (SLO %.0f ms), p50 %.0f ms, p99 %.0f ms, "
                "mean %.2f / max %d replicas, %zu scale events (replayed in %.2f s)\n",
                main_run.summary.gpu_hours, main_run.summary.cost_usd, main_run.summary.ttft_slo_attainment * 100,
                cfg.options.slo.ttft_s * 1000, main_run.summary.ttft_p50_s * 1000,
                main_run.summary.ttft_p99_s * 1000, main_run.summary.mean_replicas, main_run.summary.max_replicas,
                main_run.summary.scale_events, wall);
  }

  const unsigned threads = args.threads ? args.threads : std::max(1u, std::thread::hardware_concurrency());
  if (args.baselines) {
    const auto& stat = *fixed;
    std::vector<tr::ReplaySummary> rows;
    rows.push_back(stat.summary);
    rows.back().policy = "static (cheapest N=" + std::to_string(stat.replicas) + ")" + (stat.found ? "" : " none meets");
    for (const auto& r : tr::run_all(trace, tr::comparison_policies(cfg), options, threads))
      rows.push_back(r.summary);
    const auto table = tr::comparison_table(rows, cfg.options.slo);
    std::printf("\nCost against SLO (TTFT <= %.0f ms for >= %.1f%% of requests):\n%s", cfg.options.slo.ttft_s * 1000,
                cfg.options.slo.attainment * 100, table.c_str());
    boost::json::array arr;
    for (const auto& r : rows) arr.push_back(tr::summary_json(r, cfg.options));
    summary["baselines"] = std::move(arr);
    if (!args.out_dir.empty()) write_file(std::filesystem::path(args.out_dir) / "baselines.txt", table);
  }
  if (args.tune) {
    auto tune_cfg = cfg;
    tune_cfg.options.initial_active = options.initial_active;
    auto tuned = tr::tune(trace, tune_cfg, args.grid, threads, [&](std::size_t n, std::size_t total) {
      if (show_progress) progress_bar(static_cast<double>(n), static_cast<double>(total));
    });
    std::vector<tr::ReplaySummary> rows;
    for (std::size_t i = 0; i < tuned.frontier.size(); ++i) {
      const auto& p = tuned.frontier[i];
      rows.push_back(p.summary);
      char name[96];
      std::snprintf(name, sizeof name, "c=%g w=%gs sd=%gs warm=%d", *p.config.policy.targets.concurrency_per_replica,
                    p.config.policy.stable_window_s, p.config.policy.scale_down_stabilization_s,
                    p.config.warm_pool_size);
      rows.back().policy = name;
    }
    std::printf("\nTuner: %zu settings, Pareto frontier (GPU-hours vs TTFT attainment):\n%s", tuned.all.size(),
                tr::comparison_table(rows, cfg.options.slo).c_str());
    if (tuned.cheapest_meeting_slo >= 0) {
      const auto& best = tuned.frontier[static_cast<std::size_t>(tuned.cheapest_meeting_slo)];
      std::printf("\nCheapest setting meeting the SLO (%.3f GPU-h):\n%s", best.summary.gpu_hours,
                  tr::policy_yaml(best.config).c_str());
      summary["tuned_best"] = tr::summary_json(best.summary, cfg.options);
    } else {
      std::printf("\nNo setting in the grid meets the SLO.\n");
    }
  }
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
