#!/usr/bin/env python3
"""Adds a proxy bench report to bench/RESULTS.md as the newest subsection of the proxy section.

usage: record.py REPORT_JSON [NOTE]
Earlier subsections (hand-written analyses among them) are kept. A report file inside the
repository is linked by its path; one elsewhere is embedded.
"""
import json
import pathlib
import sys

SECTION = "## Proxy overhead (issue 2)"


def render(r, note, report_path):
    high = f"c{r['connections']}"
    lines = [f"### `bench/proxy/run.sh` report ({r['date']}, commit {r['commit']})", "",
             f"Run {r['date']} at commit {r['commit']} on {r['machine']['nproc']} cores "
             f"({r['machine']['cpu']}), load average at the end {r['machine']['load_avg_at_end']}.",
             "The machine is shared with other builds and tests and is noisy: compare the targets "
             "with each other (ratios), not with other machines; tail latencies at concurrency 1 are "
             "dominated by scheduling noise.", "",
             f"Load: {r['load']}; {r['duration_s']} s per point after a 2 s warm-up"
             + (f" ({r['rounds']})" if "rounds" in r else "") + "; "
             f"{r['connections']} connections ({r['wrk_threads']} wrk threads) and 1 connection. "
             f"Upstream: {r['simulator']}. wrk, the proxies and the simulator share the same cores.", "",
             f"| target | req/s at {r['connections']} conns | p50 / p99 at {r['connections']} (µs) | "
             "req/s at 1 conn | p50 / p99 at 1 (µs) | added p50 / p99 at 1 (µs) | "
             f"stream req/s at {r['connections']} | stream p50 / p99 (µs) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name in ["direct", "tidegate", "nginx"]:
        t = r["targets"].get(name)
        if not t:
            lines.append(f"| {name} | skipped | | | | | | |")
            continue
        hi, c1, st = t.get(high, {}), t.get("c1", {}), t.get(f"s{r['connections']}", {})
        add = r["added_latency_at_concurrency_1"].get(name)
        added = f"{add['p50_us']} / {add['p99_us']}" if add else "—"
        lines.append(f"| {name} | {hi.get('rps', 0):,.0f} | {hi.get('p50_us')} / {hi.get('p99_us')} | "
                     f"{c1.get('rps', 0):,.0f} | {c1.get('p50_us')} / {c1.get('p99_us')} | {added} | "
                     f"{st.get('rps', 0):,.0f} | {st.get('p50_us')} / {st.get('p99_us')} |")
    lines += [""]
    lines += cpu_table(r)
    if note:
        lines += [note, ""]
    root = pathlib.Path(__file__).resolve().parent.parent.parent
    try:
        lines += [f"Raw report: `{report_path.resolve().relative_to(root)}`.", ""]
    except ValueError:
        lines += ["Raw report (`bench/proxy/run.sh`):", "", "```json", json.dumps(r, indent=1), "```", ""]
    return "\n".join(lines)


def cpu_table(r):
    """CPU per request of each target (median slice) and tidegate over nginx, when recorded."""
    points = [(f"c{r['connections']}", "non-stream"), (f"s{r['connections']}", "stream")]
    rows = []
    for name in ["direct", "tidegate", "nginx"]:
        t = r["targets"].get(name, {})
        cells = []
        for point, _ in points:
            c = t.get(point, {}).get("cpu_us_per_request")
            cells.append(f"{c['proxy']:.1f} / {c['sim']:.1f} / {c['machine']:.1f}" if c and "proxy" in c
                         else f"— / {c['sim']:.1f} / {c['machine']:.1f}" if c else "—")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    if all(row.endswith("— | — |") for row in rows):
        return []
    lines = [f"CPU per request, µs (proxy / simulator / whole machine), median slice at {r['connections']} connections:",
             "", "| target | " + " | ".join(label for _, label in points) + " |", "| --- | --- | --- |", *rows, ""]
    for key, label in (("tidegate_vs_nginx_cpu_per_request", "non-stream"),
                       ("tidegate_vs_nginx_stream_cpu_per_request", "stream")):
        if key in r:
            q = r[key]
            lines.append(f"tidegate / nginx CPU per request, {label}, median of the rounds: proxy {q['proxy']['median']}, "
                         f"proxy in units of the simulator's CPU {q['proxy_over_sim']['median']}, "
                         f"whole machine {q['machine']['median']} (below 1: tidegate spends less).")
    return lines + [""]


def insert(text, subsection):
    """RESULTS.md text with the subsection first in the proxy section (made if missing)."""
    if SECTION in text:
        at = text.index(SECTION) + len(SECTION)
        return text[:at] + "\n\n" + subsection + "\n" + text[at:].lstrip("\n")
    return text.rstrip("\n") + "\n\n" + SECTION + "\n\n" + subsection


def main():
    report_path = pathlib.Path(sys.argv[1])
    report = json.loads(report_path.read_text())
    note = sys.argv[2] if len(sys.argv) > 2 else ""
    path = pathlib.Path(__file__).resolve().parent.parent / "RESULTS.md"
    text = path.read_text() if path.exists() else "# Benchmark results\n\n"
    path.write_text(insert(text, render(report, note, report_path)))


if __name__ == "__main__":
    main()
