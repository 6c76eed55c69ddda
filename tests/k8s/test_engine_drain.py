"""configs/k8s/engine-drain.py, the model servers' preStop hook, against a real tidegate-sim
(which exports vLLM's vllm:num_requests_running / _waiting): it holds the pod's SIGTERM back
until the streams on the engine have ended, never past its bound, and not at all for an engine
that is gone."""
import os
import subprocess
import sys
import threading
import time

import httpx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gateway"))
from harness import Sim, free_port, sse_events  # noqa: E402


def drain(env, port, *args):
    """Runs the hook; (seconds it took, its stderr)."""
    script = os.path.join(env.source_root, "configs", "k8s", "engine-drain.py")
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, script, "--port", str(port), "--settle", "0.3", "--poll", "0.1", *args],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, (p.returncode, p.stderr)
    return time.monotonic() - t0, p.stderr


def streams(port, n, max_tokens):
    """n streaming requests in threads; returns (threads, outcomes: 'ok' or why not, end times)."""
    outcomes, ends = [], []

    def one(i):
        body = {"model": "m", "stream": True, "max_tokens": max_tokens,
                "messages": [{"role": "user", "content": f"stream {i}"}]}
        try:
            with httpx.stream("POST", f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=60) as r:
                events = sse_events(r)
                outcomes.append("ok" if r.status_code == 200 and events[-1:] == ["[DONE]"] else f"{r.status_code} {events[-2:]}")
        except httpx.HTTPError as e:
            outcomes.append(repr(e))
        ends.append(time.monotonic())

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    return threads, outcomes, ends


def running(port):
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return sum(float(l.split()[-1]) for l in text.splitlines() if l.startswith("vllm:num_requests_running"))


def test_engine_drain_waits_for_the_streams_on_the_engine(env):
    sim = Sim(env.sim, "--model", "m", "--ttft-ms", "30", "--tpot-ms", "15")
    try:
        threads, outcomes, ends = streams(sim.port, 3, 150)  # about 2.3 s each
        deadline = time.monotonic() + 5
        while running(sim.port) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert running(sim.port) == 3
        took, said = drain(env, sim.port, "--max-wait", "30")
        done_at = time.monotonic()
        for t in threads:
            t.join(30)
        assert outcomes == ["ok"] * 3, outcomes
        # It returned only once the last stream had ended, and not long after (polls of 0.1 s).
        assert max(ends) <= done_at + 0.05, (max(ends), done_at)
        assert done_at - max(ends) < 1.0, done_at - max(ends)
        assert "drained after" in said, said
        assert took >= 1.0, took
    finally:
        sim.close()


def test_engine_drain_gives_up_at_its_bound(env):
    sim = Sim(env.sim, "--model", "m", "--ttft-ms", "30", "--tpot-ms", "15")
    try:
        threads, outcomes, _ = streams(sim.port, 1, 1000)  # 15 s
        time.sleep(0.3)
        took, said = drain(env, sim.port, "--max-wait", "2")
        assert 1.5 <= took < 4.0, took
        assert "giving up" in said, said
    finally:
        sim.close()


def test_engine_drain_does_not_wait_for_an_engine_that_is_gone(env):
    took, said = drain(env, free_port(), "--max-wait", "20")
    assert took < 3.0, took
    assert "not waiting" in said, said
