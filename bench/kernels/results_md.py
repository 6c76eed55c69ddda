#!/usr/bin/env python3
"""Turns the JSON written by gpu_check.sh into a Markdown section for bench/RESULTS.md."""
import glob
import json
import os
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def fmt(v, digits=1):
    return f"{v:,.{digits}f}" if isinstance(v, (int, float)) else str(v)


def search_rows(doc):
    plan = (doc or {}).get("gpu_search_plan", "default")
    for size in (doc or {}).get("search", {}).get("sizes", []):
        n = size["entries"]
        for engine in ("gpu_flat", "faiss_flat", "faiss_hnsw"):
            e = size.get(engine, {})
            if "skipped" in e:  # the steps line says what was left out
                continue
            label = f"gpu_flat ({plan} plan)" if engine == "gpu_flat" else engine
            for b in e.get("batches", []):
                frac = b.get("fraction_of_copy_bandwidth")
                kfrac = b.get("kernel_fraction_of_copy_bandwidth")
                bw = "-" if frac is None else f"{fmt(frac * 100)}% (kernels {fmt(kfrac * 100)}%)" if kfrac else f"{fmt(frac * 100)}%"
                yield (f"| {n:,} | {label} | {b['batch']} | {fmt(b['queries_per_s'])} | {fmt(b['mean_ms'], 3)} | "
                       f"{fmt(b['p99_ms'], 3)} | {bw} | recall@k {fmt(e.get('recall_at_k_vs_faiss_flat', '-'), 4)} |")


def main(out):
    summary = load(os.path.join(out, "summary.json")) or {}
    print(f"### GPU path (kernels), {summary.get('date', '?')} on {summary.get('host', '?')}: "
          f"{summary.get('gpu') or 'no GPU'}\n")
    gpu_info = None
    for path in sorted(glob.glob(os.path.join(out, "bench_*.json"))):
        doc = load(path)
        if doc and isinstance(doc.get("gpu"), dict) and "name" in doc["gpu"]:
            gpu_info = doc["gpu"]
    if gpu_info:
        print(f"Device: {gpu_info['name']} (sm {gpu_info['compute_capability']}), measured D2D copy "
              f"{fmt(gpu_info['d2d_copy_gbps_read_plus_write'])} GB/s (read + write).\n")
    print("Bandwidth column: entries x dim x 2 bytes / mean call time (kernels: / device time of the scan and merge "
          "kernels), as a fraction of the measured D2D copy rate.\n")
    print("| entries | engine | batch | queries/s | mean ms | p99 ms | of copy bandwidth | notes |")
    print("|---|---|---|---|---|---|---|---|")
    enc = {}
    for path in sorted(glob.glob(os.path.join(out, "bench_*.json"))):
        doc = load(path) or {}
        for row in search_rows(doc):
            print(row)
        if isinstance(doc.get("encoder"), dict):
            enc = doc["encoder"]
    print("\n| encoder | tokens | batch | prompts/s |")
    print("|---|---|---|---|")
    for engine in ("gpu_minilm", "cpu_minilm"):
        rows = enc.get(engine, [])
        if isinstance(rows, dict):
            print(f"| {engine} | - | - | skipped: {rows.get('skipped')} |")
            continue
        for r in rows:
            extra = f" ({r['caller_threads']} caller threads)" if "caller_threads" in r else ""
            print(f"| {engine}{extra} | {r['tokens']} | {r['batch']} | {fmt(r['prompts_per_s'])} |")
    c = enc.get("gpu_minilm_64_concurrent_single_prompt_callers")
    if c:
        print(f"| gpu_minilm, 64 concurrent 1-prompt callers (micro-batched) | {c['tokens']} | <=64 | "
              f"{fmt(c['prompts_per_s'])} |")
    print("\nSteps: " + ", ".join(f"{s['step']}: {s['status']}" for s in summary.get("steps", [])))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
