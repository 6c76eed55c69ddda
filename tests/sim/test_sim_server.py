"""End-to-end tests of tidegate-sim over real HTTP on 127.0.0.1.

usage: test_sim_server.py BINARY CASE   (one ctest test per CASE, so ctest -j2 spreads them)
Request loops are bounded in count and every wait has a deadline; timing checks are lower
bounds on simulated latency only, never assertions about speed.
"""
import json
import math
import shutil
import subprocess
import sys
import threading
import time

import httpx

from simproc import Sim

BIN = sys.argv[1]
CHAT = {"model": "sim", "messages": [{"role": "user", "content": "Say something"}], "max_tokens": 8}


def post(url, path, body, **kw):
    return httpx.post(url + path, json=body, timeout=10, **kw)


def sse_events(raw: bytes):
    """Splits a raw SSE body into payloads, asserting the exact `data: X\\n\\n` framing."""
    text = raw.decode()
    assert text.endswith("\n\n"), text[-50:]
    events = text[:-2].split("\n\n")
    out = []
    for ev in events:
        assert ev.startswith("data: ") and "\n" not in ev, repr(ev)
        out.append(ev[len("data: "):])
    return out


def case_routes():
    with Sim(BIN, "--ttft-ms", 0, "--tpot-ms", 0) as s:
        r = httpx.get(s.url + "/health", timeout=5)
        assert r.status_code == 200, r
        r = httpx.get(s.url + "/v1/models", timeout=5).json()
        assert r["object"] == "list" and r["data"][0]["id"] == "sim", r
        r = post(s.url, "/v1/chat/completions", CHAT)
        assert r.status_code == 200, r.text
        j = r.json()
        assert j["object"] == "chat.completion" and j["model"] == "sim"
        assert j["choices"][0]["message"]["role"] == "assistant"
        assert j["choices"][0]["finish_reason"] == "length"
        assert j["usage"]["completion_tokens"] == 8, j["usage"]
        assert j["usage"]["prompt_tokens"] > 0
        assert j["usage"]["total_tokens"] == j["usage"]["prompt_tokens"] + 8
        # Deterministic: the same prompt and seed give the same reply.
        assert post(s.url, "/v1/chat/completions", CHAT).json()["choices"][0]["message"] == j["choices"][0]["message"]
        r = post(s.url, "/v1/completions", {"model": "sim", "prompt": "Once upon a time", "max_tokens": 5}).json()
        assert r["object"] == "text_completion" and len(r["choices"][0]["text"]) > 0, r
        assert r["usage"]["completion_tokens"] == 5
        # No max_tokens: a seeded length within 1..--max-tokens-default.
        r = post(s.url, "/v1/chat/completions", {"model": "sim", "messages": CHAT["messages"]}).json()
        assert 1 <= r["usage"]["completion_tokens"] <= 64 and r["choices"][0]["finish_reason"] == "stop", r
        e = post(s.url, "/v1/embeddings", {"model": "sim", "input": ["a cat", "a dog", "a cat"]}).json()
        vecs = [d["embedding"] for d in e["data"]]
        assert len(vecs) == 3 and all(len(v) == 384 for v in vecs)
        assert vecs[0] == vecs[2] and vecs[0] != vecs[1]
        assert abs(math.sqrt(sum(x * x for x in vecs[0])) - 1) < 1e-4
        assert e["usage"]["prompt_tokens"] > 0
        # Keep-alive: many requests over one connection.
        with httpx.Client(base_url=s.url, timeout=5) as c:
            for _ in range(50):
                assert c.post("/v1/chat/completions", json=CHAT).status_code == 200


def case_errors():
    with Sim(BIN, "--ttft-ms", 0) as s:
        def err(path, body, status, raw=None):
            r = httpx.post(s.url + path, content=raw if raw is not None else json.dumps(body),
                           headers={"content-type": "application/json"}, timeout=5)
            assert r.status_code == status, (path, body, r.status_code, r.text)
            e = r.json()["error"]
            assert set(e) >= {"message", "type", "param", "code"}, e
            return e
        err("/v1/chat/completions", None, 400, raw=b"{not json")
        assert err("/v1/chat/completions", {"model": "nope", "messages": CHAT["messages"]}, 404)["param"] == "model"
        err("/v1/chat/completions", {"messages": CHAT["messages"]}, 400)
        err("/v1/chat/completions", {"model": "sim", "messages": []}, 400)
        err("/v1/chat/completions", {"model": "sim", "messages": "hi"}, 400)
        err("/v1/chat/completions", {**CHAT, "max_tokens": "8"}, 400)
        err("/v1/chat/completions", {**CHAT, "stream": "yes"}, 400)
        err("/v1/completions", {"model": "sim"}, 400)
        err("/v1/embeddings", {"model": "sim"}, 400)
        err("/v1/nothing", {}, 404)
        assert httpx.get(s.url + "/v1/chat/completions", timeout=5).status_code == 405
        # Still serving after all that.
        assert post(s.url, "/v1/chat/completions", CHAT).status_code == 200


def check_stream(url, path, body, chat=True):
    r = httpx.post(url + path, json=body, timeout=10)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream"), r
    events = sse_events(r.content)
    assert events[-1] == "[DONE]", events[-3:]
    chunks = [json.loads(e) for e in events[:-1]]
    obj = "chat.completion.chunk" if chat else "text_completion"
    assert all(c["object"] == obj and c["model"] == "sim" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    return chunks


def case_stream():
    with Sim(BIN, "--ttft-ms", 0, "--tpot-ms", 1) as s:
        full = post(s.url, "/v1/chat/completions", CHAT).json()
        chunks = check_stream(s.url, "/v1/chat/completions", {**CHAT, "stream": True})
        assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        content_chunks = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]
        assert len(content_chunks) == 8, len(content_chunks)  # one chunk per token, as vLLM
        text = "".join(c["choices"][0]["delta"]["content"] for c in content_chunks)
        assert text == full["choices"][0]["message"]["content"]
        assert chunks[-1]["choices"][0]["finish_reason"] == "length" and chunks[-1]["choices"][0]["delta"] == {}
        assert all("usage" not in c for c in chunks)

        chunks = check_stream(s.url, "/v1/chat/completions",
                              {**CHAT, "stream": True, "stream_options": {"include_usage": True}})
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 8, chunks[-1]
        assert chunks[-1]["usage"]["prompt_tokens"] == full["usage"]["prompt_tokens"]
        assert chunks[-2]["choices"][0]["finish_reason"] == "length"

        chunks = check_stream(s.url, "/v1/completions",
                              {"model": "sim", "prompt": "abc", "max_tokens": 3, "stream": True}, chat=False)
        assert sum(1 for c in chunks if c["choices"] and c["choices"][0]["text"]) == 3

        # The official client parses the stream the same way.
        from openai import OpenAI
        client = OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0)
        got = "".join(ch.choices[0].delta.content or "" for ch in
                      client.chat.completions.create(model="sim", messages=CHAT["messages"], max_tokens=8,
                                                     stream=True) if ch.choices)
        assert got == full["choices"][0]["message"]["content"]
        done = client.chat.completions.create(model="sim", messages=CHAT["messages"], max_tokens=8)
        assert done.usage.completion_tokens == 8


def case_echo():
    msg = "Hello there, tidegate! Ünïcode  and   spaces\n"
    body = {"model": "sim", "max_tokens": 4,
            "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "first"},
                         {"role": "assistant", "content": "ok"}, {"role": "user", "content": msg}]}
    with Sim(BIN, "--ttft-ms", 0, "--echo") as s:
        r = post(s.url, "/v1/chat/completions", body).json()
        # The echo is never cut by max_tokens: a test must always be able to tell prompts apart.
        assert r["choices"][0]["message"]["content"].startswith(msg), r
        chunks = check_stream(s.url, "/v1/chat/completions", {**body, "max_tokens": 40, "stream": True})
        text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
        assert text.startswith(msg) and len(text) > len(msg), text
        r = post(s.url, "/v1/completions", {"model": "sim", "prompt": "complete me", "max_tokens": 10}).json()
        assert r["choices"][0]["text"].startswith("complete me")


def case_health_startup():
    with Sim(BIN, "--ttft-ms", 0, "--startup-ms", 1500) as s:
        t0 = time.monotonic()
        assert httpx.get(s.url + "/health", timeout=5).status_code == 503
        # A request sent while loading waits for the load instead of failing.
        r = post(s.url, "/v1/chat/completions", CHAT)
        assert r.status_code == 200 and time.monotonic() - t0 >= 1.0, r
        deadline = time.monotonic() + 20
        while httpx.get(s.url + "/health", timeout=5).status_code != 200:
            assert time.monotonic() < deadline, "never became healthy"
            time.sleep(0.05)


def case_fail_rate():
    with Sim(BIN, "--ttft-ms", 0, "--fail-rate", "0.5", "--seed", "7") as s:
        codes = [post(s.url, "/v1/chat/completions", CHAT).status_code for _ in range(60)]
        assert set(codes) == {200, 500}, codes
        assert 10 <= codes.count(500) <= 50, codes
        assert httpx.get(s.url + "/health", timeout=5).status_code == 200  # probes never fail
    with Sim(BIN, "--ttft-ms", 0, "--fail-rate", "1") as s:
        r = post(s.url, "/v1/chat/completions", CHAT)
        assert r.status_code == 500 and r.json()["error"]["code"] == 500


def case_die_after():
    with Sim(BIN, "--ttft-ms", 0, "--tpot-ms", 50, "--die-after", 2, expect_exit=3) as s:
        assert post(s.url, "/v1/chat/completions", CHAT).status_code == 200
        got = b""
        try:
            with httpx.stream("POST", s.url + "/v1/chat/completions", json={**CHAT, "stream": True}, timeout=10) as r:
                assert r.status_code == 200
                for b in r.iter_raw():
                    got += b
            raise AssertionError("stream ended cleanly: " + got.decode())
        except (httpx.RemoteProtocolError, httpx.ReadError):
            pass
        assert b"data: " in got and b"[DONE]" not in got, got
        assert s.proc.wait(10) == 3
    with Sim(BIN, "--ttft-ms", 0, "--die-after", 1, expect_exit=3) as s:
        try:
            post(s.url, "/v1/chat/completions", CHAT)
            raise AssertionError("answered")
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.ConnectError):
            pass
        assert s.proc.wait(10) == 3


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} missing")


def case_metrics():
    # One sequence at a time, ~50 decode steps of >= 10 ms each: requests 2 and 3 must wait.
    with Sim(BIN, "--max-batch", 1, "--decode-base-ms", 10, "--prefill-tps", 100000) as s:
        results = []

        def go():
            results.append(post(s.url, "/v1/chat/completions", {**CHAT, "max_tokens": 50}).json())
        threads = [threading.Thread(target=go) for _ in range(3)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 5
        seen = None
        while time.monotonic() < deadline:
            m = httpx.get(s.url + "/metrics", timeout=5).text
            if metric(m, "vllm:num_requests_waiting") == 2:
                seen = m
                break
            time.sleep(0.01)
        for t in threads:
            t.join(30)
        assert seen, "never saw 2 waiting requests"
        assert metric(seen, "vllm:num_requests_running") == 1
        assert 0 < metric(seen, "vllm:kv_cache_usage_perc") < 1
        assert len(results) == 3 and all(r["usage"]["completion_tokens"] == 50 for r in results)
        m = httpx.get(s.url + "/metrics", timeout=5).text
        assert metric(m, "vllm:generation_tokens_total") == 150
        assert metric(m, "vllm:prompt_tokens_total") == 3 * results[0]["usage"]["prompt_tokens"]
        assert metric(m, "vllm:time_to_first_token_seconds_count") == 3
        assert metric(m, "vllm:num_requests_running") == 0
        # The third request waited for two whole generations (>= 2 x 50 x 10 ms) before its prefill.
        assert metric(m, "vllm:time_to_first_token_seconds_sum") >= 1.0
        assert 'model_name="sim"' in m
        if shutil.which("promtool"):
            # vLLM's names contain ':' (a recording-rule convention promtool lints); they are the
            # point of the simulator, so that is the one complaint accepted.
            p = subprocess.run(["promtool", "check", "metrics"], input=m, text=True, capture_output=True)
            other = [l for l in (p.stdout + p.stderr).splitlines()
                     if l.strip() and "metric names should not contain ':'" not in l]
            assert not other, other


def case_fixed_timing():
    with Sim(BIN, "--ttft-ms", 200, "--tpot-ms", 20) as s:
        t0 = time.monotonic()
        first = None
        with httpx.stream("POST", s.url + "/v1/chat/completions", json={**CHAT, "max_tokens": 5, "stream": True},
                          timeout=10) as r:
            for line in r.iter_lines():
                if first is None and '"content":"' in line and '"content":""' not in line:
                    first = time.monotonic() - t0
        total = time.monotonic() - t0
        assert first is not None and first >= 0.19, first
        assert total >= 0.2 + 4 * 0.02 - 0.01, total


def case_client_disconnect():
    # A client leaving mid-stream frees its batch slot: the next request is served at once.
    with Sim(BIN, "--max-batch", 1, "--ttft-ms", 0, "--tpot-ms", 20) as s:
        with httpx.stream("POST", s.url + "/v1/chat/completions",
                          json={**CHAT, "max_tokens": 100000, "stream": True}, timeout=10) as r:
            next(r.iter_raw())
        deadline = time.monotonic() + 10
        while metric(httpx.get(s.url + "/metrics", timeout=5).text, "vllm:num_requests_running") != 0:
            assert time.monotonic() < deadline, "slot never freed"
            time.sleep(0.02)
        r = post(s.url, "/v1/chat/completions", {**CHAT, "max_tokens": 2})
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 2


def case_seed():
    # Replies and embeddings are functions of prompt and --seed: the same seed in another
    # process repeats them, another seed changes them.
    def reply(seed):
        with Sim(BIN, "--ttft-ms", 0, "--tpot-ms", 0, "--seed", seed) as s:
            chat = post(s.url, "/v1/chat/completions", CHAT).json()["choices"][0]["message"]["content"]
            vec = post(s.url, "/v1/embeddings", {"model": "sim", "input": "a cat"}).json()["data"][0]["embedding"]
            return chat, vec
    first, again, other = reply(11), reply(11), reply(12)
    assert first == again
    assert first[0] != other[0] and first[1] != other[1], (first[0], other[0])


def case_prefix_cache():
    # A slow prefill (400 tokens/s) makes a long shared system prompt worth seconds: the
    # second conversation reuses its KV blocks and gets its first token much sooner.
    system = " ".join(f"rule{i} applies" for i in range(150))  # ~300 tokens
    def chat(question):
        body = {"model": "sim", "max_tokens": 1, "stream": True,
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}]}
        t0 = time.monotonic()
        with httpx.stream("POST", s.url + "/v1/chat/completions", json=body, timeout=30) as r:
            assert r.status_code == 200
            for _ in r.iter_bytes():
                return time.monotonic() - t0
    with Sim(BIN, "--prefill-tps", 400, "--decode-base-ms", 1) as s:
        cold = chat("What is the first rule?")
        warm = chat("What is the last rule, please?")
        m = httpx.get(s.url + "/metrics", timeout=5).text
        queries, hits = metric(m, "vllm:prefix_cache_queries_total"), metric(m, "vllm:prefix_cache_hits_total")
        assert hits >= 280 and hits % 16 == 0, (queries, hits)  # whole 16-token blocks of the shared prefix
        assert queries >= 600 and hits < queries / 2 + 16, (queries, hits)  # both prompts looked up
        assert cold >= 0.7, cold  # >= 300 tokens at 400/s
        assert warm < cold / 2, (cold, warm)
        # The usage says how much of the prompt was cached (vLLM's prompt_tokens_details), in
        # a whole answer and in a stream's usage chunk, as the engine's counter moved.
        body = {"model": "sim", "max_tokens": 1,
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": "And rule 7?"}]}
        usage = httpx.post(s.url + "/v1/chat/completions", json=body, timeout=30).json()["usage"]
        m1 = httpx.get(s.url + "/metrics", timeout=5).text
        cached = usage["prompt_tokens_details"]["cached_tokens"]
        assert cached >= 280 and cached == metric(m1, "vllm:prefix_cache_hits_total") - hits, (usage, hits)
        hits = metric(m1, "vllm:prefix_cache_hits_total")
        events = httpx.post(s.url + "/v1/chat/completions", timeout=30,
                            json={**body, "stream": True, "stream_options": {"include_usage": True}}).text
        usage_chunks = [json.loads(line[6:]) for line in events.splitlines()
                        if line.startswith("data: {") and '"usage"' in line]
        assert usage_chunks and usage_chunks[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] >= 280, events
        hits = metric(httpx.get(s.url + "/metrics", timeout=5).text, "vllm:prefix_cache_hits_total")
        # The same conversation with a different system prompt shares nothing.
        system = "other " + system
        chat("What is the first rule?")
        m2 = httpx.get(s.url + "/metrics", timeout=5).text
        assert metric(m2, "vllm:prefix_cache_hits_total") == hits
    with Sim(BIN, "--prefill-tps", 400, "--decode-base-ms", 1, "--no-prefix-caching") as s:
        chat("What is the first rule?")
        assert chat("What is the last rule, please?") >= 0.7
        assert metric(httpx.get(s.url + "/metrics", timeout=5).text, "vllm:prefix_cache_hits_total") == 0


def case_sleep_mode():
    # vLLM's sleep mode: asleep the engine refuses work but stays healthy; a wake-up takes
    # --wake-ms, /health says 503 meanwhile, then it serves again.
    with Sim(BIN, "--ttft-ms", 0, "--tpot-ms", 0, "--wake-ms", 600) as s:
        assert post(s.url, "/v1/chat/completions", CHAT).status_code == 200
        assert httpx.post(s.url + "/sleep?level=1", timeout=5).status_code == 200
        assert httpx.get(s.url + "/is_sleeping", timeout=5).json() == {"is_sleeping": True}
        assert httpx.get(s.url + "/health", timeout=5).status_code == 200
        r = post(s.url, "/v1/chat/completions", CHAT)
        assert r.status_code == 503 and "asleep" in r.json()["error"]["message"], r.text
        woke = time.monotonic()
        assert httpx.post(s.url + "/wake_up", timeout=5).status_code == 200
        assert httpx.get(s.url + "/is_sleeping", timeout=5).json() == {"is_sleeping": False}
        assert httpx.get(s.url + "/health", timeout=5).status_code == 503
        deadline = time.monotonic() + 5
        while httpx.get(s.url + "/health", timeout=5).status_code != 200:
            assert time.monotonic() < deadline, "never woke"
            time.sleep(0.02)
        assert time.monotonic() - woke >= 0.55
        assert post(s.url, "/v1/chat/completions", CHAT).status_code == 200
        assert httpx.get(s.url + "/sleep", timeout=5).status_code == 405


CASES = {k[5:]: v for k, v in globals().items() if k.startswith("case_")}

if __name__ == "__main__":
    CASES[sys.argv[2]]()
    print("ok", sys.argv[2])
