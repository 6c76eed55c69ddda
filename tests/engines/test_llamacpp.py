"""Tidegate in front of a real engine: llama.cpp's llama-server with SmolLM2-135M-Instruct.
Everything the simulator cannot show: real token counts, real error bodies, real connection
handling, real processes started by the scaler. Requests are bounded; all on 127.0.0.1."""
import json
import os
import random
import signal
import sys
import threading
import time

import httpx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "app_scaler"))
from scaler_app import sim_pid  # noqa: E402
from engine_harness import (ADMIN, PER_SLOT_CTX, App, Engine, cache_yaml, chat, cost_yaml, engines, missing,
                            model_yaml, server_args, wait_until)

PNG_1PX = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")


def _skip(env):
    why = missing(env.source_root)
    if why:
        print(f"SKIP: {why}")
        return True
    return False


def _app(env, eng, *, models=None, cache="", scaler="", extra_models=""):
    sims = {"m": eng} if eng else {}
    if models is None:
        models = model_yaml("m", [e.port for e in eng]) + extra_models
    return App(env, sims=sims, models=models, cache=cache, cost=cost_yaml(), scaler=scaler,
               timeouts="total: 120s, first_byte: 90s")


def _events(r):
    out = []
    for line in r.iter_lines():
        if line.startswith("data: "):
            out.append(line[6:])
        elif line.startswith(": "):
            out.append(("comment", line[2:]))
    return out


def _stream(client, body):
    with client.stream("POST", "/v1/chat/completions", json=dict(body, stream=True)) as r:
        assert r.status_code == 200, r.read()
        return _events(r)


def _content(events):
    text = ""
    for e in events:
        if isinstance(e, str) and e != "[DONE]":
            for c in json.loads(e).get("choices", []):
                text += (c.get("delta") or {}).get("content") or ""
    return text


def _usage(events):
    for e in events:
        if isinstance(e, str) and e != "[DONE]":
            u = json.loads(e).get("usage")
            if u:
                return u
    return None


def test_chat_stream_and_token_counts(env):
    """Chat, streams with and without usage, completions: the gateway's token counts and the
    cost ledger's equal the engine's own usage exactly, and healthy keep-alive traffic counts
    no upstream errors (llama.cpp closes the connection after each stream)."""
    if _skip(env):
        return "skip"
    eng = engines(env.source_root, 2)
    with _app(env, eng) as app, app.client() as c:
        want = {"prompt": 0, "completion": 0}
        # Non-stream: the engine's usage is in the body.
        r = c.post("/v1/chat/completions", json=chat("Name three colours."))
        assert r.status_code == 200, r.text
        u = r.json()["usage"]
        assert u["completion_tokens"] > 0 and r.json()["choices"][0]["message"]["content"]
        want["prompt"] += u["prompt_tokens"]
        want["completion"] += u["completion_tokens"]
        # Streams that asked for usage see it; the gateway's counts match it.
        for i in range(6):
            ev = _stream(c, chat(f"Count to {i + 3}.", max_tokens=24, stream_options={"include_usage": True}))
            assert ev[-1] == "[DONE]" and _content(ev)
            u = _usage(ev)
            assert u and u["completion_tokens"] > 0, ev[-3:]
            want["prompt"] += u["prompt_tokens"]
            want["completion"] += u["completion_tokens"]
        # Streams that did not: no usage chunk, the cost as an SSE comment, counts still exact
        # (the same greedy request asked once more with usage tells what the engine counted).
        for i in range(6):
            body = chat(f"Say hello {i} times.", max_tokens=20)
            ev = _stream(c, body)
            assert _usage(ev) is None and ev[-1] == "[DONE]"
            comments = [json.loads(e[1]) for e in ev if isinstance(e, tuple)]
            assert comments and comments[0]["tidegate_cost_usd"] > 0, ev[-3:]
            direct = httpx.post(eng[0].url + "/v1/chat/completions", json=dict(body, stream=False), timeout=60)
            du = direct.json()["usage"]
            want["prompt"] += du["prompt_tokens"]
            want["completion"] += du["completion_tokens"]
            entry = wait_until(lambda: [e for e in app.gw.access_entries() if e.get("stream")] and
                               app.gw.access_entries()[-1], what="access entry")
            assert entry["completion_tokens"] == du["completion_tokens"], (entry, du)
            assert entry["prompt_tokens"] == du["prompt_tokens"], (entry, du)
        # Completions.
        r = c.post("/v1/completions", json={"model": "m", "prompt": "The sky is", "max_tokens": 8, "temperature": 0})
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["text"]
        want["prompt"] += r.json()["usage"]["prompt_tokens"]
        want["completion"] += r.json()["usage"]["completion_tokens"]
        # The ledger agrees with the engine, token for token.
        with app.admin() as adm:
            row = adm.get("/admin/costs", params={"by": "tenant"}).json()["rows"][0]
        assert row["prompt_tokens"] == want["prompt"], (row, want)
        assert row["completion_tokens"] == want["completion"], (row, want)
        text = httpx.get(app.url + "/metrics", timeout=10).text
        assert "progress_regression" not in text, [l for l in text.splitlines() if "progress_regression" in l]
        errors = [l for l in text.splitlines() if l.startswith("tidegate_upstream_errors_total")]
        assert not errors, errors


def test_openai_sdk_and_error_codes(env):
    """The official SDK through the gateway: answers, streams, and the exception type and
    string `code` OpenAI's own API gives, whatever llama.cpp's error body looked like."""
    if _skip(env):
        return "skip"
    import openai
    eng = engines(env.source_root, 1)
    with _app(env, eng) as app:
        client = app.openai()
        r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}], max_tokens=8,
                                           temperature=0)
        assert r.choices[0].message.content and r.usage.completion_tokens > 0
        chunks = list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}],
                                                     max_tokens=8, stream=True))
        assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
        long_prompt = "word " * (PER_SLOT_CTX * 2)
        try:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": long_prompt}], max_tokens=8)
            raise AssertionError("an over-long prompt was accepted")
        except openai.BadRequestError as e:
            assert e.code == "context_length_exceeded", e.body
            assert "context" in e.message
        try:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}], max_tokens=0)
            raise AssertionError("max_tokens 0 was accepted")
        except openai.BadRequestError as e:
            assert e.code == "invalid_value" and e.param == "max_tokens", e.body
        try:
            client.embeddings.create(model="m", input="hello")  # a chat server: llama.cpp answers 501
            raise AssertionError("embeddings on a chat-only server succeeded")
        except openai.APIStatusError as e:
            assert e.status_code == 501 and e.code == "not_implemented", (e.status_code, e.body)
        # Over-long streams fail before the stream starts, with the same code.
        try:
            list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": long_prompt}],
                                                max_tokens=8, stream=True))
            raise AssertionError("an over-long streamed prompt was accepted")
        except openai.BadRequestError as e:
            assert e.code == "context_length_exceeded", e.body
        # None of it was held against the replica.
        assert app.gw.metric("tidegate_upstream_replicas", {"model": "m", "state": "healthy"}) == 1


def test_embeddings(env):
    """/v1/embeddings through the gateway to an --embeddings server: the vector llama.cpp
    computes, and its usage."""
    if _skip(env):
        return "skip"
    emb = Engine(env.source_root, alias="emb", embeddings=True)
    models = model_yaml("emb", [emb.port])
    try:
        with App(env, sims={}, models=models, cache="", cost=cost_yaml(("emb",)), timeouts="total: 60s") as app, \
                app.client() as c:
            r = c.post("/v1/embeddings", json={"model": "emb", "input": ["red apple", "green pear"]})
            assert r.status_code == 200, r.text
            data = r.json()["data"]
            direct = httpx.post(emb.url + "/v1/embeddings", json={"model": "emb", "input": ["red apple", "green pear"]},
                                timeout=30).json()["data"]
            assert len(data) == 2 and len(data[0]["embedding"]) == len(direct[0]["embedding"]) > 100
            assert max(abs(a - b) for a, b in zip(data[0]["embedding"], direct[0]["embedding"])) < 1e-4
            assert r.json()["usage"]["prompt_tokens"] > 0
    finally:
        emb.close()


def test_one_tenants_bad_requests_never_fail_another(env):
    """One tenant sends what llama.cpp refuses, embeddings to a chat model (501) and images to a
    text model (500 with an error object), as fast as it can; another tenant's chat never fails
    and no replica is ejected."""
    if _skip(env):
        return "skip"
    eng = engines(env.source_root, 2)
    with _app(env, eng) as app:
        stop = threading.Event()
        bad = []
        image = {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + PNG_1PX}}]}]}

        def bad_tenant():
            with app.client("globex") as c:
                for i in range(300):  # bounded
                    if stop.is_set():
                        return
                    if i % 2:
                        r = c.post("/v1/embeddings", json={"model": "m", "input": "x"})
                    else:
                        r = c.post("/v1/chat/completions", json=image)
                    bad.append((r.status_code, r.json()["error"]["code"]))

        t = threading.Thread(target=bad_tenant)
        t.start()
        good = []
        try:
            with app.client("acme") as c:
                for i in range(20):
                    good.append(c.post("/v1/chat/completions", json=chat(f"Say {i}.", max_tokens=4)).status_code)
        finally:
            stop.set()
            t.join()
        assert good == [200] * 20, good
        assert len(bad) >= 10, bad
        assert {s for s, _ in bad} <= {500, 501}, set(bad)
        assert (501, "not_implemented") in bad and any(s == 500 for s, _ in bad), set(bad)
        assert not app.gw.metric("tidegate_upstream_replicas", {"model": "m", "state": "ejected"})


def test_cache_hits_on_real_answers(env):
    """The semantic cache stores llama.cpp's real answer and serves it back, faster."""
    if _skip(env):
        return "skip"
    eng = engines(env.source_root, 1)
    with _app(env, eng, cache=cache_yaml()) as app, app.client() as c:
        body = chat("What is the capital of France?", max_tokens=24)
        t0 = time.monotonic()
        first = c.post("/v1/chat/completions", json=body)
        miss_s = time.monotonic() - t0
        assert first.status_code == 200 and first.headers["x-tidegate-cache"] == "miss", first.headers
        t0 = time.monotonic()
        second = c.post("/v1/chat/completions", json=body)
        hit_s = time.monotonic() - t0
        assert second.headers["x-tidegate-cache"] == "hit", second.headers
        assert second.json()["choices"][0]["message"]["content"] == first.json()["choices"][0]["message"]["content"]
        assert hit_s < miss_s, (hit_s, miss_s)
        # Another tenant never gets it.
        with app.client("globex") as other:
            assert other.post("/v1/chat/completions", json=body).headers["x-tidegate-cache"] == "miss"


def test_client_disconnect_frees_the_slot(env):
    """A client that hangs up mid-stream: llama.cpp's slot is free again within a second."""
    if _skip(env):
        return "skip"
    eng = engines(env.source_root, 1)
    with _app(env, eng) as app, app.client() as c:
        with c.stream("POST", "/v1/chat/completions", json=chat("Write a long story about a cat.", max_tokens=400,
                                                                 stream=True)) as r:
            got = 0
            for line in r.iter_lines():
                if line.startswith("data: "):
                    got += 1
                if got >= 3:
                    break
        assert got >= 3
        t0 = time.monotonic()
        wait_until(lambda: eng[0].metric("llamacpp:requests_processing") == 0, timeout=5, interval=0.02,
                   what="llama.cpp slot freed")
        assert time.monotonic() - t0 < 1.5


def _scaler_yaml(env, *, min_r=1, max_r=2, warm=0):
    cmd = ", ".join(f"\"{a}\"" for a in server_args(env.source_root, 0)).replace('"--port", "0"', '"--port", "{port}"')
    base = random.randint(30000, 59000)
    return f"""scaler:
  tick: 250ms
  pools:
    - model: m
      actuator:
        kind: process
        command: [{cmd}]
        ports: {base}-{base + 99}
        health_path: /health
        stop_grace: 3s
      lifecycle: {{warm_pool_size: {warm}, startup_timeout: 60s, drain_timeout: 30s}}
      signals: {{engine_metrics: true, metrics_path: /metrics, nvml: false}}
      policy:
        min_replicas: {min_r}
        max_replicas: {max_r}
        targets: {{concurrency_per_replica: 1}}
        stable_window: 3s
        panic_window: 1s
        scale_down_stabilization: 30s
"""


def _busy_replica(app):
    for r in _scaler_pool(app)["replicas"]:
        if r["state"] != "active":
            continue
        try:
            text = httpx.get(f"http://{r['endpoint']}/metrics", timeout=2).text
        except httpx.HTTPError:
            continue
        for line in text.splitlines():
            if line.startswith("llamacpp:requests_processing") and float(line.rsplit(" ", 1)[1]) > 0:
                return r
    return None


def _scaler_pool(app):
    r = httpx.get(app.url + "/admin/scaler", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10)
    return r.json()["pools"][0]


def test_scaler_starts_real_replicas_and_replaces_a_killed_one(env):
    """The process actuator runs real llama-server replicas: a burst scales 1 -> 2 with every
    request served; a replica killed with SIGKILL mid-stream ends that stream with an error
    event (never a hang) and is replaced."""
    if _skip(env):
        return "skip"
    with _app(env, None, models=model_yaml("m", [], health_interval="0"), scaler=_scaler_yaml(env)) as app:
        wait_until(lambda: _scaler_pool(app)["counts"]["active"] >= 1, timeout=60,
                   what=f"first replica: {_scaler_pool(app)}")
        codes = []

        def one(i):
            with app.client() as c:
                codes.append(c.post("/v1/chat/completions", json=chat(f"Tell me about {i}.", max_tokens=48)).status_code)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(12)]
        for t in threads:
            t.start()
        wait_until(lambda: _scaler_pool(app)["counts"]["active"] >= 2, timeout=60, what="scaled to 2")
        for t in threads:
            t.join()
        assert codes == [200] * 12, codes
        # Kill the replica serving a stream, mid-stream.
        result = {}

        def streamer():
            with app.client() as c:
                result["events"] = _stream(c, chat("Write a long poem.", max_tokens=300))

        t = threading.Thread(target=streamer)
        t.start()
        victim = wait_until(lambda: _busy_replica(app), timeout=20, interval=0.05, what="a replica streaming")
        time.sleep(0.5)
        os.kill(sim_pid(app, victim["endpoint"], b"llama-server"), signal.SIGKILL)
        t.join(timeout=60)
        assert not t.is_alive()
        last = result["events"][-1]
        assert last != "[DONE]" and json.loads(last)["error"]["code"] == "stream_broken", result["events"][-3:]
        assert _content(result["events"]), "the stream had started"
        killed = time.monotonic()
        p = wait_until(lambda: (lambda p: victim["id"] not in [r["id"] for r in p["replicas"]] and
                                p["counts"]["active"] >= 2 and p)(_scaler_pool(app)), timeout=60,
                       what="killed replica replaced")
        assert any(f["replica"] == victim["id"] and f["kind"] == "died" for f in p["faults"]), p["faults"]
        print(f"replaced {time.monotonic() - killed:.1f} s after the kill")
        with app.client() as c:
            assert c.post("/v1/chat/completions", json=chat("Still there?", max_tokens=4)).status_code == 200
