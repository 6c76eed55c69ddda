"""Shared pieces for end-to-end tests of the composed `tidegate` binary (gateway + cache +
cost + scaler). Process handling comes from the gateway harness (tests/gateway/harness.py);
this adds config sections, keyed clients and header/SSE helpers."""
import json
import os
import socket
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gateway"))
from harness import Gateway, Sim, model_yaml, sse_events, wait_until  # noqa: E402,F401

KEYS = {"acme": "sk-acme-0123456789", "globex": "sk-globex-0123456789"}
ADMIN = "adm-secret"


def keys_yaml():
    lines = ["api_keys:"]
    for tenant, key in KEYS.items():
        lines.append(f"  - {{name: key-{tenant}, key: {key}, tenant: {tenant}, tags: {{team: t-{tenant}}}}}")
    lines.append(f"admin_key: {ADMIN}")
    return "\n".join(lines) + "\n"


def cache_yaml(data_dir="", embedder="{type: hash, dim: 64}", extra=""):
    return f"""cache:
  enabled: true
  embedder: {embedder}
  index: {{type: flat}}
  threshold: 0.95
  max_temperature: 1.0
  data_dir: "{data_dir}"
  snapshot_interval: 1h
{extra}"""


def cost_yaml(data_dir="", extra="", models=("m",)):
    mapping = ", ".join(f"{m}: gpu" for m in models)
    return f"""cost:
  data_dir: "{data_dir}"
  replica_classes:
    gpu: {{usd_per_hour: 36.0}}
  models: {{{mapping}}}
  cache_lookup_usd: 0.00001
  tags: {{labels: [team]}}
{extra}"""


class App:
    """A running `tidegate` with its sims; closes them all (gateway gracefully, exit 0 checked)."""

    def __init__(self, env, *, sims=None, models=None, cache=None, cost="", scaler="", keys=True, timeouts=""):
        self.env = env
        self.sims = sims if sims is not None else {"m": [Sim(env.sim, "--model", "m", "--echo", "--ttft-ms", "5",
                                                              "--tpot-ms", "1", "--max-tokens-default", "8")]}
        if models is None:
            models = "".join(model_yaml(name, [s.port for s in sims_]) for name, sims_ in self.sims.items())
        top = (keys_yaml() if keys else "") + (cache if cache is not None else cache_yaml()) + cost + scaler
        self._models, self._top, self._timeouts = models, top, timeouts
        try:
            self.gw = Gateway(env.tidegate, models, top=top, timeouts=timeouts)
        except BaseException:
            self._close_sims()
            raise
        self.url = self.gw.url

    def client(self, tenant="acme", **kw):
        headers = {"Authorization": f"Bearer {KEYS[tenant]}"} if tenant else {}
        headers.update(kw.pop("headers", {}))
        return httpx.Client(base_url=self.url, timeout=20, headers=headers, **kw)

    def admin(self):
        return httpx.Client(base_url=self.url, timeout=20, headers={"Authorization": f"Bearer {ADMIN}"})

    def openai(self, tenant="acme"):
        import openai
        return openai.OpenAI(base_url=self.url + "/v1", api_key=KEYS[tenant], max_retries=0, timeout=20)

    def restart(self):
        """Stops the gateway gracefully (exit 0 checked) and starts it again on the same config."""
        self.gw.close()
        self.start()

    def start(self):
        """Starts the gateway again on the same config (after gw.close())."""
        self.gw = Gateway(self.env.tidegate, self._models, top=self._top, timeouts=self._timeouts)
        self.url = self.gw.url

    def close(self):
        try:
            self.gw.close()
        finally:
            self._close_sims()

    def _close_sims(self):
        for group in self.sims.values():
            for s in group:
                s.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def chat(content, model="m", system=None, **kw):
    msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": content}]
    body = {"model": model, "messages": msgs, "max_tokens": 8}
    body.update(kw)
    return body


def post(client, body, headers=None):
    r = client.post("/v1/chat/completions", json=body, headers=headers or {})
    return r


def stream(client, body, headers=None):
    """(response headers, list of parsed data events, raw '[DONE]' seen)."""
    body = dict(body, stream=True)
    with client.stream("POST", "/v1/chat/completions", json=body, headers=headers or {}) as r:
        assert r.status_code == 200, (r.status_code, r.read())
        events = sse_events(r)
        hdrs = r.headers
    done = bool(events) and events[-1] == "[DONE]"
    parsed = [json.loads(e) for e in events if e != "[DONE]"]
    return hdrs, parsed, done


def stream_text(events):
    return "".join((c.get("delta") or {}).get("content") or "" for e in events for c in e.get("choices", []))


def assert_valid_sse(events, done, want_usage):
    """Role chunk first, content chunks, one finish chunk, usage chunk iff asked, then [DONE]."""
    assert done, "stream did not end with [DONE]"
    assert events, "no events"
    ids = {e["id"] for e in events}
    assert len(ids) == 1, f"one id per stream, got {ids}"
    for e in events:
        assert e["object"] == "chat.completion.chunk", e
    first = events[0]["choices"][0]
    assert first["delta"].get("role") == "assistant", events[0]
    finishes = [e for e in events if e.get("choices") and e["choices"][0].get("finish_reason")]
    assert len(finishes) == 1, f"exactly one finish chunk: {finishes}"
    usage = [e for e in events if not e.get("choices") and e.get("usage")]
    if want_usage:
        assert len(usage) == 1 and events[-1] is usage[0], f"usage chunk last: {events[-3:]}"
        u = usage[0]["usage"]
        assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"], u
    else:
        assert not usage and all(e.get("usage") is None for e in events), f"unexpected usage: {events[-2:]}"
    assert stream_text(events), "no content"
    return usage[0] if usage else None


class HangingServer:
    """Accepts connections and never answers (an embedder that is down but not refusing)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stop:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)  # held open, never read nor written

    def close(self):
        self.stop = True
        self.sock.close()
        for c in self.conns:
            c.close()


class Recorder:
    """A loopback HTTP server recording POSTs (budget webhooks)."""

    def __init__(self):
        self.posts = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                outer.posts.append((self.path, self.rfile.read(n)))
                self.send_response(204)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def tempdir(prefix):
    return tempfile.mkdtemp(prefix=prefix)


def expect_hit(client, body, headers=None, tries=40):
    """Inserts are asynchronous (embedding runs on cache workers after the answer went out), so
    a repeat sent at once may still miss; it must turn into a hit within a bounded time."""
    for _ in range(tries):
        r = post(client, body, headers)
        verdict = r.headers.get("x-tidegate-cache")
        if verdict == "hit":
            return r
        assert verdict == "miss", (r.status_code, r.headers, r.text)
        time.sleep(0.05)
    raise AssertionError(f"no hit after {tries} tries: {body}")


def wait_stored(app, entries, timeout=10):
    """Waits until the cache holds at least `entries` entries (see expect_hit)."""
    with app.admin() as adm:
        wait_until(lambda: adm.get("/admin/cache/stats").json()["entries"] >= entries, timeout=timeout,
                   what=f"{entries} cache entries")
