#!/usr/bin/env python3
"""Writes a proxy bench report into bench/RESULTS.md, replacing the section it owns.

usage: record.py REPORT_JSON [NOTE]
"""
import json
import pathlib
import sys

SECTION = "## Proxy overhead (issue 2)"


def render(r, note):
    high = f"c{r['connections']}"
    lines = [SECTION, "",
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
    if note:
        lines += [note, ""]
    lines += ["Raw report (`bench/proxy/run.sh`):", "", "```json", json.dumps(r, indent=1), "```", ""]
    return "\n".join(lines)


def main():
    report = json.loads(pathlib.Path(sys.argv[1]).read_text())
    note = sys.argv[2] if len(sys.argv) > 2 else ""
    path = pathlib.Path(__file__).resolve().parent.parent / "RESULTS.md"
    text = path.read_text() if path.exists() else "# Benchmark results\n\n"
    section = render(report, note)
    if SECTION in text:
        start = text.index(SECTION)
        nxt = text.find("\n## ", start + len(SECTION))
        text = text[:start] + section + (text[nxt + 1:] if nxt >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


if __name__ == "__main__":
    main()
