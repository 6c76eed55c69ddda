"""Test harness for gateway integration tests: spawns the real `tidegate` binary (and the
real `tidegate-sim` where it fits) on 127.0.0.1 with OS-chosen ports, plus a small
misbehaving upstream written here for faults the simulator cannot produce (hangs,
scripted 500s, slow streams that record a client going away)."""
import contextlib
import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx


def _die_with_parent():
    """Children get SIGKILL when the test process exits, even after a failed assertion,
    so no simulator or gateway outlives its test (and holds ctest's output pipe)."""
    import ctypes
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL

DEADLINE_S = 40  # every wait in a test is bounded


# Sanitizer builds run several times slower (TSan: 5-15x on the gateway's own code); their
# make targets set this so that bounded waits stay bounded without failing on the slowdown.
SLOWDOWN = float(os.environ.get("TIDEGATE_TEST_SLOWDOWN", "1"))


def wait_until(pred, timeout=10.0, interval=0.05, what="condition"):
    end = time.monotonic() + timeout * SLOWDOWN
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


def free_port():
    """A port with nothing listening (connections to it are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Closing:
    """`with X(...) as x:` closes x on the way out, as `try: ... finally: x.close()` did, and
    also when a later item of the same `with` fails to start."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@contextlib.contextmanager
def all_closed(things):
    """A list of started things (sims, upstreams) as one context: every one is closed on the
    way out, even when another's close fails."""
    with contextlib.ExitStack() as stack:
        for t in things:
            stack.callback(t.close)
        yield things


class FakeUpstream(_Closing):
    """OpenAI-ish upstream. `mode` can be changed while running:
    ok | continue_first (100 Continue, then ok) | status999 | fail500 (500 with an engine error object: a refusal, whose cause is unclear) |
    huge_event (a 5 MiB SSE event) | endless_chunk_ext (64 MiB of chunk extension) | crash500 (500 with an HTML page: the replica's own failure) | refuse_poison (500 with an
    error object for requests whose text has "poison", as llama.cpp answers an image sent to a
    text model; others are served) | hang | slow_stream (one event per `tpot` s, records
    disconnects) | break_stream (two events, then the connection is cut without ending the stream)."""

    def __init__(self, mode="ok", delay=0.0, tokens=5, tpot=0.02, health=200):
        self.mode, self.delay, self.tokens, self.tpot, self.health = mode, delay, tokens, tpot, health
        self.requests = []          # parsed JSON bodies of POSTs
        self.headers = []           # their headers (dicts, lower-cased names)
        self.active = 0
        self.disconnects = 0        # streams the client (gateway) abandoned
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                if outer.health == "hang":  # the probe's deadline decides (bounded: the test ends first)
                    time.sleep(5)
                    return
                body = b"ok" if outer.health == 200 else b"not ready"
                self.send_response(outer.health)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                req = json.loads(self.rfile.read(n) or b"{}")
                with outer.lock:
                    outer.requests.append(req)
                    outer.headers.append({k.lower(): v for k, v in self.headers.items()})
                    outer.active += 1
                try:
                    outer.serve(self, req)
                finally:
                    with outer.lock:
                        outer.active -= 1

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def serve(self, h, req):
        mode = self.mode
        if self.delay:
            time.sleep(self.delay)
        if mode == "hang":
            time.sleep(30)
            return
        if mode == "continue_first":  # an interim 100 Continue, then the real answer
            h.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            h.wfile.flush()
            mode = "ok"
        if mode == "huge_event":  # one event of 5 MiB that never ends, then more bytes
            h.send_response(200)
            h.send_header("Content-Type", "text/event-stream")
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            try:
                pieces = ([b'data: {"choices":[{"index":0,"delta":{"content":"ok "}}]}\n\n', b"data: "]
                          + [b"x" * (1 << 20)] * 5 + [b"\n\ndata: [DONE]\n\n"])
                for piece in pieces:
                    h.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                    h.wfile.flush()
                h.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
            h.close_connection = True
            return
        if mode == "endless_chunk_ext":  # a chunk header whose extension never ends
            h.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5;x=")
            try:
                for _ in range(64):
                    h.wfile.write(b"y" * (1 << 20))
            except (BrokenPipeError, ConnectionResetError):
                pass
            h.close_connection = True
            return
        if mode == "status999":
            body = b"{}"
            h.wfile.write(b"HTTP/1.1 999 Weird\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n" + body)
            return
        if mode == "refuse_poison":
            mode = "fail500" if "poison" in json.dumps(req) else "ok"
        canned = {  # mode: (status, content type, body)
            # llama.cpp's answer to an over-long prompt, verbatim.
            "context_overflow": (400, "application/json",
                                 b'{"error":{"code":400,"message":"request (3050 tokens) exceeds the available context '
                                 b'size (2048 tokens), try increasing it","type":"exceed_context_size_error",'
                                 b'"n_prompt_tokens":3050,"n_ctx":2048}}'),
            "crash500": (500, "text/html", b"<html><body><h1>500 Internal Server Error</h1></body></html>"),
            "fail500": (500, "application/json",
                        b'{"error":{"message":"boom","type":"server_error","param":null,"code":null}}'),
        }
        if mode in canned:
            status, ctype, body = canned[mode]
            h.send_response(status)
            h.send_header("Content-Type", ctype)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
            return
        words = [f"w{i}" for i in range(self.tokens)]
        if not req.get("stream"):
            body = json.dumps({"id": "x", "object": "chat.completion", "model": req.get("model"),
                               "choices": [{"index": 0, "message": {"role": "assistant", "content": " ".join(words)},
                                            "finish_reason": "stop"}],
                               "usage": {"prompt_tokens": 3, "completion_tokens": len(words), "total_tokens": 3 + len(words)}}).encode()
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
            return
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()

        def chunk(data):
            raw = f"data: {data}\n\n".encode()
            h.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
            h.wfile.flush()

        try:
            for i, w in enumerate(words):
                delta = {"content": w + " "}
                fin = "stop" if i == len(words) - 1 else None
                chunk(json.dumps({"id": "x", "object": "chat.completion.chunk",
                                  "choices": [{"index": 0, "delta": delta, "finish_reason": fin}]}))
                if mode == "slow_stream":
                    time.sleep(self.tpot)
                if mode == "break_stream" and i == 1:
                    h.wfile.flush()
                    h.connection.shutdown(socket.SHUT_RDWR)
                    h.close_connection = True
                    return
            if (req.get("stream_options") or {}).get("include_usage"):
                chunk(json.dumps({"id": "x", "object": "chat.completion.chunk", "choices": [],
                                  "usage": {"prompt_tokens": 3, "completion_tokens": len(words), "total_tokens": 3 + len(words)}}))
            chunk("[DONE]")
            h.wfile.write(b"0\r\n\r\n")
            h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            with self.lock:
                self.disconnects += 1
            h.close_connection = True

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Sim(_Closing):
    """The real model-server simulator."""

    def __init__(self, binary, *args):
        self.proc = subprocess.Popen([binary, "--port", "0", *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, preexec_fn=_die_with_parent)
        line = self.proc.stdout.readline()
        assert line.startswith("listening on"), f"sim said: {line!r}"
        self.port = int(line.strip().rsplit(":", 1)[1])

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


def model_yaml(name, ports, *, balancer="least_outstanding", cap=64, queue_len=100, max_wait="30s",
               health_interval="0", failures=3, extra=""):
    reps = "\n".join(f"      - {{id: r{i}, url: \"http://127.0.0.1:{p}\"}}" for i, p in enumerate(ports))
    return f"""  - name: {name}
    balancer: {balancer}
    max_concurrency_per_replica: {cap}
    queue: {{max_length: {queue_len}, max_wait: {max_wait}}}
    health: {{path: /health, interval: {health_interval}, timeout: 500ms, failures_to_eject: {failures}}}
{extra}    replicas:
{reps if ports else "      []"}
"""


class Gateway(_Closing):
    def __init__(self, binary, models_yaml, *, top="", timeouts="", limits="", sample_rate=1.0):
        self.sample_rate = sample_rate
        self.dir = tempfile.mkdtemp(prefix="tidegate-it-")
        self.access_log = os.path.join(self.dir, "access.log")
        self.config_path = os.path.join(self.dir, "gw.yaml")
        self.binary = binary
        self.write_config(models_yaml, top=top, timeouts=timeouts, limits=limits)
        self.proc = subprocess.Popen([binary, "--config", self.config_path], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, preexec_fn=_die_with_parent)
        self.log = []
        port = None
        end = time.monotonic() + 20
        while port is None and time.monotonic() < end:
            line = self.proc.stderr.readline()
            if not line:
                raise AssertionError("gateway exited: " + "".join(self.log))
            self.log.append(line)
            if '"gateway.listening"' in line:
                port = json.loads(line)["port"]
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _drain_stderr(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def write_config(self, models_yaml, *, top="", timeouts="", limits=""):
        t = {"connect": "1s", "first_byte": "5s", "between_chunks": "5s", "total": "20s", "header_read": "2s",
             "idle": "10s", "drain": "10s"}
        for item in filter(None, (x.strip() for x in timeouts.split(","))):  # ", key: value" overrides
            k, v = item.split(":", 1)
            t[k.strip()] = v.strip()
        tline = ", ".join(f"{k}: {v}" for k, v in t.items())
        text = f"""listen: "127.0.0.1:0"
threads: 2
access_log: {{path: "{self.access_log}", sample_rate: {self.sample_rate}}}
timeouts: {{{tline}}}
limits: {{max_header_bytes: 16KiB, max_body_bytes: 1MiB{limits}}}
{top}
models:
{models_yaml}"""
        with open(self.config_path, "w") as f:
            f.write(text)

    def client(self, **kw):
        return httpx.Client(base_url=self.url, timeout=15, **kw)

    def metric(self, name, labels=None):
        """Sum of samples of `name` whose labels include `labels`."""
        text = httpx.get(self.url + "/metrics", timeout=10).text
        total, found = 0.0, False
        for line in text.splitlines():
            if line.startswith("#") or not line.startswith(name):
                continue
            head, value = line.rsplit(" ", 1)
            metric = head.split("{", 1)[0]
            if metric != name:
                continue
            if labels and not all(f'{k}="{v}"' in head for k, v in labels.items()):
                continue
            total += float(value)
            found = True
        return total if found else None

    def access_entries(self):
        if not os.path.exists(self.access_log):
            return []
        with open(self.access_log) as f:
            return [json.loads(l) for l in f if l.strip()]

    def signal(self, sig):
        self.proc.send_signal(sig)

    def close(self):
        """Graceful stop (SIGTERM drain); the process must exit 0 with no sanitizer report."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                # The drain is bounded by the config's 10 s; the rest is the sanitizer's slowdown
                # (a TSan gateway on a loaded 2-core box once took over 20 s here).
                self.proc.wait(timeout=20 * SLOWDOWN)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
                time.sleep(0.05)
                # Its last lines say where shutdown stopped (draining, drained, exit).
                raise AssertionError("gateway did not exit after SIGTERM; its last lines:\n" + "".join(self.log[-20:]))
        time.sleep(0.05)  # let the stderr reader catch the last lines
        text = "".join(self.log)
        for marker in ("AddressSanitizer", "LeakSanitizer", "ThreadSanitizer", "runtime error:"):
            # The report from its start (its tail is thread-creation stacks, not the error).
            assert marker not in text, text[max(0, text.find(marker) - 200):][:12000]
        assert self.proc.returncode == 0, f"gateway exit code {self.proc.returncode}: {text[-2000:]}"


def chat(model="m", content="hello", **kw):
    body = {"model": model, "messages": [{"role": "user", "content": content}]}
    body.update(kw)
    return body


def sse_events(response):
    """Data payloads of an SSE response, in order."""
    out = []
    for line in response.iter_lines():
        if line.startswith("data: "):
            out.append(line[len("data: "):])
    return out


def stream_chat(gw, body):
    """One streamed chat request: its SSE data payloads and the seconds it took (status 200)."""
    start = time.monotonic()
    with httpx.Client(timeout=20) as c:
        with c.stream("POST", gw.url + "/v1/chat/completions", json=body) as r:
            assert r.status_code == 200, r.status_code
            events = sse_events(r)  # must end, not hang
    return events, time.monotonic() - start
