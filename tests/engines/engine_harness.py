"""A real engine for end-to-end tests: llama.cpp's llama-server with SmolLM2-135M-Instruct, as
scripts/setup_engines.sh builds them into third_party/engines/. Replicas listen on 127.0.0.1
only; each runs with one thread so that two or three fit beside the gateway on two cores."""
import os
import socket
import subprocess
import sys
import time

import httpx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "app"))
sys.path.insert(0, os.path.join(HERE, "..", "gateway"))
from app_harness import ADMIN, KEYS, App, keys_yaml  # noqa: E402,F401
from harness import _die_with_parent, wait_until  # noqa: E402,F401

# Slots and context: -c is the whole context, shared by the -np slots (each gets c/np tokens).
SLOTS = 2
CTX = 2048
PER_SLOT_CTX = CTX // SLOTS


def paths(source_root):
    root = os.path.join(source_root, "third_party", "engines")
    return (os.path.join(root, "llama.cpp", "bin", "llama-server"),
            os.path.join(root, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))


def missing(source_root):
    """Why the engine tests cannot run here, or None."""
    server, model = paths(source_root)
    if not os.access(server, os.X_OK) or not os.path.exists(model):
        return f"llama-server or SmolLM2 not built ({server}); run scripts/setup_engines.sh (make test-engines does)"
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_args(source_root, port, alias="m", embeddings=False, slots=SLOTS):
    server, model = paths(source_root)
    args = [server, "-m", model, "--host", "127.0.0.1", "--port", str(port), "--alias", alias,
            "-np", str(slots), "-c", str(CTX), "-t", "1", "--threads-http", "2", "--metrics",
            "--no-webui", "--no-warmup"]
    if embeddings:
        args += ["--embeddings", "--pooling", "mean"]
    return args


class Engine:
    """One llama-server process; ready when its /health answers 200."""

    def __init__(self, source_root, alias="m", embeddings=False, slots=SLOTS):
        self.port = free_port()
        self.log_path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"llama-server-{self.port}.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(server_args(source_root, self.port, alias, embeddings, slots),
                                     stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"llama-server exited {self.proc.returncode}: {self.tail()}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.close()
        raise AssertionError(f"llama-server not ready in 60 s: {self.tail()}")

    def tail(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()[-2000:]

    def metric(self, name):
        text = httpx.get(self.url + "/metrics", timeout=5).text
        for line in text.splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
        return None

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self.log.close()


def engines(source_root, n, **kw):
    started = []
    try:
        for _ in range(n):
            started.append(Engine(source_root, **kw))
    except BaseException:
        for e in started:
            e.close()
        raise
    return started


def model_yaml(name, ports, *, health_interval="1s", failures=3, cap=SLOTS, extra="", balancer="least_outstanding"):
    reps = "\n".join(f"      - {{id: r{i}, url: \"http://127.0.0.1:{p}\"}}" for i, p in enumerate(ports))
    return f"""  - name: {name}
    balancer: {balancer}
    max_concurrency_per_replica: {cap}
    queue: {{max_length: 200, max_wait: 60s}}
    health: {{path: /health, interval: {health_interval}, timeout: 1s, failures_to_eject: {failures}}}
{extra}    replicas:
{reps if ports else "      []"}
"""


def cost_yaml(models=("m",)):
    mapping = ", ".join(f"{m}: cpu" for m in models)
    return f"""cost:
  data_dir: ""
  replica_classes:
    cpu: {{usd_per_hour: 0.50}}
  models: {{{mapping}}}
"""


def cache_yaml(threshold=0.97):
    """The semantic cache with the hash embedder: exact repeats hit, nothing needs MiniLM."""
    return f"""cache:
  enabled: true
  embedder: {{type: hash, dim: 256}}
  index: {{type: flat}}
  threshold: {threshold}
  max_temperature: 1.0
  data_dir: ""
  snapshot_interval: 1h
"""


def chat(content, model="m", **kw):
    body = {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": 16,
            "temperature": 0, "seed": 1}
    body.update(kw)
    return body
