"""The composed `tidegate` with a scaler section: replicas are real `tidegate-sim` processes that
the process actuator starts and stops. Helpers read the scaler through the gateway's own admin
route and /metrics, and drive bounded streaming load from threads."""
import os
import random
import sys
import threading
import time

import httpx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "app"))
from app_harness import ADMIN, App, KEYS, sse_events, wait_until  # noqa: E402,F401


def _process_pool_head(cmd, tick, base, warm, drain_timeout):
    """The start of a scaler section with one pool of model m on the process actuator."""
    return f"""scaler:
  tick: {tick}
  pools:
    - model: m
      actuator:
        kind: process
        command: {cmd}
        ports: {base}-{base + 199}
        health_path: /health
        stop_grace: 3s
      lifecycle: {{warm_pool_size: {warm}, startup_timeout: 30s, drain_timeout: {drain_timeout}}}
      signals: {{engine_metrics: true, metrics_path: /metrics, nvml: false}}
"""


def scaler_yaml(sim, *, warm=0, min_r=1, max_r=4, startup_ms=0, scale_to_zero=False, stabilisation="2s",
                tick="250ms", per_replica=4, drain_timeout="20s"):
    # A random block of ports so that ctest -j2 runs do not fight over the first free one.
    base = random.randint(30000, 59000)
    cmd = (f"[{sim}, --port, \"{{port}}\", --model, m, --startup-ms, \"{startup_ms}\", --ttft-ms, \"30\","
           f" --tpot-ms, \"15\", --max-batch, \"64\", --echo, --threads, \"1\"]")
    return _process_pool_head(cmd, tick, base, warm, drain_timeout) + f"""      policy:
        min_replicas: {min_r}
        max_replicas: {max_r}
        scale_to_zero: {"true" if scale_to_zero else "false"}
        targets: {{concurrency_per_replica: {per_replica}}}
        stable_window: 4s
        panic_window: 1s
        scale_down_stabilization: {stabilisation}
"""


def work_yaml(sim, *, min_r=1, max_r=4, startup_ms=1500, prefill_tps=2000, memory="30s", stabilisation="3s"):
    """The default policy (the work model, no signal targets) over continuous-batching replicas
    with a slow prefill, so that prompt tokens are what loads them."""
    base = random.randint(30000, 59000)
    cmd = (f"[{sim}, --port, \"{{port}}\", --model, m, --startup-ms, \"{startup_ms}\", --prefill-tps,"
           f" \"{prefill_tps}\", --decode-base-ms, \"5\", --max-num-batched-tokens, \"512\", --max-batch, \"64\","
           f" --threads, \"1\"]")
    return _process_pool_head(cmd, "250ms", base, 0, "20s") + f"""      policy:
        min_replicas: {min_r}
        max_replicas: {max_r}
        capacity: {{prefill_tokens_per_s: {prefill_tps}, attention_context_tokens: 0, step: 300ms, kv_tokens: ~,
                    max_in_flight: 16}}
        slo: {{ttft: 2s, attainment: 0.95, window: 60s}}
        cold_start: {startup_ms / 1000}s
        learn: 5s
        burst_memory: {memory}
        scale_down_stabilization: {stabilisation}
"""


def start_work(env, **kw):
    return App(env, sims={}, models=model_yaml(), cache="", scaler=work_yaml(env.sim, **kw),
               timeouts="total: 60s, first_byte: 40s")


def model_yaml(max_wait="30s"):
    # Active probes off: the scaler's routing calls are the only source of replicas here.
    return f"""  - name: m
    balancer: least_outstanding
    max_concurrency_per_replica: 16
    queue: {{max_length: 1000, max_wait: {max_wait}}}
    health: {{path: /health, interval: 0, timeout: 500ms, failures_to_eject: 3}}
    replicas: []
"""


def start(env, max_wait="30s", **kw):
    return App(env, sims={}, models=model_yaml(max_wait), cache="", scaler=scaler_yaml(env.sim, **kw),
               timeouts="total: 60s, first_byte: 40s")


def pool(app):
    r = httpx.get(app.url + "/admin/scaler", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10)
    assert r.status_code == 200, r.text
    pools = r.json()["pools"]
    assert len(pools) == 1 and pools[0]["model"] == "m", pools
    return pools[0]


def active(app):
    return pool(app)["counts"]["active"]


def wait_counts(app, pred, timeout, what):
    last = {}

    def check():
        last["p"] = pool(app)
        return pred(last["p"]["counts"])

    try:
        wait_until(check, timeout=timeout, interval=0.1, what=what)
    except AssertionError:
        raise AssertionError(f"{what}: counts {last.get('p', {}).get('counts')}, "
                             f"last decision {(last.get('p', {}).get('decisions') or [None])[0]}")
    return last["p"]


class Load:
    """`n` concurrent streaming clients, each sending requests back to back until stop() or
    `per_client` requests; every outcome is recorded (a stream counts as ok only with [DONE])."""

    def __init__(self, app, n, *, max_tokens=150, per_client=1000, deadline_s=50, hold=False):
        self.ok, self.failed, self.lock = 0, [], threading.Lock()
        self.stopping, self.go = threading.Event(), threading.Event()
        if not hold:
            self.go.set()
        self.deadline = time.monotonic() + deadline_s
        self.threads = [threading.Thread(target=self._client, args=(app.url, i, max_tokens, per_client), daemon=True)
                        for i in range(n)]
        for t in self.threads:
            t.start()

    def _client(self, url, i, max_tokens, per_client):
        headers = {"Authorization": f"Bearer {KEYS['acme']}"}
        with httpx.Client(base_url=url, timeout=45, headers=headers) as c:
            self.go.wait(30)
            for k in range(per_client):
                if self.stopping.is_set() or time.monotonic() > self.deadline:
                    return
                body = {"model": "m", "stream": True, "max_tokens": max_tokens,
                        "messages": [{"role": "user", "content": f"client {i} request {k}"}]}
                try:
                    with c.stream("POST", "/v1/chat/completions", json=body) as r:
                        if r.status_code != 200:
                            outcome = f"status {r.status_code}: {r.read()[:200]!r}"
                        else:
                            events = sse_events(r)
                            outcome = "ok" if events and events[-1] == "[DONE]" else f"no [DONE]: {events[-2:]}"
                except httpx.HTTPError as e:
                    outcome = f"{type(e).__name__}: {e}"
                with self.lock:
                    if outcome == "ok":
                        self.ok += 1
                    else:
                        self.failed.append(outcome)

    def release(self):
        """For hold=True: the clients are ready; all of them start now (a sharp step)."""
        time.sleep(0.5)
        self.go.set()

    def stop(self, timeout=45):
        self.stopping.set()
        self.join(timeout)

    def join(self, timeout=45):
        end = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, end - time.monotonic()))
        alive = sum(t.is_alive() for t in self.threads)
        assert alive == 0, f"{alive} clients still running after {timeout}s"


def sim_pid(app, endpoint, binary=b"tidegate-sim"):
    """The pid of the gateway's `binary` child (a replica it started) serving `endpoint` (host:port)."""
    port = endpoint.rsplit(":", 1)[1]
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        if ppid != app.gw.proc.pid or not argv or not argv[0].endswith(binary):
            continue
        if b"--port" in argv and argv[argv.index(b"--port") + 1] == port.encode():
            return int(d)
    raise AssertionError(f"no {binary.decode()} child of the gateway on port {port}")
