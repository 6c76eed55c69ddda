#include "tidegate/replay/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace tidegate::replay {
namespace {

double round_to(double v, double unit) { return std::round(v / unit) * unit; }

std::string num(double v, int decimals = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// One panel: a frame, a y axis with a few ticks, and series drawn as polylines or stacked areas.
class Panel {
 public:
  Panel(std::ostringstream& svg, double top, double height, double t_max, double y_max, const std::string& label)
      : svg_(svg), top_(top), h_(height), t_max_(std::max(t_max, 1.0)), y_max_(y_max > 0 ? y_max * 1.08 : 1) {
    svg_ << "<rect x='" << kLeft << "' y='" << top_ << "' width='" << kWidth << "' height='" << h_
         << "' fill='none' stroke='#999'/>\n";
    svg_ << "<text x='" << kLeft + 6 << "' y='" << top_ + 14 << "' font-size='12' fill='#333'>" << label << "</text>\n";
    for (int i = 0; i <= 4; ++i) {
      const double v = y_max_ * i / 4;
      svg_ << "<text x='" << kLeft - 6 << "' y='" << y(v) + 4 << "' font-size='10' text-anchor='end' fill='#555'>"
           << num(v, v < 10 ? 1 : 0) << "</text>\n";
    }
  }
  double x(double t) const { return kLeft + kWidth * t / t_max_; }
  double y(double v) const { return top_ + h_ - h_ * std::min(v, y_max_) / y_max_; }

  void line(const std::vector<double>& ts, const std::vector<double>& vs, const char* color, bool dashed = false) {
    svg_ << "<polyline fill='none' stroke='" << color << "' stroke-width='1.3'"
         << (dashed ? " stroke-dasharray='5,4'" : "") << " points='";
    for (std::size_t i = 0; i < ts.size(); ++i) svg_ << num(x(ts[i]), 1) << ',' << num(y(vs[i]), 1) << ' ';
    svg_ << "'/>\n";
  }
  // Area between `lower` and `upper`, as a step chart.
  void band(const std::vector<double>& ts, const std::vector<double>& lower, const std::vector<double>& upper,
            double step, const char* color) {
    svg_ << "<polygon fill='" << color << "' stroke='none' points='";
    for (std::size_t i = 0; i < ts.size(); ++i)
      svg_ << num(x(ts[i]), 1) << ',' << num(y(upper[i]), 1) << ' ' << num(x(ts[i] + step), 1) << ','
           << num(y(upper[i]), 1) << ' ';
    for (std::size_t i = ts.size(); i-- > 0;)
      svg_ << num(x(ts[i] + step), 1) << ',' << num(y(lower[i]), 1) << ' ' << num(x(ts[i]), 1) << ','
           << num(y(lower[i]), 1) << ' ';
    svg_ << "'/>\n";
  }
  void legend(int slot, const char* color, const std::string& text) {
    const double lx = kLeft + kWidth - 110.0 * (slot + 1);
    svg_ << "<rect x='" << lx << "' y='" << top_ + 5 << "' width='10' height='10' fill='" << color << "'/>"
         << "<text x='" << lx + 14 << "' y='" << top_ + 14 << "' font-size='11'>" << text << "</text>\n";
  }

  static constexpr double kLeft = 60, kWidth = 860;

 private:
  std::ostringstream& svg_;
  double top_, h_, t_max_, y_max_;
};

}  // namespace

boost::json::object summary_json(const ReplaySummary& s, const ReplayOptions& o) {
  boost::json::object j;
  j["policy"] = s.policy;
  j["requests"] = s.requests;
  j["completed"] = s.completed;
  j["rejected"] = s.rejected;
  j["duration_s"] = round_to(s.duration_s, 0.001);
  j["gpu_hours"] = round_to(s.gpu_hours, 1e-4);
  j["gpu_hours_unready_at_end"] = round_to(s.gpu_hours_unready_at_end, 1e-4);
  j["cost_usd"] = round_to(s.cost_usd, 1e-4);
  boost::json::object hours, dollars;
  for (int i = 0; i < kStateCount; ++i) {
    hours[state_name(static_cast<StateIndex>(i))] = round_to(s.gpu_hours_by_state[i], 1e-4);
    dollars[state_name(static_cast<StateIndex>(i))] =
        round_to(s.gpu_hours_by_state[i] * o.profile.usd_per_gpu_hour, 1e-4);
  }
  j["gpu_hours_by_state"] = std::move(hours);
  j["cost_usd_by_state"] = std::move(dollars);
  j["ttft_slo_attainment"] = round_to(s.ttft_slo_attainment, 1e-6);
  j["e2e_slo_attainment"] = round_to(s.e2e_slo_attainment, 1e-6);
  j["ttft_p50_ms"] = round_to(s.ttft_p50_s * 1000, 0.01);
  j["ttft_p99_ms"] = round_to(s.ttft_p99_s * 1000, 0.01);
  j["e2e_p50_ms"] = round_to(s.e2e_p50_s * 1000, 0.01);
  j["e2e_p99_ms"] = round_to(s.e2e_p99_s * 1000, 0.01);
  j["queue_wait_p99_ms"] = round_to(s.queue_wait_p99_s * 1000, 0.01);
  j["mean_replicas"] = round_to(s.mean_replicas, 0.001);
  j["max_replicas"] = s.max_replicas;
  j["scale_events"] = s.scale_events;
  j["prefix_cache_hit_ratio"] =
      s.prefix_query_tokens > 0 ? round_to(static_cast<double>(s.prefix_hit_tokens) / s.prefix_query_tokens, 1e-4) : 0.0;
  // The issue-20 names: the same ratio, and the prompt tokens the engines did not prefill.
  j["prefix_cache_hit_rate"] = j["prefix_cache_hit_ratio"];
  j["prefill_tokens_saved"] = s.prefix_hit_tokens;
  j["balancer"] = balancer_name(o.balancer);
  j["prefix_routed"] = s.prefix_routed;
  auto ratio = [](double v) { return v > 0 ? boost::json::value(round_to(v, 1e-4)) : boost::json::value(nullptr); };
  j["gpu_hours_vs_static"] = ratio(s.gpu_hours_vs_static);
  j["gpu_hours_vs_optimum"] = ratio(s.gpu_hours_vs_optimum);
  j["meets_slo"] = s.meets_slo(o.slo);
  j["slo"] = {{"ttft_ms", o.slo.ttft_s * 1000}, {"e2e_ms", o.slo.e2e_s * 1000}, {"attainment", o.slo.attainment}};
  return j;
}

void write_timeline_csv(const std::vector<TimelineRow>& rows, std::ostream& out) {
  out << "t_s,arrivals,active,starting,warm,draining,queue_depth,in_flight,ttft_p99_ms\n";
  for (const auto& r : rows)
    out << num(r.t, 1) << ',' << r.arrivals << ',' << r.active << ',' << r.starting << ',' << r.warm << ','
        << r.draining << ',' << r.queue_depth << ',' << r.in_flight << ',' << num(r.ttft_p99_s * 1000, 1) << '\n';
}

void write_decisions_csv(const std::vector<scaler::Decision>& decisions, std::ostream& out) {
  out << "t_s,active,starting,desired,tiers,direction,reason_code,demand,burst_margin,headroom,attainment,reason\n";
  for (const auto& d : decisions) {
    int tiers = 0;
    for (int n : d.desired_tiers) tiers += n;
    std::string reason = d.reason;
    for (auto& ch : reason)
      if (ch == '"') ch = '\'';
    out << num(d.t, 0) << ',' << d.active << ',' << d.starting << ',' << d.desired << ',' << tiers << ','
        << scaler::to_string(d.direction) << ',' << d.reason_code << ',' << num(d.work ? d.work->demand : 0, 3) << ','
        << num(d.work ? d.work->burst_margin : 0, 3) << ',' << num(d.work ? d.work->headroom : 1, 2) << ','
        << (d.work && d.work->attainment ? num(*d.work->attainment, 5) : std::string()) << ",\"" << reason << "\"\n";
  }
}

std::string render_svg(const std::vector<TimelineRow>& rows, const std::string& title, double slo_ttft_s) {
  constexpr double kPanelH = 150, kGap = 28, kTop = 40;
  std::ostringstream svg;
  const double height = kTop + 4 * (kPanelH + kGap) + 20;
  svg << "<?xml version='1.0' encoding='UTF-8'?>\n<svg xmlns='http://www.w3.org/2000/svg' width='960' height='"
      << height << "' font-family='sans-serif'>\n<rect width='100%' height='100%' fill='white'/>\n";
  svg << "<text x='480' y='22' font-size='15' text-anchor='middle'>" << title << "</text>\n";
  std::vector<double> ts, arrivals, active, starting, warm, draining, queue, ttft, zero;
  const double step = rows.size() > 1 ? rows[1].t - rows[0].t : 10;
  for (const auto& r : rows) {
    ts.push_back(r.t);
    arrivals.push_back(static_cast<double>(r.arrivals) / step);
    active.push_back(r.active);
    starting.push_back(r.active + r.starting);
    warm.push_back(r.active + r.starting + r.warm);
    draining.push_back(r.active + r.starting + r.warm + r.draining);
    queue.push_back(static_cast<double>(r.queue_depth));
    ttft.push_back(r.ttft_p99_s * 1000);
    zero.push_back(0);
  }
  const double t_max = rows.empty() ? 1 : rows.back().t + step;
  auto max_of = [](const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); };
  double top = kTop;
  {
    Panel p(svg, top, kPanelH, t_max, max_of(arrivals), "arrivals (requests/s)");
    p.line(ts, arrivals, "#1f77b4");
  }
  top += kPanelH + kGap;
  {
    Panel p(svg, top, kPanelH, t_max, max_of(draining), "replicas by state");
    p.band(ts, zero, active, step, "#2ca02c");
    p.band(ts, active, starting, step, "#ff7f0e");
    p.band(ts, starting, warm, step, "#9edae5");
    p.band(ts, warm, draining, step, "#bbbbbb");
    p.legend(0, "#bbbbbb", "draining");
    p.legend(1, "#9edae5", "warm");
    p.legend(2, "#ff7f0e", "starting");
    p.legend(3, "#2ca02c", "active");
  }
  top += kPanelH + kGap;
  {
    Panel p(svg, top, kPanelH, t_max, max_of(queue), "admission queue depth (requests)");
    p.line(ts, queue, "#d62728");
  }
  top += kPanelH + kGap;
  {
    const double slo_ms = slo_ttft_s * 1000;
    Panel p(svg, top, kPanelH, t_max, std::max(max_of(ttft), slo_ms * 1.2), "TTFT p99 per bucket (ms); dashed: SLO");
    p.line(ts, ttft, "#9467bd");
    if (!ts.empty()) p.line({0, t_max}, {slo_ms, slo_ms}, "#444", true);
  }
  top += kPanelH;
  for (int i = 0; i <= 6; ++i) {
    const double t = t_max * i / 6;
    svg << "<text x='" << Panel::kLeft + Panel::kWidth * i / 6 << "' y='" << top + 16
        << "' font-size='10' text-anchor='middle' fill='#555'>" << num(t / 60, 0) << " min</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

std::string comparison_table(const std::vector<ReplaySummary>& rows, const Slo& slo) {
  std::vector<const ReplaySummary*> order;
  for (const auto& r : rows) order.push_back(&r);
  std::stable_sort(order.begin(), order.end(), [&](const auto* a, const auto* b) {
    if (a->meets_slo(slo) != b->meets_slo(slo)) return a->meets_slo(slo);
    return a->gpu_hours < b->gpu_hours;
  });
  std::ostringstream o;
  char line[256];
  auto ratio = [](double v) {
    char buf[16];
    if (v > 0) std::snprintf(buf, sizeof buf, "%.3f", v);
    else std::snprintf(buf, sizeof buf, "-");
    return std::string(buf);
  };
  std::snprintf(line, sizeof line, "%-30s %9s %8s %8s %9s %9s %10s %9s %6s %5s %5s\n", "policy", "GPU-h", "/static",
                "/optimum", "TTFT att", "E2E att", "TTFT p99", "mean rep", "max", "evts", "SLO");
  o << line;
  for (const auto* r : order) {
    std::snprintf(line, sizeof line, "%-30s %9.3f %8s %8s %8.3f%% %8.3f%% %8.0fms %9.2f %6d %5zu %5s\n",
                  r->policy.c_str(), r->gpu_hours, ratio(r->gpu_hours_vs_static).c_str(),
                  ratio(r->gpu_hours_vs_optimum).c_str(), r->ttft_slo_attainment * 100, r->e2e_slo_attainment * 100,
                  r->ttft_p99_s * 1000, r->mean_replicas, r->max_replicas, r->scale_events,
                  r->meets_slo(slo) ? "yes" : "no");
    o << line;
  }
  return o.str();
}

}  // namespace tidegate::replay
