"""Bad input and faults: each gets a clear error, never a crash or a hang."""
import json
import socket
import time

import httpx

from harness import FakeUpstream, Gateway, all_closed, chat, free_port, model_yaml, stream_chat, wait_until


def _error(r, status, code=None):
    assert r.status_code == status, (r.status_code, r.text)
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    if code:
        assert err["code"] == code, err
    return err


def test_bad_requests(env):
    with FakeUpstream() as up, Gateway(env.tidegate, model_yaml("m", [up.port])) as gw:
        with gw.client() as c:
            _error(c.post("/v1/chat/completions", content=b'{"model": "m", "messages": [', headers={"content-type": "application/json"}), 400, "invalid_json")
            e = _error(c.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": "yes"}), 400, "invalid_type")
            assert e["param"] == "stream"
            e = _error(c.post("/v1/chat/completions", json={"model": 7, "messages": [{"role": "user"}]}), 400)
            assert e["param"] == "model"
            _error(c.post("/v1/chat/completions", json={"model": "m", "messages": [], "max_tokens": 5}), 400, "empty_messages")
            _error(c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}]}), 400, "missing_model")
            e = _error(c.post("/v1/chat/completions", json=chat("nope")), 404, "model_not_found")
            assert e["param"] == "model"
            _error(c.post("/v1/completions", json={"model": "m", "prompt": ""}), 400, "empty_prompt")
            # An integer past int64 once reached a conversion that throws and took the process down.
            e = _error(c.post("/v1/chat/completions", json=chat(max_tokens=18446744073709551615)), 400, "invalid_value")
            assert e["param"] == "max_tokens"
            _error(c.post("/v1/chat/completions", content="{\"model\": \"m\", \"messages\": [{\"content\": \"\xff\"}]}".encode("latin-1"),
                          headers={"content-type": "application/json"}), 400, "invalid_json")  # not UTF-8
            # The connection survives all of that: keep-alive after errors.
            assert c.post("/v1/chat/completions", json=chat()).status_code == 200
        assert len(up.requests) == 1  # nothing invalid reached the replica


def test_oversized_body(env):
    with FakeUpstream() as up, Gateway(env.tidegate, model_yaml("m", [up.port])) as gw:
        big = chat(content="x" * (1024 * 1024 + 10))
        r = httpx.post(gw.url + "/v1/chat/completions", json=big, timeout=15)
        _error(r, 413, "body_too_large")
        assert not up.requests
        assert gw.proc.poll() is None


def test_oversized_headers(env):
    with FakeUpstream() as up, Gateway(env.tidegate, model_yaml("m", [up.port])) as gw:
        r = httpx.post(gw.url + "/v1/chat/completions", json=chat(), headers={"x-junk": "y" * 20000}, timeout=15)
        _error(r, 431, "header_too_large")
        assert httpx.get(gw.url + "/healthz").status_code == 200


def test_slow_loris(env):
    with FakeUpstream() as up, Gateway(env.tidegate, model_yaml("m", [up.port]), timeouts=", header_read: 500ms") as gw:
        s = socket.create_connection(("127.0.0.1", gw.port), timeout=10)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
        start = time.monotonic()
        closed = False
        try:
            for _ in range(40):  # one header byte every 100 ms, never finishing
                s.sendall(b"X")
                time.sleep(0.1)
        except (BrokenPipeError, ConnectionResetError):
            closed = True
        if not closed:
            s.settimeout(5)
            closed = s.recv(100) == b""
        assert closed, "slow-loris connection was not closed"
        assert time.monotonic() - start < 4.5
        s.close()
        assert gw.metric("tidegate_local_replies_total", {"reason": "header_timeout"}) == 1
        assert httpx.get(gw.url + "/healthz").status_code == 200


def test_client_disconnect_mid_stream(env):
    with (
        FakeUpstream(mode="slow_stream", tokens=400, tpot=0.02) as up,
        Gateway(env.tidegate, model_yaml("m", [up.port], cap=1, queue_len=0)) as gw,
    ):
        with httpx.Client(timeout=15) as c:
            with c.stream("POST", gw.url + "/v1/chat/completions", json=chat(stream=True)) as r:
                assert r.status_code == 200
                lines = r.iter_lines()
                got = 0
                for line in lines:
                    if line.startswith("data: "):
                        got += 1
                    if got >= 3:
                        break
        # Client gone: the gateway cancels the upstream request and frees the slot.
        wait_until(lambda: up.disconnects == 1, timeout=10, what="upstream to see the cancel")
        wait_until(lambda: gw.metric("tidegate_upstream_in_flight", {"model": "m"}) == 0, what="slot freed")
        up.mode = "ok"
        # cap 1 and no queue: this only succeeds if the slot really came back.
        assert httpx.post(gw.url + "/v1/chat/completions", json=chat(), timeout=10).status_code == 200


def test_client_disconnect_while_waiting(env):
    with FakeUpstream(delay=4.0) as up, Gateway(env.tidegate, model_yaml("m", [up.port], cap=1, queue_len=5)) as gw:
        import threading

        def impatient():
            try:
                httpx.post(gw.url + "/v1/chat/completions", json=chat(), timeout=0.5)
            except httpx.TimeoutException:
                pass

        # One client waits on the replica, one in the queue; both hang up after 0.5 s.
        ts = [threading.Thread(target=impatient) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        # Slot and queue place are freed long before the replica's 4 s answer would come.
        wait_until(lambda: gw.metric("tidegate_upstream_in_flight", {"model": "m"}) == 0
                   and gw.metric("tidegate_queue_depth", {"model": "m"}) == 0, timeout=2, what="slot freed")
        entries = wait_until(lambda: len(gw.access_entries()) == 2 and gw.access_entries(), what="access log")
        assert all(e["status"] == 499 and e["reason"] == "client_disconnected" for e in entries), entries


def test_upstream_refusing_connections(env):
    with Gateway(env.tidegate, model_yaml("m", [free_port()])) as gw:
        r = httpx.post(gw.url + "/v1/chat/completions", json=chat(), timeout=15)
        err = _error(r, 503, "no_ready_replica")
        assert "connect_failed" in err["message"]
        assert gw.metric("tidegate_upstream_errors_total", {"reason": "connect_failed"}) >= 1


def test_replicas_named_by_host_name(env):
    # "localhost" is looked up off the event loop (Asio's resolver thread), kept, and every
    # address it gives is tried in turn (::1 first on some hosts; the replica listens on
    # 127.0.0.1). Probes use the same lookup.
    with FakeUpstream() as up, Gateway(env.tidegate, model_yaml("m", [up.port], health_interval="200ms")
                                       .replace("127.0.0.1", "localhost")) as gw:
        for _ in range(3):
            assert httpx.post(gw.url + "/v1/chat/completions", json=chat(), timeout=10).status_code == 200
        wait_until(lambda: gw.metric("tidegate_upstream_replicas", {"model": "m", "state": "healthy"}) == 1,
                   timeout=5, what="probe of a named replica")
        assert gw.metric("tidegate_upstream_errors_total", {"reason": "resolve_failed"}) in (None, 0)
        assert not [line for line in gw.log if "gateway.replica_unresolved" in line], gw.log
    # A name that does not resolve (RFC 6761: .invalid never does) is said in the log when the
    # replica is added, not only when a request finds out; requests get an OpenAI error.
    gone = model_yaml("gone", [9]).replace("127.0.0.1", "nosuchhost.invalid")
    with FakeUpstream() as up, Gateway(env.tidegate, model_yaml("m", [up.port]) + gone) as gw:
        wait_until(lambda: [line for line in gw.log if "gateway.replica_unresolved" in line], timeout=30,
                   what="the unresolved replica in the log")
        line = json.loads(next(line for line in gw.log if "gateway.replica_unresolved" in line))
        assert line["replica"] == "r0" and line["host"] == "nosuchhost.invalid" and line["level"] == "warn", line
        e = _error(httpx.post(gw.url + "/v1/chat/completions", json=chat("gone"), timeout=30), 503, "no_ready_replica")
        assert "resolve_failed" in e["message"], e
        assert gw.metric("tidegate_upstream_errors_total", {"reason": "resolve_failed"}) >= 1
        assert httpx.post(gw.url + "/v1/chat/completions", json=chat(), timeout=10).status_code == 200


def test_upstream_dies_mid_stream(env):
    from harness import Sim
    with (
        Sim(env.sim, "--die-after", "1", "--ttft-ms", "20", "--tpot-ms", "20", "--max-tokens-default", "200") as sim,
        Gateway(env.tidegate, model_yaml("sim", [sim.port])) as gw,
    ):
        events, _ = stream_chat(gw, chat("sim", stream=True, max_tokens=200))
        assert events, "no events at all"
        last = json.loads(events[-1])
        assert "error" in last, events[-3:]
        assert set(last["error"]) == {"message", "type", "param", "code"}
        assert "[DONE]" not in events
        # The log line is written right after the last byte; the client may be faster.
        entry = wait_until(lambda: [e for e in gw.access_entries() if e["model"] == "sim"], what="access log")[-1]
        assert entry["reason"] in ("stream_broken", "stream_truncated"), entry


def test_upstream_hanging(env):
    with (
        FakeUpstream(mode="hang") as up,
        Gateway(env.tidegate, model_yaml("m", [up.port]), timeouts=", first_byte: 500ms") as gw,
    ):
        start = time.monotonic()
        r = httpx.post(gw.url + "/v1/chat/completions", json=chat(), timeout=15)
        _error(r, 504, "upstream_timeout")
        assert time.monotonic() - start < 5


def test_all_replicas_down(env):
    with Gateway(env.tidegate, model_yaml("m", [free_port(), free_port()], health_interval="100ms", failures=1)) as gw:
        wait_until(lambda: gw.metric("tidegate_upstream_replicas", {"model": "m", "state": "ejected"}) == 2, what="ejection")
        assert httpx.get(gw.url + "/readyz").status_code == 503
        r = httpx.post(gw.url + "/v1/chat/completions", json=chat(), timeout=15)
        _error(r, 503, "no_ready_replica")


def _concurrent(gw, n, body):
    import concurrent.futures as cf
    with cf.ThreadPoolExecutor(n) as ex:
        return list(ex.map(lambda _: httpx.post(gw.url + "/v1/chat/completions", json=body, timeout=20), range(n)))


def test_queue_full(env):
    with FakeUpstream(delay=1.0) as up, Gateway(env.tidegate, model_yaml("m", [up.port], cap=1, queue_len=1)) as gw:
        rs = _concurrent(gw, 4, chat())
        codes = sorted(r.status_code for r in rs)
        assert codes.count(200) == 2 and codes.count(429) == 2, codes
        full = [r for r in rs if r.status_code == 429][0]
        _error(full, 429, "queue_full")
        assert int(full.headers["retry-after"]) >= 1


def test_queue_wait_exceeded(env):
    with (
        FakeUpstream(delay=2.0) as up,
        Gateway(env.tidegate, model_yaml("m", [up.port], cap=1, queue_len=10, max_wait="300ms")) as gw,
    ):
        rs = _concurrent(gw, 2, chat())
        codes = sorted(r.status_code for r in rs)
        assert codes == [200, 503], codes
        late = [r for r in rs if r.status_code == 503][0]
        err = _error(late, 503, "queue_timeout")
        assert "queue" in err["message"]
        assert "retry-after" in late.headers
        assert gw.metric("tidegate_queue_wait_seconds_count", {"model": "m"}) >= 1


def test_upstream_connect_timeout(env):
    # A listener whose accept queue is full: the kernel drops further SYNs, so connects hang
    # (no reply at all, unlike a refused port).
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(0)
    port = lst.getsockname()[1]
    fillers = []
    for _ in range(3):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fillers.append(s)
    with lst, all_closed(fillers), Gateway(env.tidegate, model_yaml("m", [port]), timeouts=", connect: 300ms") as gw:
        start = time.monotonic()
        r = httpx.post(gw.url + "/v1/chat/completions", json=chat(), timeout=15)
        err = _error(r, 503, "no_ready_replica")
        assert "connect_timeout" in err["message"], err
        assert 0.25 < time.monotonic() - start < 5
        assert gw.metric("tidegate_upstream_errors_total", {"reason": "connect_timeout"}) >= 1


def test_upstream_silent_between_chunks(env):
    # One event, then three seconds of silence: the between-chunks timeout ends the stream.
    with (
        FakeUpstream(mode="slow_stream", tokens=3, tpot=3.0) as up,
        Gateway(env.tidegate, model_yaml("m", [up.port]), timeouts=", between_chunks: 400ms") as gw,
    ):
        events, seconds = stream_chat(gw, chat(stream=True))
        assert seconds < 2.5
        assert len(events) == 2, events  # the one event the replica sent, then the error
        err = json.loads(events[-1])["error"]
        assert set(err) == {"message", "type", "param", "code"} and err["code"] == "stream_idle_timeout", err
        entry = wait_until(lambda: gw.access_entries(), what="access log")[-1]
        assert entry["reason"] == "stream_idle_timeout", entry


def test_upstream_total_timeout(env):
    # Events keep coming (none of the step timeouts fires) but the whole exchange is over budget.
    with (
        FakeUpstream(mode="slow_stream", tokens=100, tpot=0.1) as up,
        Gateway(env.tidegate, model_yaml("m", [up.port]), timeouts=", total: 1s") as gw,
    ):
        events, seconds = stream_chat(gw, chat(stream=True))
        assert 0.9 < seconds < 4
        assert 3 <= len(events) < 100, len(events)
        assert json.loads(events[-1])["error"]["code"] == "total_timeout", events[-1]
        # Non-stream: the answer would take 3 s; the budget is 1 s.
        up.mode, up.delay = "ok", 3.0
        start = time.monotonic()
        r = httpx.post(gw.url + "/v1/chat/completions", json=chat(), timeout=15)
        err = _error(r, 504, "upstream_timeout")
        assert "total_timeout" in err["message"], err
        assert time.monotonic() - start < 2.5
        assert gw.metric("tidegate_upstream_errors_total", {"reason": "total_timeout"}) == 2


def test_max_connections(env):
    with (
        FakeUpstream() as up,
        Gateway(env.tidegate, model_yaml("m", [up.port]), limits=", max_connections: 2") as gw,
        gw.client() as a,
        gw.client() as b,
    ):
        assert a.get("/healthz").status_code == 200  # each client holds one kept-alive connection
        assert b.post("/v1/chat/completions", json=chat()).status_code == 200
        for _ in range(5):  # a request already sent must not turn the 503 into a reset
            with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                got = b""
                while chunk := s.recv(4096):  # the gateway answers and closes
                    got += chunk
            head, body = got.split(b"\r\n\r\n", 1)
            assert head.startswith(b"HTTP/1.1 503"), got
            assert f"Content-Length: {len(body)}".encode() in head, got
            assert json.loads(body)["error"]["code"] == "max_connections"
        # A flood past the limit that never hangs up: the first 256 are answered and held for a
        # second while their bytes are drained, the rest answered and closed at once; every
        # one gets its 503, and the held ones are let go (the gateway's clean exit checks that
        # nothing leaked).
        flood = [socket.create_connection(("127.0.0.1", gw.port), timeout=10) for _ in range(300)]
        for s in flood:
            got = b""
            while chunk := s.recv(4096):
                got += chunk
            assert got.startswith(b"HTTP/1.1 503") and got.endswith(b'"max_connections"}}'), got
        time.sleep(1.5)
        for s in flood:
            s.close()
        text = a.get("/metrics").text  # through a held connection: a new one would be turned away
        assert 'tidegate_local_replies_total{reason="max_connections"} 305' in text, \
            [l for l in text.splitlines() if "local_replies" in l]
        b.close()  # a slot frees up: new connections are served again
        wait_until(lambda: httpx.get(gw.url + "/healthz", timeout=5).status_code == 200, what="a free slot")


def _raw(port, data, read_s=5):
    """Sends raw bytes and returns what came back before the gateway closed (or read_s passed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=read_s) as s:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        out = b""
        try:
            while True:
                got = s.recv(65536)
                if not got:
                    break
                out += got
        except (socket.timeout, ConnectionResetError):
            pass
        return out


def test_transfer_encoding_not_ending_in_chunked_is_refused(env):
    # RFC 9112 6.1: the length of such a request cannot be known: 400 and close. Taking the
    # Content-Length instead let an inner request through (request smuggling).
    with FakeUpstream() as up, Gateway(env.tidegate, model_yaml("m", [up.port])) as gw:
        body = json.dumps(chat()).encode()
        smuggled = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
        for te in (b"chunked, identity", b"gzip", b"xchunked", b"identity"):
            req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Transfer-Encoding: " + te + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" +
                   body + smuggled)
            out = _raw(gw.port, req)
            assert out.startswith(b"HTTP/1.1 400"), (te, out[:200])
            assert out.count(b"HTTP/1.1 ") == 1, (te, out)  # the inner request was not answered
        # A list whose elements Beast does not parse as tokens: the gateway once called it
        # chunked while Beast read the chunked body as the next request (fuzz target K1).
        chunked_body = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
        for te in (b"a=b, chunked", b'"x,y", chunked', b"gzip, chunked", b"chunked, chunked"):
            req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Transfer-Encoding: " + te + b"\r\n\r\n" + chunked_body + smuggled)
            out = _raw(gw.port, req)
            assert out.startswith(b"HTTP/1.1 400"), (te, out[:200])
            assert out.count(b"HTTP/1.1 ") == 1, (te, out)
        assert not up.requests
        # Plain chunked is fine (it is the only coding the gateway decodes).
        chunked = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Transfer-Encoding: Chunked\r\nConnection: close\r\n\r\n" + chunked_body)
        assert _raw(gw.port, chunked).startswith(b"HTTP/1.1 200")


def test_chunk_extensions_and_trailers_are_bounded(env):
    # Chunk extensions and trailers used to be buffered whole, before the key was checked:
    # 192 MiB of extension took RSS past 1 GB. Now what the parser cannot consume is bounded by
    # max_header_bytes (plus a little): 431, and the connection closed early.
    with (
        FakeUpstream() as up,
        Gateway(env.tidegate, model_yaml("m", [up.port]), top='api_keys:\n  - {name: k, key: "sk-bounded-0001", tenant: t}') as gw,
    ):
        head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n")
        out = _raw(gw.port, head + b"5;x=" + b"a" * (4 << 20))
        assert out.startswith(b"HTTP/1.1 431"), out[:200]
        trailer = head + b"2\r\n{}\r\n0\r\n" + b"".join(b"X-T%d: %s\r\n" % (i, b"v" * 1000) for i in range(4000)) + b"\r\n"
        out = _raw(gw.port, trailer)
        assert out.startswith(b"HTTP/1.1 431") or out.startswith(b"HTTP/1.1 400"), out[:200]
        # A malformed chunk size is a 400, not a silent close.
        out = _raw(gw.port, head + b"zz\r\n{}\r\n0\r\n\r\n")
        assert out.startswith(b"HTTP/1.1 400"), out[:200]
        assert not up.requests
        assert httpx.get(gw.url + "/healthz").status_code == 200


def test_unknown_models_mint_no_metric_series(env):
    # Requests for models that do not exist share one "(unknown)" label; a long or odd name is
    # echoed only as a bounded prefix.
    with FakeUpstream() as up, Gateway(env.tidegate, model_yaml("m", [up.port])) as gw:
        with gw.client() as c:
            for i in range(5):
                name = f"big-{i}-" + "n" * 200_000
                e = _error(c.post("/v1/chat/completions", json=chat(name)), 404, "model_not_found")
                assert len(e["message"]) < 400, len(e["message"])
            _error(c.post("/v1/chat/completions", json=chat("nul\u0000name")), 404, "model_not_found")
        text = httpx.get(gw.url + "/metrics", timeout=10).text
        assert len(text) < 200_000, len(text)
        assert "big-0" not in text and "nul" not in text
        assert gw.metric("tidegate_requests_total", {"model": "(unknown)", "status": "404"}) == 6


def test_interim_and_invalid_upstream_statuses(env):
    # A 100 Continue from the replica is not its answer (relayed as final, the client waited for a
    # body until its idle timeout); a status outside 200-599 is the replica's fault: another
    # replica answers, or the client gets a 502 naming it.
    with FakeUpstream(mode="continue_first") as cont, Gateway(env.tidegate, model_yaml("m", [cont.port])) as gw:
        with gw.client() as c:
            for _ in range(3):
                r = c.post("/v1/chat/completions", json=chat())
                assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"], r.text
            events, _ = stream_chat(gw, chat(stream=True))
            assert events[-1] == "[DONE]"
    with FakeUpstream(mode="status999") as weird:
        with (
            FakeUpstream() as good,
            Gateway(env.tidegate, model_yaml("m", [weird.port, good.port], balancer="round_robin")) as gw,
        ):
            with gw.client() as c:
                for _ in range(4):
                    assert c.post("/v1/chat/completions", json=chat()).status_code == 200
            assert weird.requests, "round robin never tried the odd replica"
            assert gw.metric("tidegate_upstream_errors_total", {"model": "m", "reason": "bad_status"}) >= 1
        with Gateway(env.tidegate, model_yaml("m", [weird.port])) as gw:
            _error(httpx.post(gw.url + "/v1/chat/completions", json=chat(), timeout=10), 502, "upstream_error")
