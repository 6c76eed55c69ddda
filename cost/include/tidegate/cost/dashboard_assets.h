#pragma once
// The built-in dashboard's static files, embedded in the binary at build time (no CDN, no
// files beside the binary). The gateway serves GET /dashboard/<path> with these and
// GET /dashboard/data.json with CostAccounting::dashboard_snapshot() (merged with its own series).
#include <string_view>

namespace tidegate::cost {

struct DashboardAsset {
  std::string_view content;       // empty when not found
  std::string_view content_type;  // "text/html; charset=utf-8", ...
  bool found() const { return !content_type.empty(); }
};

// `path` is relative to /dashboard/: "", "/", "index.html", "app.js", "style.css".
DashboardAsset dashboard_asset(std::string_view path);

}  // namespace tidegate::cost
