#!/usr/bin/env python3
"""Soak benchmark (issue 18): N minutes of mixed traffic through a real `tidegate` in front of
real `tidegate-sim` replicas with injected faults, sampling the gateway's RSS and open
descriptors, reporting growth after warm-up.

Python 3 standard library only. Everything listens on 127.0.0.1 with OS-chosen ports. Every
loop has a deadline, every socket a timeout, every child a parent-death signal: the run stops
by itself, and nothing outlives it.

    python3 bench/soak/soak.py --minutes 10          # bench/soak/README.md explains the report

Exit status: 0 when RSS grew at most --rss-limit-pct after warm-up, descriptors did not grow
beyond --fd-slack, and the gateway neither died nor failed a reload nor exited non-zero on
SIGTERM; 1 otherwise; 2 for a setup failure (binary missing, config refused).
"""
import argparse
import bisect
import csv
import ctypes
import http.client
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

KEYS = {  # name: (key, tenant)
    "acme": ("sk-soak-acme-0123456789", "acme"),
    "globex": ("sk-soak-globex-0123456789", "globex"),
    "globex-capped": ("sk-soak-globex-capped-0123", "globex"),  # key budget: refused after a few requests
}
ROTATED_KEY = ("acme-rotated", "sk-soak-acme-rotated-012345", "acme")  # only in config B
ADMIN_KEY = "adm-soak-0123456789"
CONFIGURED = {"A": ("r0", "r1", "r2", "s0"), "B": ("r0", "r1", "r2", "r3", "s0")}  # replicas per config
SYSTEM = "You answer questions about tide gates in one short sentence."
MAX_BODY = 256 * 1024


def die_with_parent():
    """Children get SIGKILL when this script dies, however it dies."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def log(msg):
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- processes

class Sim:
    """One tidegate-sim replica. restart() brings it back on the same port."""

    def __init__(self, binary, workdir, name, args, die_after=None):
        self.binary, self.name, self.args, self.die_after = binary, name, list(args), die_after
        self.logpath = os.path.join(workdir, f"sim-{name}.log")
        self.port = 0
        self.proc = None
        self.starts = 0
        self.rng = random.Random("sim-" + name)

    def start(self, deadline_s=15.0):
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            extra = []
            if self.die_after:
                extra = ["--die-after", str(self.rng.randint(*self.die_after))]
            with open(self.logpath, "a") as out:
                out.write(f"--- start {self.starts + 1} {' '.join(extra)}\n")
                out.flush()
                pos = out.tell()
                self.proc = subprocess.Popen([self.binary, "--port", str(self.port), *self.args, *extra],
                                             stdout=out, stderr=out, stdin=subprocess.DEVNULL,
                                             preexec_fn=die_with_parent)
            line_end = time.monotonic() + 5
            while time.monotonic() < line_end and self.proc.poll() is None:
                with open(self.logpath) as f:
                    f.seek(pos)
                    text = f.read()
                if "listening on" in text:
                    port = int(text.split("listening on", 1)[1].split()[0].rsplit(":", 1)[1])
                    if self.port and port != self.port:
                        raise RuntimeError(f"sim {self.name} came back on {port}, not {self.port}")
                    self.port = port
                    self.starts += 1
                    return
                time.sleep(0.05)
            self.kill()  # bind failed (port briefly busy) or no line: try again
            time.sleep(0.3)
        raise RuntimeError(f"sim {self.name} did not start on port {self.port} (see {self.logpath})")

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


class GatewayProc:
    def __init__(self, binary, workdir, config_path):
        self.binary, self.config_path = binary, config_path
        self.stderr_path = os.path.join(workdir, "gateway.stderr")
        self.err = open(self.stderr_path, "w")
        self.proc = subprocess.Popen([binary, "--config", config_path], stdout=subprocess.DEVNULL, stderr=self.err,
                                     stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
        self.pid = self.proc.pid
        self.port = None
        end = time.monotonic() + 30
        while self.port is None and time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError("gateway exited at start:\n" + self.tail())
            for line in self.lines():
                if '"gateway.listening"' in line:
                    self.port = json.loads(line)["port"]
            time.sleep(0.05)
        if self.port is None:
            raise RuntimeError("gateway did not report a port:\n" + self.tail())

    def lines(self):
        with open(self.stderr_path, errors="replace") as f:
            return f.read().splitlines()

    def tail(self, n=40):
        return "\n".join(self.lines()[-n:])

    def count(self, event):
        return sum(1 for l in self.lines() if f'"{event}"' in l)

    def alive(self):
        return self.proc.poll() is None

    def stop(self, timeout=30):
        """SIGTERM drain; returns the exit code (None: had to be killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
                return None
        return self.proc.returncode


# --------------------------------------------------------------------------- configs

DEFAULT_INDEX = "{type: hnsw, flat_max: 256, rebuild_fraction: 0.25}"


def config_text(variant, workdir, sims, access_log, index=DEFAULT_INDEX):
    """Two valid configs, A and B, that SIGHUP alternates. B adds replica r3 (the pool drains
    and forgets it again on the way back to A), weights r0 double, adds a key and samples the
    access log; cache and cost sections are the same (they are read at start only)."""
    def rep(name, weight=1):
        return f'      - {{id: {name}, url: "http://127.0.0.1:{sims[name].port}", class: gpu, weight: {weight}}}'
    reps = [rep("r0", 2 if variant == "B" else 1), rep("r1"), rep("r2")] + ([rep("r3")] if variant == "B" else [])
    keys = [f"  - {{name: {n}, key: {k}, tenant: {t}, tags: {{team: t-{n}}}}}" for n, (k, t) in KEYS.items()]
    if variant == "B":
        n, k, t = ROTATED_KEY
        keys.append(f"  - {{name: {n}, key: {k}, tenant: {t}, tags: {{team: t-{n}}}}}")
    nl = "\n"
    return f"""# tidegate soak config {variant} (bench/soak/soak.py writes this; SIGHUP alternates A and B)
listen: "127.0.0.1:0"
threads: 2
max_retries: 2
access_log: {{path: "{access_log}", sample_rate: {0.05 if variant == "B" else 0.0}}}
limits: {{max_header_bytes: 16KiB, max_body_bytes: {MAX_BODY // 1024}KiB, max_connections: 1000}}
timeouts: {{header_read: 2s, body_read: 5s, idle: 15s, write: 10s, connect: 1s, first_byte: 5s,
            between_chunks: 5s, total: 20s, drain: 10s}}
api_keys:
{nl.join(keys)}
admin_key: {ADMIN_KEY}
models:
  - name: sim
    balancer: least_outstanding
    max_concurrency_per_replica: 16
    queue: {{max_length: {48 if variant == "B" else 64}, max_wait: 5s}}
    health: {{path: /health, interval: 1s, timeout: 500ms, failures_to_eject: 2}}
    replicas:
{nl.join(reps)}
  - name: sim-slow
    max_concurrency_per_replica: 2
    queue: {{max_length: 2, max_wait: 1s}}
    health: {{path: /health, interval: 1s, timeout: 500ms, failures_to_eject: 2}}
    replicas:
      - {{id: s0, url: "http://127.0.0.1:{sims['s0'].port}", class: gpu}}
cache:
  enabled: true
  embedder: {{type: hash, dim: 64}}        # the cheapest embedder: no model files, microseconds
  index: {index}   # default: big scopes go HNSW, evictions tombstone
  threshold: 0.99
  max_entries: 3000                       # full within the warm-up: after it, LRU eviction is steady state
  max_bytes: 16MiB
  ttl: 1h
  data_dir: "{os.path.join(workdir, 'cache')}"
  snapshot_interval: 1m
  snapshot_log_bytes: 1MiB
  lookup_timeout: 250ms
  workers: 2
cost:
  data_dir: "{os.path.join(workdir, 'cost')}"
  replica_classes:
    gpu: {{usd_per_hour: 36.0}}
  models: {{sim: gpu, sim-slow: gpu}}
  cache_lookup_usd: 0.00001
  tags: {{labels: [team]}}
  budgets:
    - {{scope: "tenant:acme", period: day, soft_usd: 0.5, hard_usd: 100000}}
    - {{scope: "tenant:globex", period: day, soft_usd: 0.2, hard_usd: 100000}}
    - {{scope: "key:globex-capped", period: day, hard_usd: 0.0005}}
"""


# --------------------------------------------------------------------------- /proc sampling

def read_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "Threads", "RssAnon", "RssFile"):
                out[k] = int(v.split()[0])
    return out


def tcp_table(pid):
    """inode -> (local port, remote port, state hex) from the process's network namespace."""
    table = {}
    for name in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{name}") as f:
                next(f)
                for line in f:
                    p = line.split()
                    table[p[9]] = (int(p[1].rsplit(":", 1)[1], 16), int(p[2].rsplit(":", 1)[1], 16), p[3])
        except OSError:
            pass
    return table


def fd_breakdown(pid, gw_port, port_names):
    """Counts of the gateway's descriptors by kind. Upstream sockets are split by replica (the
    remote port names it) and by TCP state: CLOSE_WAIT means the replica already hung up."""
    fds = os.listdir(f"/proc/{pid}/fd")
    table = None
    kinds = {"total": 0, "listen": 0, "client": 0, "upstream": 0, "upstream_close_wait": 0, "tcp_other": 0,
             "socket_other": 0, "file": 0, "pipe": 0, "anon": 0, "other": 0}
    per_replica = {}
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue  # closed while we looked
        kinds["total"] += 1
        if target.startswith("socket:["):
            if table is None:
                table = tcp_table(pid)
            entry = table.get(target[8:-1])
            if entry is None:
                kinds["socket_other"] += 1
            elif entry[2] == "0A":
                kinds["listen"] += 1
            elif entry[0] == gw_port:
                kinds["client"] += 1
            elif entry[1] in port_names:
                kinds["upstream"] += 1
                if entry[2] == "08":
                    kinds["upstream_close_wait"] += 1
                name = port_names[entry[1]]
                per_replica[name] = per_replica.get(name, 0) + 1
            else:
                kinds["tcp_other"] += 1
        elif target.startswith("pipe:"):
            kinds["pipe"] += 1
        elif target.startswith("anon_inode:"):
            kinds["anon"] += 1
        elif target.startswith("/"):
            kinds["file"] += 1
        else:
            kinds["other"] += 1
    return kinds, per_replica


def scrape(port, path="/metrics", headers=None, timeout=10):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path, headers=headers or {})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def metric_sum(text, name):
    total, found = 0.0, False
    for line in text.splitlines():
        if line.startswith(name) and (len(line) > len(name) and line[len(name)] in " {"):
            total += float(line.rsplit(" ", 1)[1])
            found = True
    return total if found else None


# --------------------------------------------------------------------------- traffic

class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.by_class = {}   # class -> outcome -> count
        self.errors = {}     # class -> count of unexpected outcomes
        self.cache = {}      # class -> {hit, miss, ...} from x-tidegate-cache
        self.done = 0
        self.error_total = 0
        self.reconnects = 0

    def reconnect(self):
        with self.lock:
            self.reconnects += 1

    def add(self, cls, outcome, ok, cache=None):
        with self.lock:
            d = self.by_class.setdefault(cls, {})
            d[outcome] = d.get(outcome, 0) + 1
            self.done += 1
            if not ok:
                self.errors[cls] = self.errors.get(cls, 0) + 1
                self.error_total += 1
            if cache:
                c = self.cache.setdefault(cls, {})
                c[cache] = c.get(cache, 0) + 1

    def snapshot(self):
        with self.lock:
            return self.done, self.error_total


def chat_body(content, *, system=SYSTEM, stream=False, max_tokens=16, model="sim"):
    msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": content}]
    body = {"model": model, "messages": msgs, "max_tokens": max_tokens, "temperature": 0}
    if stream:
        body["stream"] = True
    return json.dumps(body).encode()


class Client(threading.Thread):
    """One of --clients: one request at a time, on a keep-alive connection it reuses (and now
    and then drops); the abusive classes use a connection of their own."""

    # class: weight. Upstream faults reach every class routed to model "sim" (r1 fails 15% of
    # its POSTs, r2 dies mid-stream and is SIGKILLed every --kill-interval).
    MIX = {
        "hit": 18, "hit_stream": 14, "miss": 12, "miss_stream": 10, "new_scope": 5, "completions": 3,
        "chunked_body": 2, "disconnect_mid_stream": 5, "disconnect_mid_request": 3,
        "disconnect_waiting": 3, "slow_model": 5, "unknown_model": 3, "invalid_json": 3, "oversize_body": 1,
        "bad_key": 2, "budget_capped": 2, "slow_header": 0.5, "admin_stats": 1,
    }

    def __init__(self, idx, run):
        super().__init__(daemon=True, name=f"client-{idx}")
        self.idx, self.run_ = idx, run
        self.rng = random.Random(run.seed * 1000 + idx)
        self.conn = None
        self.paused = threading.Event()
        self.classes, weights = zip(*self.MIX.items())
        self.cum = []
        acc = 0.0
        for w in weights:
            acc += w
            self.cum.append(acc)
        self.total_weight = acc

    # -- helpers
    def key(self, name=None):
        name = name or self.rng.choice(("acme", "globex"))
        return {"Authorization": f"Bearer {KEYS[name][0]}", "Content-Type": "application/json"}

    def keepalive(self):
        if self.conn is None or self.rng.random() < 0.03:  # churn client connections too
            self.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.run_.gw.port, timeout=30)
        return self.conn

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def fresh(self, timeout=30):
        return http.client.HTTPConnection("127.0.0.1", self.run_.gw.port, timeout=timeout)

    def post(self, path, body, headers, conn=None, stream=False, method="POST"):
        """Returns (status, response, body bytes, stream complete). A reused keep-alive
        connection that the gateway closed meanwhile (idle timeout) is retried once on a new
        one, as HTTP clients do (counted apart, not as a request)."""
        for attempt in (0, 1):
            c = conn or self.keepalive()
            reused = conn is None and c.sock is not None
            try:
                c.request(method, path, body=body, headers=headers)
                r = c.getresponse()
                if not stream:
                    data = r.read()
                    return r.status, r, data, True
                done = False
                data = []
                while True:
                    line = r.readline()
                    if not line:
                        break
                    data.append(line)
                    if line.startswith(b"data: [DONE]"):
                        done = True
                r.read()
                return r.status, r, b"".join(data), done
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                c.close()
                if conn is None:
                    self.conn = None
                if attempt == 0 and reused:
                    self.run_.stats.reconnect()
                    continue
                raise

    # -- classes; each returns (outcome, ok, cache header or None)
    def c_chat(self, content, stream, system=SYSTEM, max_tokens=16):
        st, r, data, done = self.post("/v1/chat/completions", chat_body(content, system=system, stream=stream,
                                                                        max_tokens=max_tokens), self.key(), stream=stream)
        cache = r.getheader("x-tidegate-cache")
        if st == 200 and stream and not done:
            # A replica that dies mid-stream (r2's --die-after, the SIGKILL) cannot be retried
            # once bytes reached the client: the gateway ends the stream with an error event.
            last = [l for l in data.splitlines() if l.startswith(b"data: ")][-1:]
            if last and b'"error"' in last[0]:
                try:
                    code = json.loads(last[0][6:])["error"].get("code")
                except (ValueError, KeyError, AttributeError):
                    code = "?"
                return f"200_error_event_{code}", True, cache
            return "200_incomplete_stream", False, cache
        # 502/503/504 are injected upstream faults that retries did not absorb: expected here.
        return str(st), st in (200, 502, 503, 504), cache

    def do_hit(self):
        return self.c_chat(f"Repeated question {self.rng.randrange(40)}: what does a tide gate hold back?", False)

    def do_hit_stream(self):
        return self.c_chat(f"Repeated question {self.rng.randrange(40)}: what does a tide gate hold back?", True)

    def do_miss(self):
        return self.c_chat(f"Fresh question {uuid.uuid4().hex}: how high is the tide today?", False)

    def do_miss_stream(self):
        return self.c_chat(f"Fresh question {uuid.uuid4().hex}: how high is the tide today?", True)

    def do_miss_bypass(self):  # isolate.py only: upstream and cost as a miss, the cache neither read nor written
        st, r, _, _ = self.post("/v1/chat/completions",
                                chat_body(f"Fresh question {uuid.uuid4().hex}: how high is the tide today?"),
                                dict(self.key(), **{"x-tidegate-cache": "bypass"}))
        return str(st), st in (200, 502, 503, 504), r.getheader("x-tidegate-cache")

    def do_new_scope(self):  # a new conversation every time: a new scope (and index) in the cache
        return self.c_chat("And what about tomorrow?", self.rng.random() < 0.5,
                           system=f"Conversation {uuid.uuid4().hex}.")

    def do_completions(self):
        body = json.dumps({"model": "sim", "prompt": f"Complete {self.rng.randrange(20)}: the tide", "max_tokens": 8,
                           "temperature": 0}).encode()
        st, r, _, _ = self.post("/v1/completions", body, self.key())
        return str(st), st in (200, 502, 503, 504), r.getheader("x-tidegate-cache")

    def do_chunked_body(self):
        body = chat_body(f"Chunked question {uuid.uuid4().hex}?")
        c = self.fresh()
        try:
            h = self.key()
            c.request("POST", "/v1/chat/completions", body=iter([body[:20], body[20:]]), headers=h, encode_chunked=True)
            r = c.getresponse()
            r.read()
            return str(r.status), r.status in (200, 502, 503, 504), r.getheader("x-tidegate-cache")
        finally:
            c.close()

    def do_disconnect_mid_stream(self):
        c = self.fresh()
        try:
            c.request("POST", "/v1/chat/completions",
                      body=chat_body(f"Long answer {uuid.uuid4().hex}, please", stream=True, max_tokens=200),
                      headers=self.key())
            r = c.getresponse()
            if r.status != 200:
                r.read()
                return str(r.status), r.status in (502, 503, 504), None
            got = 0
            while got < 3:  # role chunk and two tokens, then hang up on a stream that has ~200 to go
                if not r.readline():
                    break
                got += 1
            return "hung_up_mid_stream", True, None
        finally:
            c.close()

    def do_disconnect_mid_request(self):
        body = chat_body(f"Never finished {uuid.uuid4().hex}") + b" " * 2000
        with socket.create_connection(("127.0.0.1", self.run_.gw.port), timeout=10) as s:
            head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: soak\r\nAuthorization: Bearer {KEYS['acme'][0]}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
            s.sendall(head + body[: len(body) // 3])
            time.sleep(0.05)
        return "hung_up_mid_body", True, None

    def do_disconnect_waiting(self):  # full request to the slow model, gone before its first byte
        c = self.fresh()
        try:
            c.request("POST", "/v1/chat/completions",
                      body=chat_body(f"Slow {uuid.uuid4().hex}", model="sim-slow"), headers=self.key())
            time.sleep(0.1)
            return "hung_up_waiting", True, None
        finally:
            c.close()

    def do_slow_model(self):  # 2 slots and a queue of 2 in front of a slow replica: 429/503 expected too
        st, r, data, done = self.post("/v1/chat/completions",
                                      chat_body(f"Slow {self.rng.randrange(1000)}", model="sim-slow",
                                                stream=self.rng.random() < 0.5, max_tokens=8),
                                      self.key(), stream=True)
        return str(st), st in (200, 429, 503, 504), r.getheader("x-tidegate-cache")

    def do_unknown_model(self):
        name = "nope-" + uuid.uuid4().hex * self.rng.choice((1, 1, 1, 40))  # some 1.3 KB names
        st, r, _, _ = self.post("/v1/chat/completions", chat_body("hi", model=name), self.key())
        return str(st), st == 404, None

    def do_invalid_json(self):
        st, r, _, _ = self.post("/v1/chat/completions", b'{"model": "sim", "messages": [{"role": "user", "cont',
                                self.key())
        return str(st), st == 400, None

    def do_oversize_body(self):
        body = chat_body("x" * (MAX_BODY + 4096))
        c = self.fresh()
        try:
            try:
                c.request("POST", "/v1/chat/completions", body=body, headers=self.key())
                r = c.getresponse()
                r.read()
                return str(r.status), r.status == 413, None
            except (BrokenPipeError, ConnectionResetError):
                return "reset_while_sending", True, None  # the gateway answered 413 and closed first
        finally:
            c.close()

    def do_bad_key(self):
        h = {"Authorization": "Bearer sk-not-a-key", "Content-Type": "application/json"}
        st, r, _, _ = self.post("/v1/chat/completions", chat_body("hi"), h)
        return str(st), st == 401, None

    def do_budget_capped(self):
        st, r, _, _ = self.post("/v1/chat/completions", chat_body(f"Capped {uuid.uuid4().hex}"),
                                self.key("globex-capped"))
        return str(st), st in (200, 429, 502, 503, 504), None

    def do_slow_header(self):  # half a head, then silence: header_read (2s) must close it
        t0 = time.monotonic()
        with socket.create_connection(("127.0.0.1", self.run_.gw.port), timeout=8) as s:
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: soak\r\n")
            try:
                while s.recv(4096):
                    pass
            except socket.timeout:
                return "not_closed_in_8s", False, None
        return ("closed_by_gateway" if time.monotonic() - t0 < 6 else "closed_late"), True, None

    def do_admin_stats(self):
        st, r, _, _ = self.post("/admin/cache/stats", None, {"Authorization": f"Bearer {ADMIN_KEY}"}, method="GET")
        return str(st), st == 200, None

    def run(self):
        run = self.run_
        while not run.stop.is_set() and time.monotonic() < run.deadline:
            if run.pause.is_set():
                self.close()
                self.paused.set()
                run.resume.wait(timeout=120)
                self.paused.clear()
                continue
            cls = run.force_class or self.classes[bisect.bisect_left(self.cum, self.rng.random() * self.total_weight)]
            try:
                outcome, ok, cache = getattr(self, "do_" + cls)()
            except socket.timeout:
                outcome, ok, cache = "client_timeout", False, None
                self.close()
            except (OSError, http.client.HTTPException) as e:
                outcome, ok, cache = type(e).__name__, False, None
                self.close()
            run.stats.add(cls, outcome, ok, cache)
        self.close()
        self.paused.set()


# --------------------------------------------------------------------------- the run

class Run:
    def __init__(self, args):
        self.args = args
        self.seed = args.seed
        self.stop = threading.Event()
        self.pause = threading.Event()
        self.resume = threading.Event()
        self.stats = Stats()
        self.samples = []
        self.events = []
        self.variant = "A"
        self.lock = threading.Lock()  # config writes + SIGHUP
        self.reloads = 0
        self.kills = 0
        self.phase = "warmup"
        self.force_class = None  # isolate.py: every client sends only this class
        self.sample_mu = threading.Lock()
        self.chaos_mu = threading.Lock()  # held while chaos acts; quiesce takes it to wait them out

    def event(self, what, **kw):
        e = {"t": round(time.monotonic() - self.t0, 1), "event": what, **kw}
        self.events.append(e)
        log(f"{what} {kw if kw else ''}")

    # -- setup
    def setup(self):
        a = self.args
        self.work = tempfile.mkdtemp(prefix="tidegate-soak-")
        bindir = os.path.join(self.work, "bin")
        os.makedirs(bindir)
        # Run copies: a rebuild of the build folder during the run must not change what restarts.
        for b in ("tidegate", "tidegate-sim"):
            src = os.path.join(a.bin_dir, b)
            if not os.access(src, os.X_OK):
                raise SetupError(f"{src} missing: build it first (make) or pass --bin-dir")
            shutil.copy2(src, bindir)
        self.binaries = {b: os.path.join(bindir, b) for b in ("tidegate", "tidegate-sim")}
        self.commit = git_head()  # at start: another checkout may commit while the soak runs
        self.binary_mtime = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(os.stat(os.path.join(a.bin_dir, "tidegate")).st_mtime))
        sim = self.binaries["tidegate-sim"]
        common = ["--model", "sim", "--ttft-ms", "15", "--tpot-ms", "4", "--max-tokens-default", "16", "--threads", "1"]
        self.sims = {
            "r0": Sim(sim, self.work, "r0", common + ["--seed", "1"]),
            "r1": Sim(sim, self.work, "r1", common + ["--seed", "2", "--fail-rate", "0.15"]),
            "r2": Sim(sim, self.work, "r2", common + ["--seed", "3"], die_after=(300, 900)),
            "r3": Sim(sim, self.work, "r3", common + ["--seed", "4"]),
            "s0": Sim(sim, self.work, "s0", ["--model", "sim-slow", "--ttft-ms", "400", "--tpot-ms", "40",
                                             "--max-tokens-default", "8", "--threads", "1"]),
        }
        for s in self.sims.values():
            s.start()
        self.port_names = {s.port: n for n, s in self.sims.items()}
        access_log = os.path.join(self.work, "access.log")
        self.configs = {}
        for v in ("A", "B"):
            path = os.path.join(self.work, f"config-{v}.yaml")
            with open(path, "w") as f:
                f.write(config_text(v, self.work, self.sims, access_log, getattr(a, "cache_index", DEFAULT_INDEX)))
            chk = subprocess.run([self.binaries["tidegate"], "--check-config", path], capture_output=True, text=True,
                                 timeout=60)
            if chk.returncode != 0:
                raise SetupError(f"config {v} refused: {chk.stdout}{chk.stderr}")
            self.configs[v] = path
        self.config_path = os.path.join(self.work, "gateway.yaml")
        shutil.copy(self.configs["A"], self.config_path)
        self.gw = GatewayProc(self.binaries["tidegate"], self.work, self.config_path)
        log(f"gateway pid {self.gw.pid} on 127.0.0.1:{self.gw.port}; sims "
            + ", ".join(f"{n}:{s.port}" for n, s in self.sims.items()) + f"; work dir {self.work}")
        # Wait for every replica to be probed healthy before traffic starts.
        end = time.monotonic() + 20
        while time.monotonic() < end:
            st, _ = scrape(self.gw.port, "/readyz")
            if st == 200:
                break
            time.sleep(0.2)

    def apply_config(self, variant):
        with self.lock:
            tmp = self.config_path + ".tmp"
            shutil.copy(self.configs[variant], tmp)
            os.replace(tmp, self.config_path)
            before = self.gw.count("gateway.reloaded")
            os.kill(self.gw.pid, signal.SIGHUP)
            self.variant = variant
            self.reloads += 1
        end = time.monotonic() + 10
        while time.monotonic() < end and self.gw.count("gateway.reloaded") <= before:
            if self.gw.count("gateway.reload_failed"):
                break
            time.sleep(0.05)

    # -- background loops (each bounded by the deadline)
    def chaos_loop(self):
        """Every --reload-interval: SIGHUP with the other config. Every --kill-interval: SIGKILL
        r2 and bring it back on the same port 2 s later. r2 also dies by itself (--die-after,
        mid-stream) and is restarted at once. Nothing happens while the run is quiesced."""
        a = self.args
        self.next_reload = time.monotonic() + a.reload_interval
        self.next_kill = time.monotonic() + a.kill_interval
        r2 = self.sims["r2"]
        while not self.stop.is_set() and time.monotonic() < self.deadline:
            time.sleep(0.25)
            with self.chaos_mu:
                if self.pause.is_set():
                    continue
                self.chaos_step(r2)

    def chaos_step(self, r2):
        a = self.args
        now = time.monotonic()
        if not r2.alive():
            self.event("sim_exited", sim="r2", rc=r2.proc.returncode)
            r2.start()
        if now >= self.next_kill:
            self.next_kill = now + a.kill_interval
            r2.kill()
            self.kills += 1
            self.event("sim_sigkill", sim="r2")
            time.sleep(2)
            r2.start()
        if now >= self.next_reload:
            self.next_reload = now + a.reload_interval
            self.apply_config("B" if self.variant == "A" else "A")
            self.event("sighup", config=self.variant)

    def sample(self, phase=None):
        with self.sample_mu:
            return self._sample(phase)

    def _sample(self, phase):
        pid = self.gw.pid
        t = time.monotonic() - self.t0
        try:
            st = read_status(pid)
            kinds, per_replica = fd_breakdown(pid, self.gw.port, self.port_names)
        except (FileNotFoundError, ProcessLookupError):
            return None
        row = {"t_s": round(t, 1), "phase": phase or self.phase, "config": self.variant,
               "rss_kb": st.get("VmRSS"), "hwm_kb": st.get("VmHWM"), "rss_anon_kb": st.get("RssAnon"),
               "threads": st.get("Threads")}
        row.update({f"fd_{k}": v for k, v in kinds.items()})
        for n in self.sims:
            row[f"up_{n}"] = per_replica.get(n, 0)
        done, errors = self.stats.snapshot()
        row["requests"], row["errors"] = done, errors
        try:
            code, body = scrape(self.gw.port)
            text = body.decode(errors="replace")
            row["metrics_bytes"] = len(body)
            row["metrics_series"] = sum(1 for l in text.splitlines() if l and not l.startswith("#"))
            row["gw_connections_open"] = metric_sum(text, "tidegate_connections_open")
            row["cache_entries"] = metric_sum(text, "tidegate_cache_entries")
            row["cache_bytes"] = metric_sum(text, "tidegate_cache_bytes")
            code, body = scrape(self.gw.port, "/admin/cache/stats", {"Authorization": f"Bearer {ADMIN_KEY}"})
            if code == 200:
                cs = json.loads(body)
                row["cache_scopes"] = cs.get("scopes")
                row["cache_log_bytes"] = (cs.get("persistence") or {}).get("log_bytes")
        except (OSError, ValueError):
            row["metrics_bytes"] = None
        self.samples.append(row)
        self.csv.writerow(row)
        self.csv_file.flush()
        return row

    def sampler_loop(self):
        nxt = time.monotonic()
        while not self.stop.is_set() and time.monotonic() < self.deadline:
            if not self.gw.alive():
                self.event("gateway_died", rc=self.gw.proc.returncode)
                self.stop.set()
                return
            if time.monotonic() >= nxt and not self.pause.is_set():
                nxt += self.args.sample_interval
                self.sample()
            time.sleep(0.2)

    def quiesce(self, label):
        """Stops traffic and chaos, closes every client connection, puts config A back, waits
        for the gateway to hold no client socket, then samples (twice, 2 s apart) -> the
        quiescent row. Both reference points (after warm-up, end) are taken this way, so they
        compare like with like: same config, same replicas, no request in flight."""
        self.resume.clear()
        self.pause.set()
        with self.chaos_mu:  # an action under way (a kill and its restart) finishes first
            pass
        end = time.monotonic() + 60
        for c in self.clients:
            c.paused.wait(timeout=max(0.1, end - time.monotonic()))
        if self.variant != "A":
            self.apply_config("A")
            self.event("sighup", config="A", why=f"quiesce {label}")
        end = time.monotonic() + 20
        while time.monotonic() < end:
            kinds, _ = fd_breakdown(self.gw.pid, self.gw.port, self.port_names)
            if kinds["client"] == 0:
                break
            time.sleep(0.2)
        # Removed replicas drain, probes settle, and idle pooled connections are closed: the
        # gateway closes those idle past ConnPool::kMaxIdle (10 s, gateway/src/impl.h), so both
        # reference points see empty pools and compare like with like.
        time.sleep(12)
        self.sample(phase=f"quiesce_{label}_1")
        time.sleep(2)
        row = self.sample(phase=f"quiesce_{label}")
        return row

    def go(self):
        a = self.args
        self.t0 = time.monotonic()
        os.makedirs(a.out, exist_ok=True)
        self.csv_file = open(os.path.join(a.out, "samples.csv"), "w", newline="")
        fields = ["t_s", "phase", "config", "rss_kb", "hwm_kb", "rss_anon_kb", "threads",
                  "fd_total", "fd_listen", "fd_client", "fd_upstream", "fd_upstream_close_wait", "fd_tcp_other",
                  "fd_socket_other", "fd_file", "fd_pipe", "fd_anon", "fd_other"] + [f"up_{n}" for n in self.sims] + [
                  "requests", "errors", "metrics_bytes", "metrics_series", "gw_connections_open", "cache_entries",
                  "cache_bytes", "cache_scopes", "cache_log_bytes"]
        self.csv = csv.DictWriter(self.csv_file, fieldnames=fields, extrasaction="ignore")
        self.csv.writeheader()
        self.sample(phase="start")
        total_s = a.minutes * 60
        warm_s = min(a.warmup_minutes * 60, total_s / 2)
        self.deadline = time.monotonic() + total_s + 300  # hard stop for every loop (quiesce pauses add time)
        self.clients = [Client(i, self) for i in range(a.clients)]
        threads = [threading.Thread(target=self.chaos_loop, daemon=True, name="chaos"),
                   threading.Thread(target=self.sampler_loop, daemon=True, name="sampler")]
        for t in self.clients + threads:
            t.start()
        traffic_start = time.monotonic()
        paused_s = 0.0
        self.warm = None
        # Main thread: the schedule. Traffic time excludes the quiesce pause.
        while not self.stop.is_set():
            elapsed = time.monotonic() - traffic_start - paused_s
            if self.warm is None and elapsed >= warm_s:
                p0 = time.monotonic()
                self.warm = self.quiesce("warm")
                self.event("warmup_done", rss_kb=self.warm and self.warm["rss_kb"], fds=self.warm and self.warm["fd_total"])
                self.phase = "measure"
                self.pause.clear()
                self.resume.set()
                paused_s += time.monotonic() - p0
            if elapsed >= total_s:
                break
            time.sleep(0.2)
        self.traffic_s = time.monotonic() - traffic_start - paused_s
        died = not self.gw.alive()
        self.end = None
        if not died:
            self.end = self.quiesce("end")
        self.stop.set()
        self.resume.set()
        for t in self.clients + threads:
            t.join(timeout=60)
        stuck = [t.name for t in self.clients + threads if t.is_alive()]
        died = died or not self.gw.alive()
        reload_failed = self.gw.count("gateway.reload_failed")
        rc = None if died else self.gw.stop()
        self.csv_file.close()
        return self.report(died, rc, reload_failed, stuck, warm_s)

    # -- the report
    def report(self, died, rc, reload_failed, stuck, warm_s):
        a = self.args
        loaded = [s for s in self.samples if s["phase"] == "measure" and s.get("rss_kb")]
        warm_loaded = [s for s in self.samples if s["phase"] == "warmup" and s.get("rss_kb")]
        w, e = self.warm or {}, self.end or {}
        mb = lambda kb: round(kb / 1024, 1) if kb else None
        growth = None
        if w.get("rss_kb") and e.get("rss_kb"):
            growth = round(100.0 * (e["rss_kb"] - w["rss_kb"]) / w["rss_kb"], 2)
        slope = None
        if len(loaded) >= 3:
            xs = [s["t_s"] / 60 for s in loaded]
            ys = [s["rss_kb"] / 1024 for s in loaded]
            mx, my = statistics.fmean(xs), statistics.fmean(ys)
            den = sum((x - mx) ** 2 for x in xs)
            slope = round(sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den, 3) if den else None
        all_rows = [s for s in self.samples if s.get("fd_total") is not None]
        fd_max = max((s["fd_total"] for s in all_rows), default=None)
        fd_growth = (e.get("fd_total") - w.get("fd_total")) if (w.get("fd_total") is not None and e.get("fd_total") is not None) else None
        # The descriptors split three ways (README, "Descriptors"): the gateway's own (files,
        # pipes, eventfds, listener, client sockets: none at quiescence), idle upstream
        # connections pooled for configured replicas, and upstream connections to a replica
        # that the current config (A, at both reference points) no longer has: r3.
        parts = {}
        if fd_growth is not None:
            def split(row):
                configured = sum(row.get(f"up_{n}", 0) for n in CONFIGURED["A"])
                orphaned = row["fd_upstream"] - configured
                return {"own": row["fd_total"] - row["fd_upstream"], "pooled_configured": configured,
                        "orphaned_upstream": orphaned}
            sw, se = split(w), split(e)
            parts = {k: {"warm": sw[k], "end": se[k], "growth": se[k] - sw[k]} for k in sw}
        failures = []
        if died:
            failures.append("gateway died")
        if rc not in (0,) and not died:
            failures.append(f"gateway exit code on SIGTERM: {rc}")
        if reload_failed:
            failures.append(f"{reload_failed} reload(s) failed")
        if growth is None:
            failures.append("no RSS figures")
        elif growth > a.rss_limit_pct:
            failures.append(f"RSS grew {growth}% after warm-up (limit {a.rss_limit_pct}%)")
        if fd_growth is None:
            failures.append("no descriptor figures")
        else:
            if fd_growth > a.fd_slack + a.pool_slack:
                failures.append(f"descriptors grew by {fd_growth} after warm-up (slack {a.fd_slack} + {a.pool_slack})")
            if parts["own"]["growth"] > a.fd_slack:
                failures.append(f"the gateway's own descriptors grew by {parts['own']['growth']} (slack {a.fd_slack})")
            if parts["pooled_configured"]["growth"] > a.pool_slack:
                failures.append(f"pooled upstream connections grew by {parts['pooled_configured']['growth']} "
                                f"(slack {a.pool_slack})")
            if parts["orphaned_upstream"]["growth"] > 0:
                failures.append(f"upstream connections to a replica removed by reload grew by "
                                f"{parts['orphaned_upstream']['growth']} "
                                f"({parts['orphaned_upstream']['warm']} -> {parts['orphaned_upstream']['end']}; slack 0)")
        if stuck:
            failures.append(f"threads did not stop: {stuck}")
        by_class = {k: dict(sorted(v.items())) for k, v in sorted(self.stats.by_class.items())}
        summary = {
            "ok": not failures,
            "failures": failures,
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "commit": self.commit,
            "binary_built": self.binary_mtime + " UTC",
            "machine": machine(),
            "minutes": a.minutes, "warmup_s": warm_s, "traffic_s": round(self.traffic_s, 1),
            "clients": a.clients, "seed": a.seed,
            "requests_total": self.stats.done, "unexpected_total": self.stats.error_total,
            "keepalive_reconnects": self.stats.reconnects,
            "requests_by_class": {k: sum(v.values()) for k, v in by_class.items()},
            "outcomes_by_class": by_class,
            "unexpected_by_class": dict(sorted(self.stats.errors.items())),
            "cache_header_by_class": self.stats.cache,
            "reloads": self.reloads, "reload_failed": reload_failed, "sim_sigkills": self.kills,
            "sim_restarts": {n: s.starts - 1 for n, s in self.sims.items()},
            "gateway_exit_code": rc,
            "rss_mb": {"warm_quiescent": mb(w.get("rss_kb")), "end_quiescent": mb(e.get("rss_kb")),
                       "growth_pct": growth,
                       "warm_loaded_last": mb(warm_loaded[-1]["rss_kb"]) if warm_loaded else None,
                       "end_loaded_last": mb(loaded[-1]["rss_kb"]) if loaded else None,
                       "loaded_max": mb(max((s["rss_kb"] for s in loaded), default=0)),
                       "loaded_slope_mb_per_min": slope,
                       "hwm": mb(e.get("hwm_kb") or w.get("hwm_kb"))},
            "fds": {"warm_quiescent": w.get("fd_total"), "end_quiescent": e.get("fd_total"), "max": fd_max,
                    "growth": fd_growth, "slack": {"own": a.fd_slack, "pooled": a.pool_slack}, "parts": parts,
                    "warm_breakdown": breakdown(w), "end_breakdown": breakdown(e)},
            "metrics_bytes": {"warm_quiescent": w.get("metrics_bytes"), "end_quiescent": e.get("metrics_bytes")},
            "metrics_series": {"warm_quiescent": w.get("metrics_series"), "end_quiescent": e.get("metrics_series")},
            "cache_entries": {"warm_quiescent": w.get("cache_entries"), "end_quiescent": e.get("cache_entries")},
            "events": self.events,
        }
        with open(os.path.join(a.out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1)
            f.write("\n")
        with open(os.path.join(a.out, "gateway-stderr-tail.log"), "w") as f:
            f.write(self.gw.tail(200) + "\n")
        return summary


class SetupError(Exception):
    pass


def breakdown(row):
    if not row:
        return None
    keep = {k[3:]: v for k, v in row.items() if k.startswith("fd_") and v}
    keep.update({f"upstream_{k[3:]}": v for k, v in row.items() if k.startswith("up_") and v})
    return keep


def git_head():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def machine():
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {model}"


def print_report(s):
    r, f = s["rss_mb"], s["fds"]
    print(f"soak: {s['traffic_s']:.0f} s of traffic, {s['requests_total']} requests "
          f"({s['unexpected_total']} unexpected outcomes), {s['reloads']} SIGHUPs, {s['sim_sigkills']} SIGKILLs")
    for cls, n in s["requests_by_class"].items():
        outs = ", ".join(f"{k}: {v}" for k, v in s["outcomes_by_class"][cls].items())
        print(f"  {cls:24s} {n:7d}  {outs}")
    print(f"RSS after warm-up {r['warm_quiescent']} MB, at end {r['end_quiescent']} MB: {r['growth_pct']}% "
          f"(under load: {r['warm_loaded_last']} -> {r['end_loaded_last']} MB, max {r['loaded_max']}, "
          f"slope {r['loaded_slope_mb_per_min']} MB/min)")
    print(f"fds after warm-up {f['warm_quiescent']}, max {f['max']}, at end {f['end_quiescent']} (growth {f['growth']})")
    for k, v in (f.get("parts") or {}).items():
        print(f"  {k:20s} {v['warm']:4d} -> {v['end']:4d}  ({v['growth']:+d})")
    print(f"  warm: {f['warm_breakdown']}\n  end:  {f['end_breakdown']}")
    print("PASS" if s["ok"] else "FAIL: " + "; ".join(s["failures"]))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=10.0, help="traffic time (default 10)")
    p.add_argument("--warmup-minutes", type=float, default=2.0,
                   help="reference point for growth (default 2; at most half of --minutes)")
    p.add_argument("--clients", type=int, default=16, help="concurrent clients (default 16)")
    p.add_argument("--bin-dir", default=os.path.join(ROOT, "build", "bin"),
                   help="where tidegate and tidegate-sim are (copied into the work dir first)")
    p.add_argument("--out", default=None, help="folder for samples.csv and summary.json "
                   "(default bench/soak/results/<date>)")
    p.add_argument("--sample-interval", type=float, default=5.0)
    p.add_argument("--reload-interval", type=float, default=30.0)
    p.add_argument("--kill-interval", type=float, default=60.0)
    p.add_argument("--rss-limit-pct", type=float, default=5.0)
    p.add_argument("--fd-slack", type=int, default=2,
                   help="growth allowed in the gateway's own descriptors between the quiescent points (default 2; README: why)")
    p.add_argument("--pool-slack", type=int, default=8,
                   help="growth allowed in idle upstream connections to configured replicas (default 8 = 2 loops x 4 replicas; README: why)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--cache-index", default=DEFAULT_INDEX, help=f"the cache's index section (default {DEFAULT_INDEX})")
    p.add_argument("--keep", action="store_true", help="keep the work dir (logs, configs, cache files)")
    a = p.parse_args()
    if a.minutes <= 0 or a.clients < 1:
        p.error("--minutes > 0 and --clients >= 1")
    a.out = a.out or os.path.join(HERE, "results", time.strftime("%Y-%m-%d-%H%M"))
    run = Run(a)
    try:
        run.setup()
        summary = run.go()
    except SetupError as e:
        log(str(e))
        return 2
    finally:
        run.stop.set()
        run.resume.set()
        if getattr(run, "gw", None) is not None and run.gw.alive():
            run.gw.proc.kill()
        for s in getattr(run, "sims", {}).values():
            s.kill()
        if getattr(run, "work", None) and not a.keep:
            shutil.rmtree(run.work, ignore_errors=True)
        elif getattr(run, "work", None):
            log(f"work dir kept: {run.work}")
    print_report(summary)
    log(f"wrote {a.out}/samples.csv and summary.json")
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
