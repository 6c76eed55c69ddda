#include "admin_routes.h"

#include <cmath>

#include <cctype>
#include <charconv>

#include "tidegate/cost/dashboard_assets.h"
#include "tidegate/common/json_text.h"
#include "tidegate/common/openai_error.h"

namespace tidegate::app {
namespace {

using gateway::LocalReply;
using gateway::RouteRequest;

LocalReply json_reply(int status, const boost::json::value& v) {
  LocalReply r;
  r.status = status;
  r.body = common::to_json_text(v);  // plain decimals: boost::json would write 268.0 as 2.68E2
  r.reason = "admin";
  return r;
}

LocalReply error_reply(int status, const std::string& message, const std::string& code) {
  LocalReply r;
  r.status = status;
  r.body = common::openai_error_body(message, "invalid_request_error", code);
  r.reason = "admin";
  return r;
}

std::optional<double> number(const std::map<std::string, std::string>& q, const std::string& key, bool* bad) {
  const auto it = q.find(key);
  if (it == q.end() || it->second.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  if (!end || *end != '\0' || !std::isfinite(v)) *bad = true;  // "nan" parses, and reached the JSON
  return v;
}

std::optional<std::string> opt(const std::map<std::string, std::string>& q, const std::string& key) {
  const auto it = q.find(key);
  if (it == q.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

void add_cache_routes(gateway::Gateway& gw, std::shared_ptr<cache::SemanticCache> cache) {
  gw.add_route("GET", "/admin/cache/stats", [cache](const RouteRequest&, auto respond) {
    if (!cache) return respond(error_reply(404, "the semantic cache is not enabled", "cache_disabled"));
    respond(json_reply(200, cache->stats()));
  });
  gw.add_route("DELETE", "/admin/cache/entries/", [cache](const RouteRequest& req, auto respond) {
    if (!cache) return respond(error_reply(404, "the semantic cache is not enabled", "cache_disabled"));
    const auto id_text = req.path.substr(std::string("/admin/cache/entries/").size());
    std::uint64_t id = 0;
    const auto [p, ec] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), id);
    if (ec != std::errc() || p != id_text.data() + id_text.size())
      return respond(error_reply(400, "entry id must be a number: '" + id_text + "'", "invalid_value"));
    if (!cache->erase_entry(id)) return respond(error_reply(404, "no cache entry " + id_text, "not_found"));
    respond(json_reply(200, {{"deleted", 1}, {"id", id}}));
  });
  gw.add_route("DELETE", "/admin/cache", [cache](const RouteRequest& req, auto respond) {
    if (!cache) return respond(error_reply(404, "the semantic cache is not enabled", "cache_disabled"));
    if (req.path != "/admin/cache") return respond(error_reply(404, "no route " + req.path, "not_found"));
    const auto q = parse_query(req.query);
    // A scope that is misspelt or empty must not widen into "everything": only tenant and
    // model narrow a delete, and only a DELETE without either clears the whole cache.
    for (const auto& [key, value] : q) {
      if (key != "tenant" && key != "model")
        return respond(error_reply(400, "unknown parameter '" + key + "' (tenant and model narrow a delete)", "invalid_value"));
      if (value.empty())
        return respond(error_reply(400, "'" + key + "' is empty; leave it out to delete across every " + key,
                                   "invalid_value"));
    }
    const auto n = cache->erase(opt(q, "tenant"), opt(q, "model"));
    respond(json_reply(200, {{"deleted", n}}));
  });
}

void add_scaler_routes(gateway::Gateway& gw, std::shared_ptr<scaler::Scaler> scaler) {
  gw.add_route("GET", "/admin/scaler", [scaler](const RouteRequest&, auto respond) {
    if (!scaler) return respond(error_reply(404, "no scaler is configured", "scaler_disabled"));
    respond(json_reply(200, scaler->admin_state()));
  });
  // POST /admin/scaler/limits {"model": "...", "min_replicas": 1, "max_replicas": 8}
  gw.add_route("POST", "/admin/scaler/limits", [scaler](const RouteRequest& req, auto respond) {
    if (!scaler) return respond(error_reply(404, "no scaler is configured", "scaler_disabled"));
    boost::system::error_code ec;
    const auto v = boost::json::parse(req.body, ec);
    if (ec || !v.is_object()) return respond(error_reply(400, "body must be a JSON object", "invalid_json"));
    const auto& o = v.as_object();
    const auto* model = o.if_contains("model");
    const auto* lo = o.if_contains("min_replicas");
    const auto* hi = o.if_contains("max_replicas");
    if (!model || !model->is_string() || !lo || !lo->is_int64() || !hi || !hi->is_int64())
      return respond(error_reply(400, "expected {\"model\": string, \"min_replicas\": int, \"max_replicas\": int}",
                                 "invalid_value"));
    std::string error;
    if (!scaler->set_limits(std::string(model->as_string()), static_cast<int>(lo->as_int64()),
                            static_cast<int>(hi->as_int64()), &error))
      return respond(error_reply(400, error, "invalid_value"));
    respond(json_reply(200, scaler->admin_state()));
  });
}

void add_cost_routes(gateway::Gateway& gw, std::shared_ptr<cost::CostAccounting> accounting) {
  gw.add_route("GET", "/admin/costs", [accounting](const RouteRequest& req, auto respond) {
    if (!accounting) return respond(error_reply(404, "no cost section is configured", "costs_disabled"));
    const auto q = parse_query(req.query);
    const auto by = opt(q, "by").value_or("tenant");
    if (by != "tenant" && by != "model" && by != "tag" && by.rfind("tag:", 0) != 0)
      return respond(error_reply(400, "by must be tenant, model or tag", "invalid_value"));
    const auto format = opt(q, "format").value_or("json");
    if (format != "json" && format != "csv") return respond(error_reply(400, "format must be json or csv", "invalid_value"));
    bool bad = false;
    const auto from = number(q, "from", &bad);
    const auto to = number(q, "to", &bad);
    if (bad) return respond(error_reply(400, "from and to are Unix seconds", "invalid_value"));
    auto [body, type] = accounting->report(by, from, to, format);
    LocalReply r;
    r.body = std::move(body);
    r.content_type = std::move(type);
    r.reason = "admin";
    respond(std::move(r));
  });
}

void add_dashboard_routes(gateway::Gateway& gw, const Components& c) {
  auto accounting = c.accounting;
  auto feed = c.dashboard;
  gw.add_route("GET", "/dashboard", [accounting, feed](const RouteRequest& req, auto respond) {
    if (req.path == "/dashboard") {
      LocalReply r;
      r.status = 308;
      r.content_type = "text/plain";
      r.headers.emplace_back("Location", "/dashboard/");
      r.reason = "dashboard";
      return respond(std::move(r));
    }
    const auto rel = req.path.substr(std::string("/dashboard/").size());
    if (rel == "data.json") {
      const double t = unix_now();
      boost::json::object data;
      if (accounting) data = accounting->dashboard_snapshot(t);
      else  // no cost section: the gateway's own series, on the feed's time axis
        data = {{"version", 1},
                {"t", t},
                {"step_s", feed ? feed->step_s() : 5.0},
                {"window_s", feed ? feed->window_s() : 600.0},
                {"totals", boost::json::object{}},
                {"series", boost::json::object{}}};
      if (feed) feed->add_series(t, data["series"].as_object());
      auto r = json_reply(200, data);
      r.headers.emplace_back("Cache-Control", "no-store");
      r.reason = "dashboard";
      return respond(std::move(r));
    }
    const auto asset = cost::dashboard_asset(rel);
    if (!asset.found()) return respond(error_reply(404, "no dashboard file " + rel, "not_found"));
    LocalReply r;
    r.body = std::string(asset.content);
    r.content_type = std::string(asset.content_type);
    r.reason = "dashboard";
    respond(std::move(r));
  }, gateway::RouteAccess::kDashboard);
}

}  // namespace

std::map<std::string, std::string> parse_query(const std::string& query) {
  std::map<std::string, std::string> out;
  const auto decode = [](std::string_view s) {
    std::string r;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '+') r.push_back(' ');
      else if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
               std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
        r.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
        i += 2;
      } else r.push_back(s[i]);
    }
    return r;
  };
  std::string_view rest(query);
  while (!rest.empty()) {
    const auto amp = rest.find('&');
    const auto part = rest.substr(0, amp);
    const auto eq = part.find('=');
    if (!part.empty()) out[decode(part.substr(0, eq))] = eq == std::string_view::npos ? "" : decode(part.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    rest.remove_prefix(amp + 1);
  }
  return out;
}

void add_admin_routes(gateway::Gateway& gw, const Components& c) {
  add_cache_routes(gw, c.cache);
  add_scaler_routes(gw, c.scaler);
  add_cost_routes(gw, c.accounting);
  add_dashboard_routes(gw, c);
}

}  // namespace tidegate::app
