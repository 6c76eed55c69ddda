"""Online audits of cache hits through the composed gateway (issue 19): every hit audited at
fraction 1.0 against a real tidegate-sim, judged right or wrong; the client never waits on an
audit; audit cost in the ledger; dropped audits (500, hang); bounded in-flight; a scope tightened
by a false hit stays tightened across a restart."""
import re
import time

import httpx
from app_harness import App, HangingServer, Sim, cache_yaml, chat, cost_yaml, model_yaml, post, tempdir, wait_stored
from harness import SLOWDOWN, wait_until

QUESTION = "What is the capital city of France"
PARAPHRASE = "What is the capital city of France today"  # hash cosine ~0.9: a hit at threshold 0.8
# A hit is answered well before the model's 1 s to first token, even under the sanitizers: a client
# that waited on its audit would take longer than this.
FAST = min(0.6 * SLOWDOWN, 0.95)


def audit_cache(data_dir="", **audit):
    settings = {"fraction": 1.0, "max_in_flight": 4, "timeout": "5s", "judge_threshold": 0.9}
    settings.update(audit)
    inline = ", ".join(f"{k}: {v}" for k, v in settings.items())
    # The sim's answers are seeded by the prompt: the same question gets the same answer (the
    # judge: right), another prompt other words (the judge: wrong).
    return cache_yaml(data_dir=data_dir, extra=f"  lexical_guard: false\n  audit: {{{inline}}}\n"
                                               "  models:\n    m: {threshold: 0.8}\n")


def slow_sim(env, ttft_ms=1000):
    """A model slow to answer, so an audit the client waited on would show in its latency."""
    return {"m": [Sim(env.sim, "--model", "m", "--ttft-ms", str(ttft_ms), "--tpot-ms", "1")]}


def metrics(app):
    """{(name, frozenset(labels)): value} of the gateway's /metrics."""
    out = {}
    for line in httpx.get(app.url + "/metrics", timeout=10).text.splitlines():
        m = re.match(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? ([-+0-9.eE]+|NaN|[+-]Inf)$", line)
        if m:
            labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
            out[(m.group(1), labels)] = float(m.group(3))
    return out


def metric(app, name, **labels):
    want = set(labels.items())
    return sum(v for (n, ls), v in metrics(app).items() if n == name and want <= set(ls))


def audit_stats(app):
    with app.admin() as adm:
        return adm.get("/admin/cache/stats").json()["audit"]


def outcomes(app, total):
    """Waits (bounded) until `total` audits have an outcome; returns them by outcome."""
    wait_until(lambda: metric(app, "tidegate_cache_audits_total") >= total, timeout=15,
               what=f"{total} audit outcomes")
    return {o: metric(app, "tidegate_cache_audits_total", outcome=o)
            for o in ("correct", "false_hit", "dropped_busy", "dropped_error", "dropped_timeout")}


def test_audit_judged(env):
    data = tempdir("tidegate-e2e-audit-")
    with App(env, sims=slow_sim(env), cache=audit_cache(data), cost=cost_yaml()) as app:
        with app.client() as c:
            body = chat(QUESTION, max_tokens=24)
            assert post(c, body).headers["x-tidegate-cache"] == "miss"
            wait_stored(app, 1)
            for _ in range(2):  # the same question: the model says the same again
                t0 = time.monotonic()
                r = post(c, body)
                assert r.headers["x-tidegate-cache"] == "hit", r.headers
                # Answered from the cache at once: the audit (1 s to first token) runs behind.
                assert time.monotonic() - t0 < FAST, time.monotonic() - t0
            r = post(c, chat(PARAPHRASE, max_tokens=24))
            assert r.headers["x-tidegate-cache"] == "hit", r.headers
            assert float(r.headers["x-tidegate-cache-similarity"]) < 1
            got = outcomes(app, 3)
            assert got["correct"] == 2 and got["false_hit"] == 1, got
            s = audit_stats(app)["models"]["m"]
            assert s["judged"] == 3 and s["false_hits"] == 1, s
            assert abs(s["false_hit_rate"] - 1 / 3) < 1e-9 and 1 / 3 < s["false_hit_rate_upper"] < 1, s
            assert abs(metric(app, "tidegate_cache_audit_false_hit_rate", model="m") - 1 / 3) < 1e-9
            # Audits are priced as audit cost, under their own tenant, never as acme's.
            assert metric(app, "tidegate_cost_usd_total", kind="audit", tenant="(audit)") > 0
            assert metric(app, "tidegate_cost_usd_total", kind="audit", tenant="acme") == 0
            # The built-in dashboard draws the audited rate (sampled once a second).
            def audit_series():
                data = httpx.get(app.url + "/dashboard/data.json", timeout=5).json()
                return data["series"].get("cache_audit_false_hit_rate", {}).get("lines", {})
            lines = wait_until(audit_series, timeout=10, what="the dashboard's audit series")
            assert {"m audited", "m upper bound"} <= set(lines), lines
        # The false hit tightened its scope, and a restart keeps that (data_dir/audit.json): the
        # paraphrase now goes to the model; the question itself is still served.
        app.restart()
        with app.client() as c:
            r = post(c, chat(PARAPHRASE, max_tokens=24))
            assert r.headers["x-tidegate-cache"] == "miss", (r.headers, audit_stats(app))
            assert post(c, body).headers["x-tidegate-cache"] == "hit"
        got = outcomes(app, 1)  # counters restart; the audited rate does not
        assert got["correct"] == 1, got
        s = audit_stats(app)
        assert s["models"]["m"]["judged"] == 4 and s["models"]["m"]["false_hits"] == 1, s
        assert s["scopes_tightened"] == 1, s
        assert metric(app, "tidegate_cache_tier_total", tier="audit", outcome="refused") == 1


def test_audit_upstream_faults(env):
    """An entry stored while the model worked; then the model answers 500, then hangs: the hits
    are still served, each audit is dropped and counted, nothing is tightened."""
    data = tempdir("tidegate-e2e-audit-faults-")
    with App(env, sims=slow_sim(env), cache=audit_cache(data)) as app, app.client() as c:
        assert post(c, chat(QUESTION)).headers["x-tidegate-cache"] == "miss"
        wait_stored(app, 1)
    failing = {"m": [Sim(env.sim, "--model", "m", "--fail-rate", "1")]}
    with App(env, sims=failing, cache=audit_cache(data)) as app, app.client() as c:
        for _ in range(2):
            assert post(c, chat(QUESTION)).headers["x-tidegate-cache"] == "hit"
        got = outcomes(app, 2)
        assert got["dropped_error"] == 2 and got["correct"] + got["false_hit"] == 0, got
    hang = HangingServer()
    try:
        models = model_yaml("m", [hang.port])
        with App(env, sims={}, models=models, cache=audit_cache(data, timeout="1s"),
                 timeouts="first_byte: 3s") as app, app.client() as c:
            t0 = time.monotonic()
            assert post(c, chat(QUESTION)).headers["x-tidegate-cache"] == "hit"
            assert time.monotonic() - t0 < FAST  # the audit waits 1 s on the hang, the client does not
            got = outcomes(app, 1)
            assert got["dropped_timeout"] == 1, got
            assert audit_stats(app)["scopes_tightened"] == 0
            assert post(c, chat(QUESTION)).headers["x-tidegate-cache"] == "hit"  # nothing changed
            outcomes(app, 2)  # the second audit times out too before the gateway stops
    finally:
        hang.close()


def test_audit_bounded(env):
    """A flood of hits with one audit allowed in flight: one audit reaches the model, the rest are
    dropped as busy, and every client is answered from the cache."""
    with App(env, sims=slow_sim(env, 3000), cache=audit_cache(max_in_flight=1)) as app, app.client() as c:
        assert post(c, chat(QUESTION)).headers["x-tidegate-cache"] == "miss"
        wait_stored(app, 1)
        for _ in range(8):
            assert post(c, chat(QUESTION)).headers["x-tidegate-cache"] == "hit"
        assert metric(app, "tidegate_cache_audits_in_flight") == 1
        got = outcomes(app, 8)
        assert got["dropped_busy"] == 7 and got["correct"] == 1, got
        # The sim saw the client's one miss and one audit, nothing more.
        sim_metrics = httpx.get(f"http://127.0.0.1:{app.sims['m'][0].port}/metrics", timeout=5).text
        done = sum(float(l.split()[-1]) for l in sim_metrics.splitlines() if l.startswith("vllm:request_success_total"))
        assert done == 2, sim_metrics
