#!/usr/bin/env python3
"""Structural check of configs/grafana/tidegate.json (and the metric names in rules.yml).

Every panel needs a unique id, a gridPos, a Prometheus datasource and at least one target whose
expression names only metrics Tidegate exports; the dashboard needs its datasource variable and
the panels the issue asks for.
"""
import json
import re
import sys

# Metrics Tidegate exports (gateway, cache, cost, scaler). Histograms add _bucket/_sum/_count.
KNOWN = {
    "tidegate_requests_total", "tidegate_request_duration_seconds", "tidegate_time_to_first_byte_seconds",
    "tidegate_cache_lookups_total", "tidegate_cache_savings_usd_total", "tidegate_cost_usd_total",
    "tidegate_replicas", "tidegate_queue_depth", "tidegate_gpu_utilization", "tidegate_scaler_decisions_total",
    # cost extras and the gateway/scaler names the panels and rules also use
    "tidegate_replica_cost_usd_total", "tidegate_tokens_total", "tidegate_budget_spend_usd",
    "tidegate_budget_limit_usd", "tidegate_queue_wait_seconds", "tidegate_scaler_signal",
    "tidegate_replica_prefix_cache_hit_ratio",
    # the cache's online audits (issue 19)
    "tidegate_cache_audit_false_hit_rate", "tidegate_cache_audit_false_hit_rate_upper",
    "tidegate_cache_max_false_hit_rate", "tidegate_cache_audit_judged", "tidegate_cache_audits_total",
    # the scaler's leader election (issue 22)
    "tidegate_scaler_leader",
}
HIST = ("_bucket", "_sum", "_count")
REQUIRED_TITLES = ["requests / s", "p50 / p99", "first token", "cache hit ratio", "saved", "cost by tenant",
                   "cost by model", "replicas by state", "queue depth", "gpu utilisation", "scaler decisions",
                   "prefix-cache hit ratio", "audited false-hit rate"]


def metric_names(expr):
    names = set()
    for m in re.finditer(r"\b(tidegate_[a-z0-9_]+)\b", expr):
        n = m.group(1)
        if expr[m.end():m.end() + 1] == ":":  # a recording rule name like tidegate:x:y
            continue
        for s in HIST:
            if n.endswith(s) and n[: -len(s)] in KNOWN:
                n = n[: -len(s)]
        names.add(n)
    return names


def main(dashboard_path, rules_path):
    errors = []
    d = json.load(open(dashboard_path))
    for key in ("title", "uid", "panels", "templating", "schemaVersion"):
        if key not in d:
            errors.append("dashboard has no %s" % key)
    variables = {v.get("name"): v for v in d.get("templating", {}).get("list", [])}
    if variables.get("datasource", {}).get("type") != "datasource":
        errors.append("no datasource template variable")
    panels = []
    stack = list(d.get("panels", []))
    while stack:
        p = stack.pop(0)
        panels.append(p)
        stack.extend(p.get("panels", []))  # rows
    ids = [p.get("id") for p in panels]
    if len(ids) != len(set(ids)) or None in ids:
        errors.append("panel ids missing or not unique: %s" % ids)
    titles = []
    for p in panels:
        if p.get("type") == "row":
            continue
        name = "panel %s (%s)" % (p.get("id"), p.get("title"))
        titles.append(p.get("title", "").lower())
        ds = p.get("datasource")
        if not isinstance(ds, dict) or ds.get("type") != "prometheus" or not ds.get("uid"):
            errors.append(name + ": no prometheus datasource")
        g = p.get("gridPos", {})
        if not all(isinstance(g.get(k), int) for k in ("x", "y", "w", "h")) or g.get("x", 0) + g.get("w", 0) > 24:
            errors.append(name + ": bad gridPos %s" % g)
        targets = p.get("targets") or []
        if not targets:
            errors.append(name + ": no targets")
        refs = [t.get("refId") for t in targets]
        if len(refs) != len(set(refs)):
            errors.append(name + ": duplicate refIds")
        for t in targets:
            expr = t.get("expr", "")
            names = metric_names(expr)
            if not names:
                errors.append(name + ": target %s queries no tidegate metric" % t.get("refId"))
            for n in names - KNOWN:
                errors.append(name + ": unknown metric %s" % n)
            if expr.count("(") != expr.count(")"):
                errors.append(name + ": unbalanced parentheses in %s" % expr)
    for want in REQUIRED_TITLES:
        if not any(want in t for t in titles):
            errors.append("no panel titled like %r" % want)
    rules = open(rules_path).read()
    for line in rules.splitlines():
        if line.strip().startswith(("summary", "description", "#")):
            continue
        for n in metric_names(line) - KNOWN:
            errors.append("rules.yml: unknown metric %s" % n)
    if errors:
        print("FAIL\n" + "\n".join(errors))
        return 1
    print("ok: %d panels" % len(panels))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
