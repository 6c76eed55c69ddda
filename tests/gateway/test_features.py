"""Data-path features end to end: streaming, usage, keep-alive, balancing, retries,
health, reloads, drain, metrics, auth, and the official openai SDK."""
import json
import signal
import socket
import subprocess
import threading
import time

import httpx

from harness import (SLOWDOWN, FakeUpstream, Gateway, Sim, all_closed, chat, free_port, model_yaml, sse_events,
                     stream_chat, wait_until)


def test_streaming_passthrough(env):
    with (
        Sim(env.sim, "--ttft-ms", "10", "--tpot-ms", "30", "--echo") as sim,
        Gateway(env.tidegate, model_yaml("sim", [sim.port])) as gw,
    ):
        arrivals = []
        with httpx.Client(timeout=20) as c:
            with c.stream("POST", gw.url + "/v1/chat/completions",
                          json=chat("sim", "stream me please", stream=True, max_tokens=12)) as r:
                assert r.status_code == 200
                assert r.headers["content-type"].startswith("text/event-stream")
                assert r.headers.get("transfer-encoding") == "chunked"
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        arrivals.append((time.monotonic(), line[6:]))
        payloads = [p for _, p in arrivals]
        assert payloads[-1] == "[DONE]"
        text = "".join(json.loads(p)["choices"][0]["delta"].get("content") or "" for p in payloads[:-1])
        assert text.startswith("stream me please"), text
        # Chunk by chunk, not buffered: events arrive spread over the generation time.
        assert arrivals[-1][0] - arrivals[0][0] > 0.15


def test_usage_stripping(env):
    with FakeUpstream(tokens=4) as up, Gateway(env.tidegate, model_yaml("m", [up.port])) as gw:
        with httpx.Client(timeout=20) as c:
            with c.stream("POST", gw.url + "/v1/chat/completions", json=chat(stream=True)) as r:
                plain = sse_events(r)
            with c.stream("POST", gw.url + "/v1/chat/completions",
                          json=chat(stream=True, stream_options={"include_usage": True})) as r:
                asked = sse_events(r)
        # The gateway asked upstream for usage both times...
        assert up.requests[0]["stream_options"] == {"include_usage": True}
        # ...and other fields went through untouched.
        assert up.requests[0]["messages"] == [{"role": "user", "content": "hello"}]
        # The client that did not ask never sees the usage chunk; the one that asked does.
        assert not any('"usage"' in p for p in plain), plain
        assert plain[-1] == "[DONE]" and len(plain) == 5
        assert any(json.loads(p).get("usage") for p in asked[:-1])
        # The gateway learned the tokens in both cases.
        entries = wait_until(lambda: len(gw.access_entries()) == 2 and gw.access_entries(), what="access log")
        assert [e["completion_tokens"] for e in entries] == [4, 4], entries


def test_request_bodies_of_every_size_reach_the_replica_intact(env):
    # Small bodies travel in the head's buffer, larger ones (over 16 KiB) from the client's own
    # bytes, and a body larger than a socket buffer needs several writes: all arrive intact.
    with FakeUpstream() as up, Gateway(env.tidegate, model_yaml("m", [up.port])) as gw:
        sizes = [10, 15 * 1024, 16 * 1024, 17 * 1024, 600 * 1024]
        with httpx.Client(base_url=gw.url, timeout=20, limits=httpx.Limits(max_connections=1)) as c:
            for i, n in enumerate(sizes):
                content = "".join(chr(ord("a") + (i + k) % 26) for k in range(n))
                r = c.post("/v1/chat/completions", json=chat(content=content, user=f"u{i}"))
                assert r.status_code == 200, r.text
                got = up.requests[-1]
                assert got["messages"] == [{"role": "user", "content": content}], n
                assert got["user"] == f"u{i}"
        assert len(up.requests) == len(sizes)


def test_keep_alive(env):
    with FakeUpstream() as up, Gateway(env.tidegate, model_yaml("m", [up.port])) as gw:
        with httpx.Client(base_url=gw.url, timeout=10, limits=httpx.Limits(max_connections=1)) as c:
            for _ in range(15):
                assert c.post("/v1/chat/completions", json=chat()).status_code == 200
            text = c.get("/metrics").text
        total = [l for l in text.splitlines() if l.startswith("tidegate_connections_total")]
        assert total and float(total[0].split()[-1]) == 1.0, total


def _read_response(sock, buf):
    """One HTTP/1.1 response with a Content-Length from a raw socket: (status, body, rest)."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        assert chunk, "connection closed before a response head"
        buf += chunk
    head, _, buf = buf.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    length = next(int(l.split(":", 1)[1]) for l in lines if l.lower().startswith("content-length:"))
    while len(buf) < length:
        chunk = sock.recv(65536)
        assert chunk, "connection closed inside a body"
        buf += chunk
    return int(lines[0].split()[1]), buf[:length], buf[length:]


def test_silent_and_idle_connections_closed(env):
    # The wait for a connection's first request and the keep-alive wait between requests are
    # timed by the worker's tick (up to 100 ms late), not by a timer each: both still close.
    with (
        FakeUpstream() as up,
        Gateway(env.tidegate, model_yaml("m", [up.port]), timeouts=", header_read: 400ms, idle: 700ms") as gw,
    ):
        host, port = gw.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=5) as silent:
            start = time.monotonic()
            assert silent.recv(100) == b"", "a connection that sends nothing must be closed"
            waited = time.monotonic() - start
            assert 0.3 <= waited < 2.0, waited
        with socket.create_connection((host, int(port)), timeout=5) as idle:
            body = json.dumps(chat()).encode()
            idle.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                          f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
            status, _, rest = _read_response(idle, b"")
            assert status == 200 and rest == b""
            start = time.monotonic()
            assert idle.recv(100) == b"", "an idle keep-alive connection must be closed"
            waited = time.monotonic() - start
            assert 0.6 <= waited < 2.5, waited
        assert httpx.get(gw.url + "/healthz").status_code == 200


def test_pipelined_requests(env):
    # The second request arrives while the first waits on the model: the gateway's watch for
    # a client hang-up must keep it as the next request, not take it for a disconnect.
    with (
        Sim(env.sim, "--ttft-ms", "300", "--tpot-ms", "1", "--echo") as sim,
        Gateway(env.tidegate, model_yaml("sim", [sim.port])) as gw,
    ):
        host, port = gw.url.removeprefix("http://").split(":")
        raw = b""
        for word in ("first", "second", "third"):
            body = json.dumps(chat("sim", f"{word} prompt", max_tokens=4)).encode()
            raw += (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n").encode() + body
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(raw[:len(raw) // 3 + 10])  # all of the first request and a bit of the second
            time.sleep(0.1)
            sock.sendall(raw[len(raw) // 3 + 10:])
            buf = b""
            for word in ("first", "second", "third"):
                status, body, buf = _read_response(sock, buf)
                assert status == 200, body
                text = json.loads(body)["choices"][0]["message"]["content"]
                assert text.startswith(f"{word} prompt"), (word, text)
            # Replies the gateway answers itself, 200 pipelined in one write: each is written as
            # soon as it is ready, and the chain of them must neither overflow the stack nor
            # lose or reorder one.
            paths = ["/healthz" if i % 2 else "/nope" for i in range(200)]
            sock.sendall(b"".join(f"GET {p} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode() for p in paths))
            for p in paths:
                status, body, buf = _read_response(sock, buf)
                assert status == (200 if p == "/healthz" else 404), (p, status, body)
        entries = wait_until(lambda: len(gw.access_entries()) == 3 and gw.access_entries(), what="access log")
        assert [e["status"] for e in entries] == [200, 200, 200], entries


def test_load_balancing_spread(env):
    with (
        all_closed([Sim(env.sim, "--ttft-ms", "20", "--tpot-ms", "1") for _ in range(3)]) as sims,
        Gateway(env.tidegate, model_yaml("sim", [s.port for s in sims])) as gw,
    ):
        import concurrent.futures as cf
        with httpx.Client(timeout=20) as c, cf.ThreadPoolExecutor(6) as ex:
            codes = list(ex.map(lambda _: c.post(gw.url + "/v1/chat/completions", json=chat("sim", max_tokens=3)).status_code, range(60)))
        assert codes == [200] * 60
        wait_until(lambda: len(gw.access_entries()) == 60, what="access log")
        counts = {}
        for e in gw.access_entries():
            counts[e["upstream"]] = counts.get(e["upstream"], 0) + 1
        assert set(counts) == {"r0", "r1", "r2"}, counts
        assert min(counts.values()) >= 8, counts


def test_retries(env):
    with (
        FakeUpstream(mode="fail500") as bad,
        FakeUpstream() as good,
        Gateway(env.tidegate, model_yaml("m", [bad.port, good.port, free_port()], balancer="round_robin")) as gw,
    ):
        with gw.client() as c:
            for _ in range(6):
                r = c.post("/v1/chat/completions", json=chat())
                assert r.status_code == 200, r.text
        assert bad.requests, "round robin never tried the failing replica"
        assert gw.metric("tidegate_retries_total", {"model": "m"}) >= 2
        # With a single failing replica nothing else can answer: its 5xx is relayed.
        with Gateway(env.tidegate, model_yaml("m", [bad.port])) as gw2:
            assert httpx.post(gw2.url + "/v1/chat/completions", json=chat(), timeout=10).status_code == 500


def test_passive_ejection_and_readmission(env):
    with (
        FakeUpstream(mode="crash500") as up,
        Gateway(env.tidegate, model_yaml("m", [up.port], health_interval="1s", failures=2)) as gw,
    ):
        wait_until(lambda: httpx.get(gw.url + "/readyz").status_code == 200, what="first probe")
        with gw.client() as c:
            for _ in range(2):
                assert c.post("/v1/chat/completions", json=chat()).status_code == 500
            # Two failures in a row: ejected without waiting for a probe.
            assert gw.metric("tidegate_upstream_replicas", {"model": "m", "state": "ejected"}) == 1
            assert c.post("/v1/chat/completions", json=chat()).status_code == 503
            up.mode = "ok"
            # The next successful probe re-admits it.
            wait_until(lambda: gw.metric("tidegate_upstream_replicas", {"model": "m", "state": "healthy"}) == 1,
                       timeout=5, what="re-admission")
            assert c.post("/v1/chat/completions", json=chat()).status_code == 200


def test_sighup_reload(env):
    with FakeUpstream() as a, FakeUpstream() as b, Gateway(env.tidegate, model_yaml("m", [a.port])) as gw:
        with gw.client() as c:
            assert c.post("/v1/chat/completions", json=chat()).status_code == 200
            gw.write_config(model_yaml("m", [b.port]) + model_yaml("n", [b.port]),
                            top='api_keys:\n  - {name: team-a, key: "sk-reload-0001", tenant: acme, tags: {team: a}}')
            gw.signal(signal.SIGHUP)
            wait_until(lambda: any("gateway.reloaded" in l for l in gw.log), what="reload")
            # Same keep-alive connection, new rules: a key is required now.
            r = c.post("/v1/chat/completions", json=chat())
            assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key", r.text
            hdr = {"authorization": "Bearer sk-reload-0001"}
            assert c.post("/v1/chat/completions", json=chat(), headers=hdr).status_code == 200
            assert c.post("/v1/chat/completions", json=chat("n"), headers=hdr).status_code == 200
            ids = {m["id"] for m in c.get("/v1/models").json()["data"]}
            assert ids == {"m", "n"}
        assert len(a.requests) == 1 and len(b.requests) == 2  # old replica drained out
        entries = wait_until(lambda: len(gw.access_entries()) == 4 and gw.access_entries(), what="access log")
        assert entries[-1]["tenant"] == "acme" and entries[-1]["key"] == "team-a"
        assert not any("sk-reload-0001" in json.dumps(e) for e in entries)
        assert not any("sk-reload-0001" in l for l in gw.log)
        # A broken edit keeps the running config.
        with open(gw.config_path, "w") as f:
            f.write("models: [{name: m, bogus: 1}]\n")
        gw.signal(signal.SIGHUP)
        wait_until(lambda: any("gateway.reload_failed" in l for l in gw.log), what="reload failure")
        assert httpx.post(gw.url + "/v1/chat/completions", json=chat(), headers=hdr, timeout=10).status_code == 200


def test_sigterm_drain(env):
    with FakeUpstream(delay=1.0) as up, Gateway(env.tidegate, model_yaml("m", [up.port])) as gw:
        result = {}

        def slow():
            result["r"] = httpx.post(gw.url + "/v1/chat/completions", json=chat(), timeout=10)

        t = threading.Thread(target=slow)
        t.start()
        wait_until(lambda: up.active == 1, what="request in flight")
        gw.signal(signal.SIGTERM)
        t.join(timeout=15)
        assert result["r"].status_code == 200  # in-flight request finished
        assert gw.proc.wait(timeout=15) == 0
        try:
            httpx.get(gw.url + "/healthz", timeout=2)
            raise AssertionError("still accepting after drain")
        except httpx.ConnectError:
            pass


def test_metrics_promtool(env):
    with FakeUpstream() as up, Gateway(env.tidegate, model_yaml("m", [up.port])) as gw:
        with gw.client() as c:
            c.post("/v1/chat/completions", json=chat())
            c.post("/v1/chat/completions", json=chat(stream=True))
            c.post("/v1/chat/completions", json=chat("unknown"))
            text = c.get("/metrics").text
        for name in ("tidegate_requests_total", "tidegate_request_duration_seconds", "tidegate_time_to_first_byte_seconds",
                     "tidegate_gateway_overhead_seconds", "tidegate_queue_depth", "tidegate_upstream_replicas",
                     "tidegate_local_replies_total"):
            assert name in text, name
        p = subprocess.run([env.promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
        assert p.returncode == 0 and p.stdout == "" and p.stderr == "", (p.stdout, p.stderr)
        assert gw.metric("tidegate_requests_total", {"model": "m", "status": "200"}) == 2
        # Recorded, not just declared: each served request is one observation.
        assert gw.metric("tidegate_request_duration_seconds_count", {"model": "m"}) == 2
        assert gw.metric("tidegate_time_to_first_byte_seconds_count", {"model": "m"}) == 2
        assert gw.metric("tidegate_gateway_overhead_seconds_count") >= 2
        assert gw.metric("tidegate_requests_total", {"model": "(unknown)", "status": "404"}) == 1


def test_openai_sdk(env):
    import openai
    with (
        Sim(env.sim, "--ttft-ms", "5", "--tpot-ms", "2", "--echo") as sim,
        Gateway(env.tidegate, model_yaml("sim", [sim.port]),
                top='api_keys:\n  - {name: sdk, key: "sk-sdk-test-1", tenant: t1}') as gw,
    ):
        client = openai.OpenAI(base_url=gw.url + "/v1", api_key="sk-sdk-test-1", max_retries=0)
        r = client.chat.completions.create(model="sim", messages=[{"role": "user", "content": "ping from sdk"}], max_tokens=8)
        assert r.choices[0].message.content.startswith("ping from sdk")
        assert r.usage.completion_tokens > 0
        chunks = list(client.chat.completions.create(model="sim", messages=[{"role": "user", "content": "stream sdk"}],
                                                     max_tokens=8, stream=True))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text.startswith("stream sdk")
        assert all(c.usage is None for c in chunks)  # not asked, so stripped
        models = [m.id for m in client.models.list()]
        assert models == ["sim"]
        bad = openai.OpenAI(base_url=gw.url + "/v1", api_key="sk-wrong-key", max_retries=0)
        try:
            bad.chat.completions.create(model="sim", messages=[{"role": "user", "content": "x"}])
            raise AssertionError("bad key accepted")
        except openai.AuthenticationError:
            pass
        assert gw.metric("tidegate_requests_total", {"model": "sim", "tenant": "t1", "status": "200"}) == 2


def test_check_config(env):
    import os
    import tempfile
    d = tempfile.mkdtemp()
    good, bad = os.path.join(d, "good.yaml"), os.path.join(d, "bad.yaml")
    with open(good, "w") as f:
        f.write("listen: \"127.0.0.1:0\"\nmodels:\n" + model_yaml("m", [18001]))
    with open(bad, "w") as f:
        f.write("listen: \"127.0.0.1:0\"\nmodels:\n  - name: m\n    max_concurrency_per_replica: lots\n")
    p = subprocess.run([env.tidegate, "--check-config", good], capture_output=True, text=True, timeout=10)
    assert p.returncode == 0 and p.stdout.strip() == "config ok", (p.stdout, p.stderr)
    p = subprocess.run([env.tidegate, "--check-config", bad], capture_output=True, text=True, timeout=10)
    assert p.returncode == 2
    assert "models[0].max_concurrency_per_replica" in p.stderr and "line 4" in p.stderr, p.stderr
    for cfg in ("demo.yaml", "bench-passthrough.yaml", "bench-cache.yaml", "vllm.yaml"):
        path = os.path.join(env.source_root, "configs", cfg)
        p = subprocess.run([env.tidegate, "--check-config", path], capture_output=True, text=True, timeout=10)
        assert p.returncode == 0, (cfg, p.stderr)


def test_upstream_key_and_body_cap(env):
    # Replica keys: a replica's own api_key wins over the model's replica_api_key; the client's
    # key never goes upstream. Bodies over limits.max_upstream_body_bytes end in a 502.
    own, shared = FakeUpstream(tokens=400), FakeUpstream(tokens=400)
    models = f"""  - name: m
    replica_api_key: "sk-shared"
    replicas:
      - {{id: own, url: "http://127.0.0.1:{own.port}", api_key: "sk-own"}}
  - name: n
    replica_api_key: "sk-shared"
    replicas:
      - {{id: shared, url: "http://127.0.0.1:{shared.port}"}}
"""
    with (
        own,
        shared,
        Gateway(env.tidegate, models, limits=", max_upstream_body_bytes: 1KiB",
                top='api_keys:\n  - {name: c, key: "sk-client-secret", tenant: t}') as gw,
    ):
        auth = {"Authorization": "Bearer sk-client-secret"}
        with gw.client() as c:
            r = c.post("/v1/chat/completions", json=chat("m"), headers=auth)
            assert r.status_code == 502, r.text
            assert r.json()["error"]["code"] == "upstream_body_too_large"
            with c.stream("POST", "/v1/chat/completions", json=chat("n", stream=True), headers=auth) as s:
                assert s.status_code == 200
                events = sse_events(s)  # streams are not capped: never buffered whole
            assert events[-1] == "[DONE]" and len(events) == 401
            small = c.post("/v1/chat/completions", json=chat("n", max_tokens=2), headers=auth)
            assert small.status_code == 502  # 400 tokens of FakeUpstream are > 1KiB as well
        assert own.headers[0].get("authorization") == "Bearer sk-own"
        assert all(h.get("authorization") == "Bearer sk-shared" for h in shared.headers), shared.headers
        assert not any("sk-client-secret" in str(h) for h in own.headers + shared.headers)
        assert gw.metric("tidegate_upstream_errors_total", {"reason": "body_too_large"}) == 2
        # The replica stays routable: a big answer is not a replica failure.
        assert c is not None and gw.metric("tidegate_upstream_replicas", {"state": "ejected"}) == 0


def test_retries_are_bounded_and_never_follow_the_first_byte(env):
    # Bounded: with max_retries 1, a request meets at most two failing replicas; by default, three.
    with all_closed([FakeUpstream(mode="crash500") for _ in range(4)]) as bad:
        with Gateway(env.tidegate, model_yaml("m", [u.port for u in bad[:3]], balancer="round_robin"),
                     top="max_retries: 1") as gw:
            assert httpx.post(gw.url + "/v1/chat/completions", json=chat(), timeout=10).status_code == 500
            assert sum(len(u.requests) for u in bad) == 2
            assert gw.metric("tidegate_retries_total", {"model": "m"}) == 1
        for u in bad:
            u.requests.clear()
        with Gateway(env.tidegate, model_yaml("m", [u.port for u in bad], balancer="round_robin")) as gw:
            assert httpx.post(gw.url + "/v1/chat/completions", json=chat(), timeout=10).status_code == 500
            assert sum(len(u.requests) for u in bad) == 3
    # Never after the first byte: a stream cut after two events is not replayed elsewhere
    # (the client already has part of an answer); it ends with an error event instead.
    with (
        FakeUpstream(mode="break_stream") as cut,
        FakeUpstream() as good,
        Gateway(env.tidegate, model_yaml("m", [cut.port, good.port], balancer="round_robin")) as gw,
    ):
        endings = []
        for _ in range(4):
            events, _ = stream_chat(gw, chat(stream=True))
            endings.append("done" if events[-1] == "[DONE]" else json.loads(events[-1])["error"]["code"])
        assert len(cut.requests) >= 1 and len(good.requests) >= 1, (len(cut.requests), len(good.requests))
        assert len(cut.requests) + len(good.requests) == 4  # each request went to exactly one replica
        assert endings.count("stream_broken") == len(cut.requests), endings
        assert endings.count("done") == len(good.requests), endings
        assert not gw.metric("tidegate_retries_total", {"model": "m"})


def test_completions_and_embeddings(env):
    with (
        Sim(env.sim, "--ttft-ms", "2", "--tpot-ms", "2", "--echo") as sim,
        Gateway(env.tidegate, model_yaml("sim", [sim.port])) as gw,
    ):
        with gw.client() as c:
            r = c.post("/v1/completions", json={"model": "sim", "prompt": "complete this line", "max_tokens": 6})
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["object"] == "text_completion"
            assert body["choices"][0]["text"].startswith("complete this line")
            assert body["usage"]["completion_tokens"] > 0
            with c.stream("POST", "/v1/completions",
                          json={"model": "sim", "prompt": "stream this line", "max_tokens": 6, "stream": True}) as r:
                assert r.status_code == 200
                events = sse_events(r)
            assert events[-1] == "[DONE]"
            chunks = [json.loads(e) for e in events[:-1]]
            assert "".join(ch["choices"][0]["text"] for ch in chunks if ch["choices"]).startswith("stream this line")
            assert all("usage" not in ch or ch["usage"] is None for ch in chunks)  # injected, then stripped
            r = c.post("/v1/embeddings", json={"model": "sim", "input": ["first text", "second text"]})
            assert r.status_code == 200, r.text
            data = r.json()["data"]
            assert [d["index"] for d in data] == [0, 1]
            assert len(data[0]["embedding"]) > 8 and data[0]["embedding"] != data[1]["embedding"]
            assert r.json()["usage"]["prompt_tokens"] > 0
        assert gw.metric("tidegate_requests_total", {"model": "sim", "status": "200"}) == 3
        entries = wait_until(lambda: len(gw.access_entries()) == 3 and gw.access_entries(), what="access log")
        assert all(e["completion_tokens"] > 0 for e in entries[:2]), entries
        assert entries[2]["prompt_tokens"] > 0, entries[2]


def test_access_log_sampling(env):
    with FakeUpstream() as up:
        with Gateway(env.tidegate, model_yaml("m", [up.port]), sample_rate=0.0) as gw:
            with gw.client() as c:
                for _ in range(5):
                    assert c.post("/v1/chat/completions", json=chat()).status_code == 200
                assert c.post("/v1/chat/completions", json=chat("nope")).status_code == 404
                assert c.post("/v1/chat/completions", json={"model": "m", "messages": []}).status_code == 400
            # Sequential on one connection: had a success been logged, it would be ahead of these.
            entries = wait_until(lambda: len(gw.access_entries()) >= 2 and gw.access_entries(), what="error lines")
            assert [e["status"] for e in entries] == [404, 400], entries
        with Gateway(env.tidegate, model_yaml("m", [up.port]), sample_rate=0.5) as gw:
            with gw.client() as c:
                for _ in range(40):
                    assert c.post("/v1/chat/completions", json=chat()).status_code == 200
                assert c.post("/v1/chat/completions", json=chat("nope")).status_code == 404
            entries = wait_until(lambda: [e for e in gw.access_entries() if e["status"] == 404] and gw.access_entries(),
                                 what="the error line")
            logged = sum(1 for e in entries if e["status"] == 200)
            assert 0 < logged < 40, logged  # all or none of 40 at rate 0.5: odds below 1e-11


def test_queue_depth_while_waiting(env):
    with FakeUpstream(delay=1.5) as up, Gateway(env.tidegate, model_yaml("m", [up.port], cap=1, queue_len=5)) as gw:
        results = []
        threads = [threading.Thread(target=lambda: results.append(
            httpx.post(gw.url + "/v1/chat/completions", json=chat(), timeout=15).status_code)) for _ in range(3)]
        for t in threads:
            t.start()
        # One request at the replica (cap 1), two waiting in the admission queue.
        wait_until(lambda: gw.metric("tidegate_queue_depth", {"model": "m"}) == 2, timeout=5, what="queue depth 2")
        for t in threads:
            t.join(timeout=15)
        assert results == [200, 200, 200]
        assert gw.metric("tidegate_queue_depth", {"model": "m"}) == 0
        # Only the two that waited are observed (a request granted at once never queued).
        assert gw.metric("tidegate_queue_wait_seconds_count", {"model": "m"}) == 2


def test_readyz_needs_every_model(env):
    with (
        FakeUpstream() as up,
        Gateway(env.tidegate, model_yaml("a", [up.port], health_interval="100ms")
                + model_yaml("b", [free_port()], health_interval="100ms", failures=1)) as gw,
    ):
        ready = wait_until(lambda: (r := httpx.get(gw.url + "/readyz", timeout=5).json())["models"] == {"a": True, "b": False}
                           and r, what="a ready, b down")
        assert ready["ready"] is False
        assert httpx.get(gw.url + "/readyz", timeout=5).status_code == 503
        assert httpx.get(gw.url + "/healthz", timeout=5).status_code == 200  # alive, just not ready
        assert httpx.post(gw.url + "/v1/chat/completions", json=chat("a"), timeout=10).status_code == 200


def test_reload_with_requests_in_flight(env):
    # A SIGHUP that moves the model to another replica: requests already at the old one finish.
    with (
        FakeUpstream(delay=1.0) as a,
        FakeUpstream() as b,
        FakeUpstream(mode="slow_stream", tokens=20, tpot=0.05) as slow_stream,
        Gateway(env.tidegate, model_yaml("m", [a.port]) + model_yaml("s", [slow_stream.port])) as gw,
    ):
        results, streamed = [], []

        def post():
            results.append(httpx.post(gw.url + "/v1/chat/completions", json=chat(), timeout=15).status_code)

        def stream():
            streamed.extend(stream_chat(gw, chat("s", stream=True))[0])

        threads = [threading.Thread(target=post) for _ in range(4)] + [threading.Thread(target=stream)]
        for t in threads:
            t.start()
        wait_until(lambda: a.active == 4 and slow_stream.active == 1, what="requests in flight")
        gw.write_config(model_yaml("m", [b.port]) + model_yaml("s", [b.port]))
        gw.signal(signal.SIGHUP)
        wait_until(lambda: any("gateway.reloaded" in l for l in gw.log), what="reload")
        assert httpx.post(gw.url + "/v1/chat/completions", json=chat(), timeout=10).status_code == 200
        for t in threads:
            t.join(timeout=15)
        assert results == [200] * 4
        assert streamed[-1] == "[DONE]" and len(streamed) == 21, streamed[-2:]
        assert len(a.requests) == 4 and len(b.requests) == 1


def test_a_probe_that_gets_no_answer_times_out_and_ejects(env):
    # /health accepts and never answers: the probe's deadline (health.timeout, 500 ms in the
    # harness), enforced by the probe loop's tick, fails it, and the replica is ejected.
    with (
        FakeUpstream(health="hang") as silent,
        FakeUpstream() as steady,
        Gateway(env.tidegate, model_yaml("m", [silent.port, steady.port], health_interval="100ms", failures=1)) as gw,
    ):
        start = time.monotonic()
        wait_until(lambda: gw.metric("tidegate_upstream_replicas", {"model": "m", "state": "ejected"}) == 1,
                   timeout=5, what="the silent replica ejected")
        assert time.monotonic() - start < 3 * SLOWDOWN  # one probe timeout (0.5 s) plus a tick or two, not 5 s
        with gw.client() as c:
            for _ in range(3):
                assert c.post("/v1/chat/completions", json=chat()).status_code == 200
        assert not silent.requests and len(steady.requests) == 3


def test_probe_ejects_a_replica_that_answers_not_ready(env):
    # Reachable but saying 503 on /health (a model still loading): ejected by the probe, and
    # routed to again once its probe passes.
    with (
        FakeUpstream(health=503) as loading,
        FakeUpstream() as steady,
        Gateway(env.tidegate, model_yaml("m", [loading.port, steady.port], balancer="round_robin",
                                         health_interval="100ms", failures=1)) as gw,
    ):
        wait_until(lambda: gw.metric("tidegate_upstream_replicas", {"model": "m", "state": "ejected"}) == 1,
                   what="the loading replica ejected")
        with gw.client() as c:
            for _ in range(4):
                assert c.post("/v1/chat/completions", json=chat()).status_code == 200
        assert not loading.requests and len(steady.requests) == 4
        loading.health = 200
        wait_until(lambda: gw.metric("tidegate_upstream_replicas", {"model": "m", "state": "ejected"}) == 0,
                   what="re-admission")
        with gw.client() as c:
            for _ in range(4):
                assert c.post("/v1/chat/completions", json=chat()).status_code == 200
        assert len(loading.requests) >= 1


def test_weighted_balancing(env):
    big, small = FakeUpstream(), FakeUpstream()
    models = f"""  - name: m
    balancer: weighted
    health: {{interval: 0}}
    replicas:
      - {{id: big, url: "http://127.0.0.1:{big.port}", weight: 4}}
      - {{id: small, url: "http://127.0.0.1:{small.port}", weight: 1}}
"""
    with big, small, Gateway(env.tidegate, models) as gw:
        with gw.client() as c:
            for _ in range(200):
                assert c.post("/v1/chat/completions", json=chat()).status_code == 200
        # Expected 160 / 40; the band is about 5 standard deviations of a 0.8 binomial wide.
        assert 130 <= len(big.requests) <= 186 and len(big.requests) + len(small.requests) == 200, \
            (len(big.requests), len(small.requests))


def test_refusals_get_one_second_opinion(env):
    # A 500 with an engine error object is unclear (the input, or the engine?): one other
    # replica is asked. Refused there too, it is the request's: relayed, never more than two
    # engine calls, and no replica is held to blame for it.
    with all_closed([FakeUpstream(mode="fail500") for _ in range(3)]) as ups:
        with Gateway(env.tidegate, model_yaml("m", [u.port for u in ups], balancer="round_robin",
                                              health_interval="60s", failures=2)) as gw:
            with gw.client() as c:
                for _ in range(6):
                    r = c.post("/v1/chat/completions", json=chat())
                    assert r.status_code == 500, r.text
                    assert r.json()["error"] == {"message": "boom", "type": "server_error", "param": None,
                                                 "code": "upstream_error"}
            assert sum(len(u.requests) for u in ups) == 12
            assert not gw.metric("tidegate_upstream_replicas", {"model": "m", "state": "ejected"})
            assert gw.metric("tidegate_upstream_rejections_total", {"model": "m", "status": "500"}) == 6
        # Served by the second: the first replica's refusal was its own, and counts against it.
        with (
            FakeUpstream(mode="fail500") as refusing,
            FakeUpstream() as good,
            Gateway(env.tidegate, model_yaml("m", [refusing.port, good.port], balancer="round_robin",
                                             health_interval="60s", failures=2)) as gw,
        ):
            with gw.client() as c:
                for _ in range(4):
                    assert c.post("/v1/chat/completions", json=chat()).status_code == 200
            wait_until(lambda: gw.metric("tidegate_upstream_replicas", {"model": "m", "state": "ejected"}) == 1,
                       what="the refusing replica ejected")
            assert len(refusing.requests) == 2, len(refusing.requests)


def test_one_tenants_bad_requests_never_fail_another(env):
    # Two replicas that refuse "poisoned" input the way llama.cpp refuses an image sent to a
    # text model (500 with an error object) and serve everything else. One tenant sends bad
    # requests as fast as it can while another chats: the chat never fails, no replica is
    # ejected, and each bad request costs at most two engine calls.
    keys = "api_keys:\n  - {name: bad, key: sk-bad-tenant-1, tenant: bad}\n  - {name: good, key: sk-good-tenant-1, tenant: good}"
    with (
        all_closed([FakeUpstream(mode="refuse_poison") for _ in range(2)]) as ups,
        Gateway(env.tidegate, model_yaml("m", [u.port for u in ups], health_interval="60s", failures=2), top=keys) as gw,
    ):
        stop = threading.Event()
        bad_codes = []

        def bad_tenant():
            with httpx.Client(timeout=10, headers={"Authorization": "Bearer sk-bad-tenant-1"}) as c:
                for _ in range(200):  # bounded
                    if stop.is_set():
                        return
                    bad_codes.append(c.post(gw.url + "/v1/chat/completions", json=chat("m", "poison pill")).status_code)

        try:
            t = threading.Thread(target=bad_tenant)
            t.start()
            good_codes = []
            with httpx.Client(timeout=10, headers={"Authorization": "Bearer sk-good-tenant-1"}) as c:
                for _ in range(40):
                    good_codes.append(c.post(gw.url + "/v1/chat/completions", json=chat("m", "hello")).status_code)
                    time.sleep(0.01)
            stop.set()
            t.join()
            assert good_codes == [200] * 40, good_codes
            assert len(bad_codes) >= 10 and set(bad_codes) == {500}, bad_codes
            assert not gw.metric("tidegate_upstream_replicas", {"model": "m", "state": "ejected"})
            poisoned = sum(1 for u in ups for r in u.requests if "poison" in json.dumps(r))
            assert poisoned <= 2 * len(bad_codes), (poisoned, len(bad_codes))
        finally:
            stop.set()  # the bad tenant's thread ends with the test, whatever failed


def test_engine_errors_become_openai_errors(env):
    # llama.cpp's and vLLM's error bodies carry the status as an integer "code"; clients
    # get OpenAI's shape with a string code, and the engine's message.
    with FakeUpstream() as up, Gateway(env.tidegate, model_yaml("m", [up.port])) as gw:
        up.mode = "context_overflow"
        r = httpx.post(gw.url + "/v1/chat/completions", json=chat(), timeout=10)
        assert r.status_code == 400
        err = r.json()["error"]
        assert err["code"] == "context_length_exceeded" and err["type"] == "invalid_request_error", err
        assert "exceeds the available context size" in err["message"]


def test_sighup_survives_sections_of_the_wrong_shape(env):
    # `signals: x` in a scaler pool once escaped the loader as yaml-cpp's BadSubscript and ended
    # the running gateway on SIGHUP; now it is a reload failure naming the section, and the old
    # config keeps serving.
    with FakeUpstream() as up, Gateway(env.tidegate, model_yaml("m", [up.port])) as gw:
        bad = (model_yaml("m", [up.port]), "scaler:\n  pools:\n    - model: m\n      actuator: {kind: process, command: "
               "[x, \"{port}\"], ports: 30000-30010}\n      policy: {min_replicas: 1, max_replicas: 2}\n      signals: x\n")
        for n in range(2):
            gw.write_config(bad[0], top=bad[1])
            gw.signal(signal.SIGHUP)
            wait_until(lambda: sum("gateway.reload_failed" in l for l in gw.log) > n, what="reload failure")
            assert gw.proc.poll() is None, "the gateway died on a bad reload"
            assert httpx.post(gw.url + "/v1/chat/completions", json=chat(), timeout=10).status_code == 200
        failed = [l for l in gw.log if "gateway.reload_failed" in l]
        assert "scaler" in failed[-1], failed[-1]
