// Tidegate built-in dashboard: polls data.json every 2 s and draws each series on a canvas.
// data.json: {t, step_s, totals: {name: number}, series: {name: {title, unit, stacked,
// lines: {label: [[t, value|null], ...]}}}}. Known series get fixed places; any other series the
// JSON carries is drawn after them, so the gateway, cache and scaler can add figures freely.
(function () {
  "use strict";
  var KNOWN = ["requests_per_s", "latency_p50_s", "latency_p99_s", "ttfb_s", "cache_hit_ratio", "cache_savings",
    "cost_by_tenant", "cost_by_model", "replicas_by_state", "queue_depth", "gpu_utilization",
    "scaler_decisions", "tokens_per_s"];
  var TILES = [
    ["bill_usd", "Bill", "usd"], ["request_usd", "Requests", "usd"], ["idle_usd", "Idle", "usd"],
    ["standby_usd", "Standby", "usd"], ["idle_share", "Idle share", "pct"],
    ["cache_savings_usd", "Cache savings", "usd"], ["requests", "Model calls", "int"],
    ["cache_hits", "Cache hits", "int"], ["in_flight", "In flight", "int"], ["pending_usd", "Unsettled", "usd"],
    ["clock_regressions", "Clock regressions", "int"]];
  var COLORS = ["#0f766e", "#2563eb", "#d97706", "#7c3aed", "#dc2626", "#0891b2", "#65a30d", "#db2777",
    "#475569", "#ca8a04"];
  var panels = {};
  var updates = 0;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function fmt(v, unit) {
    if (v === null || v === undefined || !isFinite(v)) return "–";
    if (unit === "usd" || unit === "$/h") {
      var a = Math.abs(v);
      var s = v === 0 ? "0" : a >= 100 ? v.toFixed(0) : a >= 1 ? v.toFixed(2) : a >= 0.01 ? v.toFixed(3) : v.toPrecision(2);
      return "$" + s + (unit === "$/h" ? "/h" : "");
    }
    if (unit === "pct" || unit === "ratio") return (v * 100).toFixed(unit === "pct" ? 1 : 0) + "%";
    if (unit === "int") return Math.round(v).toLocaleString("en-US");
    if (unit === "s") return v === 0 ? "0" : v < 1 ? (v * 1000).toPrecision(3) + " ms" : v.toPrecision(3) + " s";
    var b = Math.abs(v);
    if (b >= 1e6) return (v / 1e6).toFixed(1) + "M";
    if (b >= 1e3) return (v / 1e3).toFixed(1) + "k";
    if (b >= 10 || v === 0) return v.toFixed(0);
    return v.toPrecision(2);
  }

  function clock(t) {
    if (typeof t !== "number" || !isFinite(t)) return "--:--:--";
    var d = new Date(t * 1000);
    function p(n) { return (n < 10 ? "0" : "") + n; }
    return p(d.getUTCHours()) + ":" + p(d.getUTCMinutes()) + ":" + p(d.getUTCSeconds());
  }

  function renderTiles(totals) {
    var box = document.getElementById("tiles");
    box.textContent = "";
    var seen = {};
    TILES.forEach(function (spec) {
      if (!(spec[0] in totals)) return;
      seen[spec[0]] = true;
      addTile(box, spec[1], fmt(totals[spec[0]], spec[2]), spec[0]);
    });
    Object.keys(totals).sort().forEach(function (k) {
      if (seen[k] || typeof totals[k] !== "number") return;
      addTile(box, k.replace(/_/g, " "), fmt(totals[k], /_usd$/.test(k) ? "usd" : ""), k);
    });
  }

  function addTile(box, label, value, key) {
    var t = el("div", "tile");
    t.dataset.key = key;
    t.appendChild(el("div", "label", label));
    t.appendChild(el("div", "value", value));
    box.appendChild(t);
  }

  function panelFor(name, s) {
    if (panels[name]) return panels[name];
    var p = el("div", "panel");
    p.id = "panel-" + name;
    p.dataset.series = name;
    var h = el("h2");
    h.appendChild(el("span", "title", s.title || name.replace(/_/g, " ")));
    h.appendChild(el("span", "unit", s.unit || ""));
    p.appendChild(h);
    var c = el("canvas");
    p.appendChild(c);
    var legend = el("div", "legend");
    p.appendChild(legend);
    panels[name] = { root: p, canvas: c, legend: legend };
    return panels[name];
  }

  function order(series) {
    var names = KNOWN.filter(function (n) { return n in series; });
    Object.keys(series).sort().forEach(function (n) { if (KNOWN.indexOf(n) < 0) names.push(n); });
    return names;
  }

  // view: {t, window_s} of the data.json being drawn, for an axis with no points to span.
  function draw(panel, s, view) {
    var lines = s.lines || {};
    var names = Object.keys(lines).sort();
    var canvas = panel.canvas;
    var dpr = window.devicePixelRatio || 1;
    var w = canvas.clientWidth || 360, h = canvas.clientHeight || 170;
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
    var g = canvas.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    var pad = { l: 56, r: 8, t: 6, b: 20 };
    var tmin = Infinity, tmax = -Infinity, vmax = 0, points = 0;
    var stackedSums = {};
    names.forEach(function (n) {
      lines[n].forEach(function (p) {
        tmin = Math.min(tmin, p[0]);
        tmax = Math.max(tmax, p[0]);
        if (p[1] === null) return;
        points++;
        if (s.stacked) {
          stackedSums[p[0]] = (stackedSums[p[0]] || 0) + p[1];
          vmax = Math.max(vmax, stackedSums[p[0]]);
        } else {
          vmax = Math.max(vmax, p[1]);
        }
      });
    });
    panel.root.dataset.points = String(points);
    panel.root.dataset.lines = String(names.length);
    if (s.unit === "ratio") vmax = Math.max(vmax, 1);
    if (vmax <= 0) vmax = 1;
    vmax *= 1.1;
    if (!isFinite(tmin) || !isFinite(tmax)) {
      // No point yet (a gateway that just started): span the window data.json covers, ending
      // now, rather than an axis made of Infinity (which printed as NaN:NaN:NaN).
      tmax = typeof view.t === "number" && isFinite(view.t) ? view.t : Date.now() / 1000;
      tmin = tmax - (view.window_s > 0 ? view.window_s : 600);
    } else if (tmax <= tmin) {
      tmin = tmax - 1;
    }
    var x = function (t) { return pad.l + (t - tmin) / (tmax - tmin) * (w - pad.l - pad.r); };
    var y = function (v) { return h - pad.b - v / vmax * (h - pad.t - pad.b); };
    g.font = "11px system-ui, sans-serif";
    g.fillStyle = "#6b7785";
    g.strokeStyle = "#e3e8ef";
    g.lineWidth = 1;
    var yLabels = [];
    for (var i = 0; i <= 3; i++) {
      var v = vmax / 1.1 * i / 3;
      var yy = Math.round(y(v)) + 0.5;
      g.beginPath(); g.moveTo(pad.l, yy); g.lineTo(w - pad.r, yy); g.stroke();
      g.textAlign = "right"; g.textBaseline = "middle";
      yLabels.push(fmt(v, s.unit === "$/h" ? "usd" : s.unit));
      g.fillText(yLabels[i], pad.l - 6, yy);
    }
    g.textBaseline = "alphabetic";
    var xLabels = [clock(tmin), clock(tmax)];
    g.textAlign = "left"; g.fillText(xLabels[0], pad.l, h - 4);
    g.textAlign = "right"; g.fillText(xLabels[1], w - pad.r, h - 4);
    if (!points && names.length) {  // lines but only gaps; with no lines the legend says it
      g.textAlign = "center"; g.textBaseline = "middle";
      g.fillText("no data yet", (pad.l + w - pad.r) / 2, (pad.t + h - pad.b) / 2);
    }
    // Canvas text is not in the DOM: the labels drawn are, for tests and for screen readers.
    panel.root.dataset.xAxis = xLabels.join(" – ");
    panel.root.dataset.yAxis = yLabels.join(" | ");
    panel.canvas.setAttribute("aria-label", (s.title || "") + ", " + xLabels.join(" to ") + " UTC" +
      (points ? "" : ", no data yet"));
    var base = {};
    panel.legend.textContent = "";
    names.forEach(function (n, idx) {
      var color = COLORS[idx % COLORS.length];
      var pts = lines[n];
      g.beginPath();
      var started = false, top = [];
      pts.forEach(function (p) {
        if (p[1] === null) { started = false; return; }
        var b0 = s.stacked ? (base[p[0]] || 0) : 0;
        var v = b0 + p[1];
        top.push([p[0], b0, v]);
        if (!started) { g.moveTo(x(p[0]), y(v)); started = true; } else { g.lineTo(x(p[0]), y(v)); }
      });
      g.strokeStyle = color;
      g.lineWidth = 1.8;
      g.lineJoin = "round";
      g.stroke();
      // A point with gaps on both sides draws no line: mark it with a dot so sparse traffic shows.
      pts.forEach(function (p, k) {
        if (p[1] === null) return;
        var prev = k > 0 ? pts[k - 1][1] : null, next = k + 1 < pts.length ? pts[k + 1][1] : null;
        if (prev !== null || next !== null) return;
        var b0 = s.stacked ? (base[p[0]] || 0) : 0;
        g.beginPath(); g.arc(x(p[0]), y(b0 + p[1]), 2.5, 0, 2 * Math.PI); g.fillStyle = color; g.fill();
      });
      if (s.stacked && top.length > 1) {
        g.beginPath();
        top.forEach(function (q, k) { if (k === 0) g.moveTo(x(q[0]), y(q[2])); else g.lineTo(x(q[0]), y(q[2])); });
        for (var k = top.length - 1; k >= 0; k--) g.lineTo(x(top[k][0]), y(top[k][1]));
        g.closePath();
        g.globalAlpha = 0.18; g.fillStyle = color; g.fill(); g.globalAlpha = 1;
        top.forEach(function (q) { base[q[0]] = q[2]; });
      }
      var last = null;
      for (var j = pts.length - 1; j >= 0; j--) if (pts[j][1] !== null) { last = pts[j][1]; break; }
      var item = el("span", null, n + " " + fmt(last, s.unit));
      item.style.setProperty("--c", color);
      panel.legend.appendChild(item);
    });
    if (!names.length) panel.legend.appendChild(el("span", "empty", "no data yet"));
  }

  function render(data) {
    renderTiles(data.totals || {});
    var box = document.getElementById("panels");
    var series = data.series || {};
    order(series).forEach(function (name) {
      var p = panelFor(name, series[name]);
      if (p.root.parentNode !== box) box.appendChild(p.root);
      // 120 points: the window of a cost section left at its defaults (live_points).
      draw(p, series[name], { t: data.t, window_s: data.window_s || (data.step_s > 0 ? data.step_s * 120 : 0) });
    });
    updates++;
    document.body.dataset.updates = String(updates);
    document.body.dataset.status = "ok";
    document.body.dataset.panels = String(box.children.length);
    var st = document.getElementById("status");
    st.className = "status ok";
    st.textContent = "live · " + (data.t ? clock(data.t) + " UTC" : "");
  }

  function fail(msg) {
    document.body.dataset.status = "error";
    var st = document.getElementById("status");
    st.className = "status error";
    st.textContent = "no data: " + msg;
  }

  function poll() {
    fetch(new URL("data.json", window.location.href).toString(), { cache: "no-store" })
      .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
      .then(render)
      .catch(function (e) { fail(e && e.message ? e.message : String(e)); })
      .then(function () { window.setTimeout(poll, 2000); });
  }

  poll();
})();
