#!/usr/bin/env python3
"""What the semantic cache saves on a stream of questions (issue 19, "Measured: Savings").

A workload is built from labelled Quora pairs that the pair verifier was neither trained nor
calibrated on, and replayed through the real gateway (`tidegate` with configs/bench-cache.yaml,
its listen address and replica URLs rewritten to 127.0.0.1 and free ports) in front of
`tidegate-sim --echo` replicas, twice with the same stream:

  before  the old default: cosine `threshold: 0.99` (the file's own setting), no verifier;
  after   the pair verifier: `max_false_hit_rate` (default 0.10, the lowest rate the shipped
          calibration certifies) in place of `threshold`.

Both runs add a `cost:` section that prices the model as a paid API (per token, so dollars do not
depend on this machine's speed) and `cache.audit` with a raised `fraction`, so the audited false-hit
rate has a sample. Nothing else of the file changes.

Workload (`quora_dev.csv`, 0-based data rows; see bench/RESULTS.md for why these rows):
  * only odd rows (the evaluator fits the cosine/verifier combination on rows 0 mod 4 and
    calibrates on rows 2 mod 4; odd rows are never used to fit or calibrate), and of those only
    pairs neither of whose questions appears in an even row; quora_train.csv shares no question
    with quora_dev.csv (shared/data/README.md), so no question was trained on;
  * pairs are drawn with a fixed seed so that no question is in two chosen pairs;
  * a duplicate pair gives a paraphrase: one question, later the other (which one first: a coin);
    a non-duplicate pair gives a trap: one question, later its labelled non-duplicate neighbour
    (a hit on it is a false hit); some questions are asked again verbatim later (exact repeats);
  * event times are drawn uniformly (pairs: two draws, the earlier goes first; a repeat: after
    its original), then sorted: one fixed order for both runs.

The client sends the stream one request at a time (chat, `max_tokens: 1`, `temperature: 0`),
and after a miss waits (bounded) until the cache has stored the answer, so every request sees
every earlier answer. `--echo` answers with the user message verbatim and `max_tokens: 1` adds
nothing after it, so a hit's answer is the text of the question it was cached for: a hit is
right when that question is the request itself or a labelled duplicate of it (duplicate edges of
all of quora_dev.csv, closed transitively), wrong when the two are labelled non-duplicates,
and unlabelled otherwise (reported apart; counted wrong in the strict rate).

Figures per run: hit rate, false-hit rate from the labels, the audited false-hit rate and its
bound from /admin/cache/stats, model calls (the simulators' request counters; audits included),
dollars from /admin/costs (cache savings, request spend, audit spend) and the sum of the
x-tidegate-cost-usd headers the client got. Audits are sampled deterministically (one hit in
1/fraction: with fraction 0.25 every 4th hit), so the audited hits are known; the judge's false
verdicts are logged with the entry id (`cache.audit_false_hit`), which gives, per audited hit,
the judge's verdict next to the label.

Usage (from the source root; about 5 minutes for both runs on the 2-core box):
  .venv/bin/python bench/cache/savings_replay.py build-lease/bin/tidegate build-lease/bin/tidegate-sim \
      --json bench/cache/results/savings.json
"""
import argparse
import csv
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time

import httpx

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DEADLINE_S = 30  # every wait is bounded
CACHE_LOOKUP_USD = 0.00001  # cost.cache_lookup_usd's default (not set here): what the gateway bills a hit


def norm(s):
    return " ".join(s.split())


# ----------------------------------------------------------------------------- workload

class Clusters:
    """Union-find over questions joined by a duplicate label (all of quora_dev.csv)."""

    def __init__(self):
        self.parent = {}

    def find(self, q):
        self.parent.setdefault(q, q)
        while self.parent[q] != q:
            self.parent[q] = self.parent[self.parent[q]]
            q = self.parent[q]
        return q

    def union(self, a, b):
        self.parent[self.find(a)] = self.find(b)


def build_workload(pairs_csv, n_dup, n_trap, n_repeat, seed):
    with open(pairs_csv, newline="", encoding="utf-8") as f:
        rows = [(norm(r["question1"]), norm(r["question2"]), int(r["is_duplicate"])) for r in csv.DictReader(f)]
    clusters = Clusters()
    non_dup = set()
    for a, b, y in rows:
        if y:
            clusters.union(a, b)
        else:
            non_dup.add((a, b))
            non_dup.add((b, a))
    even = {q for i, (a, b, _) in enumerate(rows) if i % 2 == 0 for q in (a, b)}
    usable = [(i, a, b, y) for i, (a, b, y) in enumerate(rows)
              if i % 2 == 1 and a not in even and b not in even and a != b and a and b]
    rng = random.Random(seed)
    rng.shuffle(usable)
    used, dups, traps = set(), [], []
    for i, a, b, y in usable:
        want = dups if y else traps
        if len(want) >= (n_dup if y else n_trap) or a in used or b in used:
            continue
        used.update((a, b))
        want.append((i, a, b))
    if len(dups) < n_dup or len(traps) < n_trap:
        raise SystemExit(f"not enough pairs: {len(dups)} duplicates, {len(traps)} non-duplicates")
    events = []  # (time, kind, text, partner text or None, source row)
    for kind, chosen in (("paraphrase", dups), ("trap", traps)):
        for i, a, b in chosen:
            if rng.random() < 0.5:
                a, b = b, a
            t1, t2 = sorted((rng.random(), rng.random()))
            events.append((t1, "first", a, None, i))
            events.append((t2, kind, b, a, i))
    firsts = [e for e in events if e[1] == "first"]
    for e in rng.sample(firsts + [e for e in events if e[1] != "first"], n_repeat):
        events.append((e[0] + (1 - e[0]) * rng.random(), "repeat", e[2], e[2], e[4]))
    events.sort(key=lambda e: e[0])
    stream = [{"kind": k, "text": t, "partner": p, "row": r} for _, k, t, p, r in events]
    label = {"clusters": clusters, "non_dup": non_dup}
    return stream, label, {"pairs_csv": os.path.basename(pairs_csv), "rows": len(rows), "usable_odd_rows": len(usable),
                           "duplicate_pairs": n_dup, "non_duplicate_pairs": n_trap, "exact_repeats": n_repeat,
                           "requests": len(stream), "seed": seed}


def judge_label(label, request, source):
    """right | wrong | unlabelled: may `source`'s answer be served for `request`?"""
    if request == source:
        return "right"
    if label["clusters"].find(request) == label["clusters"].find(source):
        return "right"
    if (request, source) in label["non_dup"]:
        return "wrong"
    return "unlabelled"


# ----------------------------------------------------------------------------- processes

class Proc:
    def __init__(self, args, log_path, what):
        self.what = what
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE if what == "sim" else subprocess.DEVNULL,
                                     stderr=self.log, text=True, cwd=ROOT)

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if self.proc.stdout:
            self.proc.stdout.close()
        self.log.close()


def start_sim(binary, tmp, n):
    p = Proc([binary, "--port", "0", "--model", "sim", "--echo", "--ttft-ms", "2", "--tpot-ms", "1",
              "--seed", str(n + 1)], os.path.join(tmp, f"sim{n}.log"), "sim")
    line = p.proc.stdout.readline()
    m = re.search(r"listening on 127\.0\.0\.1:(\d+)", line or "")
    if not m:
        p.close()
        raise RuntimeError(f"tidegate-sim did not start: {line!r}")
    p.port = int(m.group(1))
    return p


def gateway_config(base_yaml, sim_ports, run, audit_fraction, prices):
    text = open(base_yaml, encoding="utf-8").read()

    def sub(pattern, repl):
        nonlocal text
        text, n = re.subn(pattern, repl, text, count=1, flags=re.M)
        if n != 1:
            raise RuntimeError(f"configs/bench-cache.yaml changed: no match for {pattern!r}")

    sub(r'^listen: "127\.0\.0\.1:\d+"', 'listen: "127.0.0.1:0"')
    replicas = "".join(f'      - {{id: sim-{i}, url: "http://127.0.0.1:{p}"}}\n' for i, p in enumerate(sim_ports))
    sub(r'^      - \{id: sim-0, url: "http://127\.0\.0\.1:\d+"\}\n', replicas.replace("\\", "\\\\"))
    # Relative model_dir is read from the config file's folder; the copy lives elsewhere.
    sub(r"model_dir: \.\./third_party/models/all-MiniLM-L6-v2",
        "model_dir: " + os.path.join(ROOT, "third_party", "models", "all-MiniLM-L6-v2"))
    if run["max_false_hit_rate"] is not None:
        sub(r"^  threshold: 0\.99 .*$", f"  max_false_hit_rate: {run['max_false_hit_rate']}   # savings_replay: after")
    elif not re.search(r"^  threshold: 0\.99 ", text, flags=re.M):
        raise RuntimeError("configs/bench-cache.yaml no longer sets threshold: 0.99")
    text += f"  audit: {{fraction: {audit_fraction}}}   # savings_replay: audits raised from 0.01\n"
    text += ("cost:   # savings_replay: the model priced as a paid API, per token\n"
             f"  api_models: {{sim: {{input_usd_per_1m: {prices[0]}, output_usd_per_1m: {prices[1]}}}}}\n")
    return text


def start_gateway(binary, config_path, tmp):
    log = os.path.join(tmp, "gateway.log")
    g = Proc([binary, "--config", config_path], log, "gateway")
    end = time.monotonic() + 120  # MiniLM and the verifier load first
    while time.monotonic() < end:
        if g.proc.poll() is not None:
            g.close()
            raise RuntimeError("gateway exited:\n" + open(log).read()[-3000:])
        with open(log) as f:
            for line in f:
                if '"gateway.listening"' in line:
                    g.port = json.loads(line)["port"]
                    return g
        time.sleep(0.1)
    g.close()
    raise RuntimeError("gateway did not listen within 120 s:\n" + open(log).read()[-3000:])


# ----------------------------------------------------------------------------- metrics

def scrape(url):
    out = {}
    for line in httpx.get(url + "/metrics", timeout=10).text.splitlines():
        m = re.match(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? ([-+0-9.eE]+|NaN|[+-]Inf)$", line)
        if m:
            labels = tuple(sorted(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or "")))
            out[(m.group(1), labels)] = float(m.group(3))
    return out


def msum(metrics, name, **want):
    return sum(v for (n, ls), v in metrics.items() if n == name and set(want.items()) <= set(ls))


def clopper_pearson(k, n, conf=0.95):
    """Two-sided interval by bisection on the binomial tail (no scipy)."""
    if n == 0:
        return (0.0, 1.0)

    def cdf(x, p):  # P(X <= x)
        return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(x + 1))

    def solve(f):
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) else (lo, mid)
        return (lo + hi) / 2

    a = (1 - conf) / 2
    low = 0.0 if k == 0 else solve(lambda p: 1 - cdf(k - 1, p) < a)
    high = 1.0 if k == n else solve(lambda p: cdf(k, p) > a)
    return (low, high)


# ----------------------------------------------------------------------------- one run

def replay(args, run, stream, label):
    tmp = tempfile.mkdtemp(prefix=f"tidegate-savings-{run['name']}-")
    sims, gw = [], None
    try:
        for n in range(args.replicas):
            sims.append(start_sim(args.sim, tmp, n))
        config_path = os.path.join(tmp, "gateway.yaml")
        with open(config_path, "w") as f:
            f.write(gateway_config(os.path.join(ROOT, "configs", "bench-cache.yaml"), [s.port for s in sims], run,
                                   args.audit_fraction, args.prices))
        gw = start_gateway(args.tidegate, config_path, tmp)
        url = f"http://127.0.0.1:{gw.port}"
        records = []
        started = time.monotonic()
        with httpx.Client(base_url=url, timeout=DEADLINE_S) as c:
            def stored():
                return c.get("/admin/cache/stats").json()["entries"]

            entries, stored_texts = stored(), set()
            for i, ev in enumerate(stream):
                body = {"model": "sim", "messages": [{"role": "user", "content": ev["text"]}], "max_tokens": 1,
                        "temperature": 0}
                t0 = time.perf_counter()
                r = c.post("/v1/chat/completions", json=body)
                ms = (time.perf_counter() - t0) * 1e3
                if r.status_code != 200:
                    raise RuntimeError(f"request {i}: {r.status_code} {r.text[:300]}")
                verdict = r.headers.get("x-tidegate-cache")
                content = r.json()["choices"][0]["message"]["content"]
                rec = {"i": i, "kind": ev["kind"], "verdict": verdict, "ms": round(ms, 2),
                       "cost_usd": float(r.headers.get("x-tidegate-cost-usd", "0") or 0)}
                if verdict == "hit":
                    rec["entry"] = r.headers.get("x-tidegate-cache-entry")
                    rec["similarity"] = float(r.headers.get("x-tidegate-cache-similarity", "nan"))
                    if r.headers.get("x-tidegate-cache-probability"):
                        rec["probability"] = float(r.headers["x-tidegate-cache-probability"])
                    rec["source"] = norm(content)
                    rec["label"] = judge_label(label, norm(ev["text"]), rec["source"])
                    if rec["label"] != "right":
                        rec["text"], rec["cached"] = ev["text"], content
                elif verdict == "miss" and ev["text"] not in stored_texts:
                    # The answer is stored after it went out: wait until the cache has it, so the
                    # next request sees it (a text stored before replaces its entry: no growth).
                    end = time.monotonic() + 10
                    while time.monotonic() < end:
                        now = stored()
                        if now > entries:
                            entries = now
                            break
                        time.sleep(0.005)
                    else:
                        rec["not_stored"] = True
                    stored_texts.add(ev["text"])
                records.append(rec)
            replay_s = time.monotonic() - started
            # Audits run behind the hits: wait until none is in flight and the count is steady.
            end = time.monotonic() + 60
            last = None
            while time.monotonic() < end:
                s = c.get("/admin/cache/stats").json()
                m = scrape(url)
                done = msum(m, "tidegate_cache_audits_total")
                if s["audit"]["in_flight"] == 0 and done == last:
                    break
                last = done
                time.sleep(0.5)
            time.sleep(1.5)  # the cost totals are published about once a second
            stats = c.get("/admin/cache/stats").json()
            costs = {by: c.get("/admin/costs", params={"by": by, "format": "json"}).json() for by in ("tenant", "model")}
            metrics = scrape(url)
        sim_calls = sum(msum(scrape(f"http://127.0.0.1:{s.port}"), "vllm:request_success_total") for s in sims)
        gw.close()
        glog = open(gw.log_path).read()
        gw = None
        return summarise(args, run, stream, records, stats, costs, metrics, sim_calls, glog, replay_s)
    finally:
        if gw:
            gw.close()
        for s in sims:
            s.close()


def summarise(args, run, stream, records, stats, costs, metrics, sim_calls, glog, replay_s):
    n = len(records)
    hits = [r for r in records if r["verdict"] == "hit"]
    by_label = {k: sum(1 for h in hits if h["label"] == k) for k in ("right", "wrong", "unlabelled")}
    by_kind = {}
    for kind in ("first", "paraphrase", "trap", "repeat"):
        rs = [r for r in records if r["kind"] == kind]
        hs = [r for r in rs if r["verdict"] == "hit"]
        by_kind[kind] = {"requests": len(rs), "hits": len(hs),
                         "hit_rate": len(hs) / len(rs) if rs else 0.0,
                         "right": sum(1 for h in hs if h["label"] == "right"),
                         "wrong": sum(1 for h in hs if h["label"] == "wrong"),
                         "unlabelled": sum(1 for h in hs if h["label"] == "unlabelled")}
    labelled = by_label["right"] + by_label["wrong"]
    # Hits on another question's entry (what the semantic tiers add; exact repeats excluded).
    semantic = [h for h in hits if h["source"] != norm(stream[h["i"]]["text"])]
    sem_wrong = sum(1 for h in semantic if h["label"] == "wrong")
    sem_labelled = sum(1 for h in semantic if h["label"] != "unlabelled")
    # Which hits the auditor sampled: the credit gains `fraction` per hit, one audit at each 1.
    credit, audited = 0.0, []
    for h in hits:
        credit += args.audit_fraction
        if credit >= 1:
            credit -= 1
            audited.append(h)
    false_logs = []
    for line in glog.splitlines():
        if '"cache.audit_false_hit"' in line:
            try:
                false_logs.append(json.loads(line))
            except ValueError:
                pass
    pending = list(false_logs)
    judge_vs_label = {"right_judged_right": 0, "right_judged_false": 0, "wrong_judged_right": 0,
                      "wrong_judged_false": 0, "unlabelled_judged_right": 0, "unlabelled_judged_false": 0}
    disagreements = []
    for h in audited:
        match = next((x for x in pending if str(x.get("entry")) == str(h["entry"])), None)
        if match is not None:
            pending.remove(match)
        verdict = "false" if match is not None else "right"
        judge_vs_label[f"{h['label']}_judged_{verdict}"] += 1
        if (verdict == "false") != (h["label"] == "wrong"):
            disagreements.append({"label": h["label"], "judge": verdict, "request_kind": h["kind"],
                                  "similarity": h["similarity"], "probability": h.get("probability"),
                                  "answer_similarity": match.get("answer_similarity") if match else None,
                                  "request": h.get("text"), "cached": h.get("cached")})
    audit = stats.get("audit", {})
    pool = (audit.get("models") or {}).get("sim", {})
    outcomes = {o: msum(metrics, "tidegate_cache_audits_total", outcome=o)
                for o in ("correct", "false_hit", "dropped_busy", "dropped_error", "dropped_timeout", "dropped_shutdown")}
    tiers = {f"{dict(ls)['tier']}/{dict(ls)['outcome']}": v for (name, ls), v in metrics.items()
             if name == "tidegate_cache_tier_total"}
    tenants = {row["tenant"]: row for row in costs["tenant"]["rows"]}
    client = tenants.get("anonymous", {})
    audit_row = tenants.get("(audit)", {})

    def list_price(row):
        return (row.get("prompt_tokens", 0) * args.prices[0] + row.get("completion_tokens", 0) * args.prices[1]) / 1e6

    saved = costs["model"]["totals"]["cache_savings_usd"]
    model_spend = list_price(client)
    audit_spend = list_price(audit_row)
    lo, hi = clopper_pearson(by_label["wrong"], labelled)
    strict_lo, strict_hi = clopper_pearson(by_label["wrong"] + by_label["unlabelled"], len(hits))
    judged = pool.get("judged", 0)
    a_lo, a_hi = clopper_pearson(pool.get("false_hits", 0), judged)
    verifier_hits = [h for h in hits if "probability" in h]
    return {
        "run": run["name"], "cache": run["describe"],
        "requests": n, "hits": len(hits), "hit_rate": len(hits) / n,
        "hits_by_label": by_label, "by_kind": by_kind,
        "false_hit_rate_labelled": by_label["wrong"] / labelled if labelled else 0.0,
        "false_hit_rate_labelled_ci95": [lo, hi],
        "semantic_hits": len(semantic), "semantic_hits_wrong": sem_wrong, "semantic_hits_labelled": sem_labelled,
        "semantic_false_hit_rate": sem_wrong / sem_labelled if sem_labelled else 0.0,
        "semantic_false_hit_rate_ci95": list(clopper_pearson(sem_wrong, sem_labelled)),
        "false_hit_rate_strict": (by_label["wrong"] + by_label["unlabelled"]) / len(hits) if hits else 0.0,
        "false_hit_rate_strict_ci95": [strict_lo, strict_hi],
        "audit": {"fraction": args.audit_fraction, "judged": judged, "false_hits": pool.get("false_hits"),
                  "false_hit_rate": pool.get("false_hit_rate"), "false_hit_rate_upper": pool.get("false_hit_rate_upper"),
                  "upper_confidence": "one-sided, verifier.confidence (0.95)",
                  "two_sided_ci95": [a_lo, a_hi], "max_false_hit_rate": pool.get("max_false_hit_rate"),
                  "scopes_tightened": audit.get("scopes_tightened"), "outcomes": outcomes,
                  "audited_hits_inferred": len(audited), "false_verdicts_logged": len(false_logs),
                  "false_verdicts_unmatched": len(pending), "judge_vs_label": judge_vs_label,
                  "disagreements": disagreements[:40], "stats": audit},
        "model_calls": {"simulators_total": sim_calls, "client_misses": n - len(hits),
                        "audits": sim_calls - (n - len(hits)), "avoided": len(hits),
                        "avoided_net_of_audits": n - sim_calls},
        "dollars": {"source": "saved: /admin/costs totals.cache_savings_usd (the gateway's own pricing of each hit); "
                              "model and audit spend: the token counts of /admin/costs?by=tenant (rows anonymous and "
                              "(audit)) at the list price, because the gateway bills calls to a static replica of an "
                              "api_models model at $0 (see gateway_billed_usd)",
                    "prices_usd_per_1m": {"input": args.prices[0], "output": args.prices[1]},
                    "saved": saved, "model_spend": model_spend, "audit_spend": audit_spend,
                    "without_cache": model_spend + saved,
                    "saved_share": saved / (model_spend + saved) if model_spend + saved > 0 else 0.0,
                    "lookup_spend": len(hits) * CACHE_LOOKUP_USD,
                    "saved_net_of_audits": saved - audit_spend - len(hits) * CACHE_LOOKUP_USD,
                    "gateway_billed_usd": {"anonymous": client.get("cost_usd"), "(audit)": audit_row.get("cost_usd"),
                                           "hits_times_cache_lookup_usd": len(hits) * CACHE_LOOKUP_USD,
                                           "unknown_replica_class_events": msum(metrics, "tidegate_cost_events_total",
                                                                                reason="unknown_replica_class")},
                    "client_cost_headers_sum": sum(r["cost_usd"] for r in records),
                    "costs_report": costs},
        "tiers": tiers,
        "verifier_hits": len(verifier_hits),
        "not_stored_waits": sum(1 for r in records if r.get("not_stored")),
        "latency_ms": {"hit_p50": pct([r["ms"] for r in hits], 0.5), "miss_p50": pct([r["ms"] for r in records if r["verdict"] != "hit"], 0.5),
                       "miss_p99": pct([r["ms"] for r in records if r["verdict"] != "hit"], 0.99)},
        "replay_seconds": round(replay_s, 1),
        "wrong_hits": [{"kind": h["kind"], "label": h["label"], "similarity": h["similarity"],
                        "probability": h.get("probability"), "request": h["text"], "cached": h["cached"]}
                       for h in hits if h["label"] != "right"][:60],
    }


def pct(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


# ----------------------------------------------------------------------------- report

def table(results):
    def f(x, d=3):
        return "-" if x is None else f"{x:.{d}f}"

    lines = ["| run | requests | hits (hit rate) | paraphrases hit | traps hit | repeats hit | false-hit rate, labels (95% CI) | of hits on another question's entry | strict (unlabelled wrong) | audited false-hit rate (judged; one-sided 95% upper) | model calls (audits) | calls avoided, net of audits | $ without cache | $ saved (share) | $ audits | $ saved net of audits and lookups |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        k, a, d = r["by_kind"], r["audit"], r["dollars"]
        lo, hi = r["false_hit_rate_labelled_ci95"]
        lines.append(
            f"| {r['run']}: {r['cache']} | {r['requests']} | {r['hits']} ({f(r['hit_rate'])}) "
            f"| {k['paraphrase']['hits']}/{k['paraphrase']['requests']} | {k['trap']['hits']}/{k['trap']['requests']} "
            f"| {k['repeat']['hits']}/{k['repeat']['requests']} "
            f"| {f(r['false_hit_rate_labelled'])} ({r['hits_by_label']['wrong']} of {r['hits_by_label']['right'] + r['hits_by_label']['wrong']}) [{f(lo)}, {f(hi)}] "
            f"| {f(r['semantic_false_hit_rate'])} ({r['semantic_hits_wrong']} of {r['semantic_hits_labelled']} labelled) "
            f"[{f(r['semantic_false_hit_rate_ci95'][0])}, {f(r['semantic_false_hit_rate_ci95'][1])}] "
            f"| {f(r['false_hit_rate_strict'])} ({r['hits_by_label']['unlabelled']} unlabelled) "
            f"| {f(a['false_hit_rate'])} ({a['false_hits']} of {a['judged']}; upper {f(a['false_hit_rate_upper'])}) "
            f"| {int(r['model_calls']['simulators_total'])} ({int(r['model_calls']['audits'])}) "
            f"| {r['model_calls']['avoided']}, {int(r['model_calls']['avoided_net_of_audits'])} "
            f"| {d['without_cache']:.4f} | {d['saved']:.4f} ({d['saved_share']:.3f}) | {d['audit_spend']:.4f} "
            f"| {d['saved_net_of_audits']:.4f} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tidegate")
    ap.add_argument("sim")
    ap.add_argument("--pairs", default=os.path.join(ROOT, "..", "shared", "data", "paraphrase", "quora_dev.csv"))
    ap.add_argument("--duplicates", type=int, default=600, help="duplicate pairs: paraphrase requests")
    ap.add_argument("--traps", type=int, default=600, help="non-duplicate pairs: trap requests")
    ap.add_argument("--repeats", type=int, default=300, help="exact repeats")
    ap.add_argument("--seed", type=int, default=19)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--audit-fraction", type=float, default=0.25)
    ap.add_argument("--after-rate", type=float, default=0.10, help="max_false_hit_rate of the after run")
    ap.add_argument("--prices", type=float, nargs=2, default=(2.5, 10.0), metavar=("IN", "OUT"),
                    help="USD per 1M prompt / completion tokens")
    ap.add_argument("--runs", default="before,after", help="comma-separated: before, after, after@RATE")
    ap.add_argument("--json", default="")
    args = ap.parse_args()

    stream, label, workload = build_workload(args.pairs, args.duplicates, args.traps, args.repeats, args.seed)
    print(f"workload: {json.dumps(workload)}", flush=True)
    results = []
    for name in args.runs.split(","):
        if name == "before":
            run = {"name": "before", "max_false_hit_rate": None, "describe": "threshold 0.99, no verifier"}
        elif name.startswith("after"):  # after, or after@RATE
            rate = float(name.split("@", 1)[1]) if "@" in name else args.after_rate
            run = {"name": name, "max_false_hit_rate": rate, "describe": f"max_false_hit_rate {rate} (verifier)"}
        else:
            raise SystemExit(f"unknown run {name!r}: before, after or after@RATE")
        t0 = time.monotonic()
        res = replay(args, run, stream, label)
        res["wall_seconds"] = round(time.monotonic() - t0, 1)
        results.append(res)
        print(f"{name}: {res['hits']} hits of {res['requests']} in {res['wall_seconds']} s; "
              f"labels {res['hits_by_label']}; audit {res['audit']['judged']} judged, {res['audit']['false_hits']} false; "
              f"tiers {res['tiers']}", flush=True)
    print()
    print(table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"workload": workload, "results": results}, f, indent=1)
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
