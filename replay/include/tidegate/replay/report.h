#pragma once
// What a replay run produces for people and programs: the JSON summary, the timeline CSV, an
// SVG plot, and the cost-versus-SLO table.
#include <boost/json.hpp>

#include <ostream>
#include <string>
#include <vector>

#include "tidegate/replay/replay.h"
#include "tidegate/scaler/policy.h"

namespace tidegate::replay {

// Keys: policy, requests, completed, rejected, duration_s, gpu_hours, cost_usd,
// gpu_hours_by_state{...}, cost_usd_by_state{...}, ttft_slo_attainment, e2e_slo_attainment,
// ttft_p50_ms, ttft_p99_ms, e2e_p50_ms, e2e_p99_ms, queue_wait_p99_ms, mean_replicas,
// max_replicas, scale_events, meets_slo, slo{ttft_ms, e2e_ms, attainment}.
boost::json::object summary_json(const ReplaySummary& s, const ReplayOptions& options);

void write_timeline_csv(const std::vector<TimelineRow>& rows, std::ostream& out);

// One row per policy decision: time, counts, reason code, the work model's view, the reason.
void write_decisions_csv(const std::vector<scaler::Decision>& decisions, std::ostream& out);

// Four panels over time: arrivals/s, replicas by state (stacked), queue depth, TTFT p99
// against the SLO line. Self-contained SVG 1.1.
std::string render_svg(const std::vector<TimelineRow>& rows, const std::string& title, double slo_ttft_s);

// A fixed-width table, one row per run, cheapest first among those meeting the SLO.
std::string comparison_table(const std::vector<ReplaySummary>& rows, const Slo& slo);

}  // namespace tidegate::replay
