"""Hardening (issue 18): secure defaults, guarded routes, what clients and replicas can put in
logs and streams, and configs a loader must refuse. Each test failed on the binary before
its fix."""
import base64
import json
import os
import signal
import subprocess
import tempfile

import httpx

from harness import FakeUpstream, Gateway, chat, model_yaml, wait_until
from test_faults import _raw

KEYS = """api_keys:
  - {name: a, key: sk-hard-tenant-a, tenant: a}
"""
ADMIN = "admin_key: sk-hard-admin-0001\n"


def _check_config(env, text):
    d = tempfile.mkdtemp(prefix="tidegate-it-cfg-")
    path = os.path.join(d, "gw.yaml")
    with open(path, "w") as f:
        f.write(text)
    return subprocess.run([env.tidegate, "--check-config", path], capture_output=True, text=True, timeout=10)


def test_admin_routes_are_closed_when_keys_exist_but_no_admin_key(env):
    # With client keys and no admin_key, every client could once empty the cache and move the
    # scaler's limits; now admin routes answer 403 until an admin_key is set.
    with FakeUpstream() as up, Gateway(env.tidegate, model_yaml("m", [up.port]), top=KEYS) as gw:
        for auth in ({}, {"authorization": "Bearer sk-hard-tenant-a"}):
            for method, path in (("GET", "/admin/costs"), ("DELETE", "/admin/cache"), ("GET", "/admin/scaler")):
                r = httpx.request(method, gw.url + path, headers=auth, timeout=10)
                assert r.status_code == 403, (method, path, r.status_code, r.text)
                assert r.json()["error"]["code"] == "admin_disabled"
        r = httpx.post(gw.url + "/v1/chat/completions", json=chat(), headers={"authorization": "Bearer sk-hard-tenant-a"},
                       timeout=10)
        assert r.status_code == 200, r.text


def test_metrics_and_dashboard_can_require_the_admin_key(env):
    with (
        FakeUpstream() as up,
        Gateway(env.tidegate, model_yaml("m", [up.port]),
                top=KEYS + ADMIN + "require_admin_key: [metrics, dashboard]\n") as gw,
    ):
        admin = {"authorization": "Bearer sk-hard-admin-0001"}
        r = httpx.get(gw.url + "/metrics", timeout=10)
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_admin_key", r.text
        assert httpx.get(gw.url + "/metrics", headers={"authorization": "Bearer sk-hard-tenant-a"},
                         timeout=10).status_code == 401
        r = httpx.get(gw.url + "/metrics", headers=admin, timeout=10)
        assert r.status_code == 200 and "# TYPE tidegate_" in r.text
        # A browser gets a Basic challenge and then sends the key as the password.
        r = httpx.get(gw.url + "/dashboard/", timeout=10)
        assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Basic "), r.headers
        basic = "Basic " + base64.b64encode(b"anyone:sk-hard-admin-0001").decode()
        r = httpx.get(gw.url + "/dashboard/", headers={"authorization": basic}, timeout=10)
        assert r.status_code == 200 and "<html" in r.text.lower()
        wrong = "Basic " + base64.b64encode(b"anyone:sk-hard-tenant-a").decode()
        assert httpx.get(gw.url + "/dashboard/data.json", headers={"authorization": wrong}, timeout=10).status_code == 401
        assert httpx.get(gw.url + "/dashboard/data.json", headers=admin, timeout=10).status_code == 200
        # Admin routes take the same two forms.
        assert httpx.get(gw.url + "/admin/costs", headers={"authorization": basic}, timeout=10).status_code == 404
        assert httpx.get(gw.url + "/healthz", timeout=10).status_code == 200  # probes stay open


def test_non_loopback_listeners_need_keys_unless_auth_none(env):
    models = "models:\n" + model_yaml("m", [18001])
    p = _check_config(env, 'listen: "0.0.0.0:0"\n' + models)
    assert p.returncode == 2 and "listen" in p.stderr and "auth: none" in p.stderr, p.stderr
    p = _check_config(env, 'listen: "0.0.0.0:0"\n' + KEYS + models)  # keys, no admin key
    assert p.returncode == 2 and "admin_key" in p.stderr, p.stderr
    p = _check_config(env, 'listen: "0.0.0.0:0"\n' + KEYS + ADMIN + models)
    assert p.returncode == 0, p.stderr
    p = _check_config(env, 'listen: "0.0.0.0:0"\nauth: none\n' + models)
    assert p.returncode == 0, p.stderr
    p = _check_config(env, 'listen: "[::1]:0"\n' + models)  # loopback: open mode is fine
    assert p.returncode == 0, p.stderr
    p = _check_config(env, 'listen: "127.0.0.1:0"\nrequire_admin_key: [metrics]\n' + models)
    assert p.returncode == 2 and "require_admin_key" in p.stderr, p.stderr


def test_configs_with_duplicate_keys_or_out_of_range_values_are_refused(env):
    models = "models:\n" + model_yaml("m", [18001])
    # Rotating a key by appending the new one left the old one in force (first wins).
    p = _check_config(env, 'listen: "127.0.0.1:0"\n' + KEYS + "admin_key: sk-old-admin-1\nadmin_key: sk-new-admin-2\n" + models)
    assert p.returncode == 2 and "admin_key" in p.stderr and "duplicate" in p.stderr and "line 5" in p.stderr, p.stderr
    for bad, key in (("limits: {max_header_bytes: 4GiB}", "limits.max_header_bytes"),
                     ("limits: {max_body_bytes: 0x100000}", "limits.max_body_bytes"),
                     ("timeouts: {connect: 1e300s}", "timeouts.connect")):
        p = _check_config(env, 'listen: "127.0.0.1:0"\n' + bad + "\n" + models)
        assert p.returncode == 2 and key in p.stderr and "line 2" in p.stderr, (bad, p.stderr)
    scaler = ("scaler:\n  pools:\n    - model: m\n      actuator: {kind: process, command: [x, \"{port}\"], "
              "ports: 30000-30010}\n      policy: {min_replicas: 1, max_replicas: 2}\n      lifecycle: 5\n")
    p = _check_config(env, 'listen: "127.0.0.1:0"\n' + models + scaler)
    assert p.returncode == 2 and "lifecycle" in p.stderr and "mapping" in p.stderr, p.stderr
    # Checks across sections name the key and its line too (they said "models", line 0).
    text = ('listen: "127.0.0.1:0"\nmodels:\n  - name: m\n    replicas:\n'
            '      - {id: r0, url: "http://127.0.0.1:18001", class: nope}\n'
            "cost:\n  replica_classes: {gpu: {usd_per_hour: 2}}\n")
    p = _check_config(env, text)
    assert p.returncode == 2 and "models[0].replicas[0].class (line 5)" in p.stderr, p.stderr


def test_sighup_with_a_huge_tag_label_fails_the_reload_only(env):
    # A 200,000-character tag label overflowed the stack in std::regex_match and killed the
    # running gateway on SIGHUP.
    with FakeUpstream() as up, Gateway(env.tidegate, model_yaml("m", [up.port])) as gw:
        cost = ("cost:\n  replica_classes: {gpu: {usd_per_hour: 2}}\n  models: {m: gpu}\n"
                "  tags: {labels: [" + "a" * 200_000 + "]}\n")
        gw.write_config(model_yaml("m", [up.port]), top=cost)
        gw.signal(signal.SIGHUP)
        wait_until(lambda: any("gateway.reload_failed" in l for l in gw.log), what="reload failure")
        assert gw.proc.poll() is None
        assert httpx.post(gw.url + "/v1/chat/completions", json=chat(), timeout=10).status_code == 200


def test_signals_sent_at_once_after_start_are_each_acted_on(env):
    # A SIGHUP sent just after "listening" was sometimes never acted on under ThreadSanitizer,
    # which drops a signal that lands on a thread being born (every thread had the handler then).
    # Now every thread of the gateway blocks them, and one reads them from a signalfd.
    handled = (1 << (signal.SIGHUP - 1)) | (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGTERM - 1))
    with FakeUpstream() as up:
        with Gateway(env.tidegate, model_yaml("m", [up.port])) as gw:
            # Which threads may take them: /proc says, per thread, which signals it blocks. The
            # main thread and the two workers ("threads: 2") block them; only threads a library
            # started before main may not.
            masks = {}
            for tid in os.listdir(f"/proc/{gw.proc.pid}/task"):
                with open(f"/proc/{gw.proc.pid}/task/{tid}/status") as f:
                    line = next(l for l in f if l.startswith("SigBlk:"))
                masks[int(tid)] = int(line.split()[1], 16)
            blocking = [t for t, m in masks.items() if m & handled == handled]
            assert gw.proc.pid in blocking, masks
            assert len(blocking) >= 3, masks
        for _ in range(4):
            gw = Gateway(env.tidegate, model_yaml("m", [up.port]))
            with gw:
                gw.signal(signal.SIGHUP)  # (two sent at once may merge into one: signals do not queue)
                wait_until(lambda: any("gateway.reloaded" in l for l in gw.log), what="reload")
            # Leaving the block sent SIGTERM at once, and close() asserted a clean exit.
            assert any("gateway.exit" in l for l in gw.log), gw.log[-5:]


def test_client_request_ids_never_reach_the_log_unless_printable(env):
    with FakeUpstream() as up, Gateway(env.tidegate, model_yaml("m", [up.port])) as gw:
        body = json.dumps(chat()).encode()
        for rid in (b"\xff\xfe-not-utf8", b"quote\"and\\back", b"a" * 129):
            head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    b"Connection: close\r\nX-Request-Id: " + rid + b"\r\nContent-Length: " + str(len(body)).encode() +
                    b"\r\n\r\n" + body)
            answer = _raw(gw.port, head)
            assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
            assert rid not in answer
        r = httpx.post(gw.url + "/v1/chat/completions", json=chat(), headers={"x-request-id": "trace-42:abc/1"}, timeout=10)
        assert r.headers["x-request-id"] == "trace-42:abc/1"
        wait_until(lambda: len(gw.access_entries()) >= 4, what="access log lines")
        with open(gw.access_log, "rb") as f:
            for line in f:
                json.loads(line.decode("utf-8"))  # strict: every line UTF-8 JSON
        assert up.headers[-1]["x-request-id"] == "trace-42:abc/1"


def test_an_sse_event_past_the_limit_ends_the_stream_with_an_error(env):
    # SseParser dropped a 4 MiB+ event and went on parsing from its middle, relaying garbage.
    with FakeUpstream(mode="huge_event") as up, Gateway(env.tidegate, model_yaml("m", [up.port])) as gw:
        with httpx.Client(timeout=20) as c:
            with c.stream("POST", gw.url + "/v1/chat/completions", json=chat(stream=True)) as r:
                assert r.status_code == 200
                raw = b"".join(r.iter_bytes())
        assert b"x" * 1024 not in raw, "bytes of the oversized event reached the client"
        events = [l[6:] for l in raw.decode().split("\n") if l.startswith("data: ")]
        assert json.loads(events[0])["choices"][0]["delta"]["content"] == "ok "
        assert json.loads(events[-1])["error"]["code"] == "stream_event_too_large", events[-1]
        assert gw.metric("tidegate_upstream_errors_total", {"model": "m", "reason": "stream_event_too_large"}) == 1


def _rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))


def test_an_upstream_endless_chunk_extension_is_bounded(env):
    # The upstream buffer had no maximum: a replica sending a chunk header that never ends
    # grew it for as long as the replica kept sending.
    with FakeUpstream(mode="endless_chunk_ext") as up, Gateway(env.tidegate, model_yaml("m", [up.port])) as gw:
        before = _rss_kib(gw.proc.pid)
        r = httpx.post(gw.url + "/v1/chat/completions", json=chat(), timeout=20)
        assert r.status_code == 502 and r.json()["error"]["code"] == "upstream_error", r.text
        grown_mib = (_rss_kib(gw.proc.pid) - before) / 1024
        assert grown_mib < 32, f"RSS grew {grown_mib:.0f} MiB for a 64 MiB chunk extension"
        assert gw.metric("tidegate_upstream_errors_total", {"model": "m", "reason": "body_read_failed"}) == 1


def _sockets_to(port):
    """Open TCP sockets on this machine whose peer is 127.0.0.1:port (the gateway's side)."""
    n = 0
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            rem, state = line.split()[2], line.split()[3]
            if int(rem.split(":")[1], 16) == port and state in ("01", "08"):  # ESTABLISHED, CLOSE_WAIT
                n += 1
    return n


def test_pooled_connections_of_a_removed_replica_are_closed(env):
    # Idle upstream connections of a replica a reload removed stayed pooled for good: nothing
    # would take them again (the soak saw the descriptors grow with every reload).
    with (
        FakeUpstream() as keep,
        FakeUpstream() as gone,
        Gateway(env.tidegate, model_yaml("m", [keep.port, gone.port], balancer="round_robin")) as gw,
    ):
        with gw.client() as c:
            for _ in range(8):
                assert c.post("/v1/chat/completions", json=chat()).status_code == 200
        assert gone.requests and _sockets_to(gone.port) >= 1
        gw.write_config(model_yaml("m", [keep.port]))
        gw.signal(signal.SIGHUP)
        wait_until(lambda: any("gateway.reloaded" in l for l in gw.log), what="reload")
        wait_until(lambda: _sockets_to(gone.port) == 0, timeout=4, what="the removed replica's connections closed")
        with gw.client() as c:  # the kept replica's pool still serves
            assert c.post("/v1/chat/completions", json=chat()).status_code == 200
