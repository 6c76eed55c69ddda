#!/usr/bin/env python3
"""preStop hook of the model-server pods (vllm-llama.yaml): SIGTERM waits until the engine has
finished what it is serving.

A terminating pod leaves its Service's EndpointSlices at once, so no gateway sends it anything
new. The requests already on it came from every gateway in front of the fleet, though, not only
from the scaler that removed it: that scaler waits for its own gateway's, and the others' would
be cut when the engine gets SIGTERM. This waits, after a settle period for the endpoint change
to reach every gateway, until the engine's own /metrics count no running and no waiting request.
It is bounded by --max-wait, kept under the pod's terminationGracePeriodSeconds, so the hook
ends the wait and not the kubelet's kill. The standard library only: it runs in the engine's image.

  engine-drain.py [--port 8000] [--settle 5] [--max-wait 50] [--poll 1]

Exits 0 whatever happens (an engine that does not answer has nothing left to finish; a failed
hook would only delay the kill with an event).
"""
import argparse
import re
import sys
import time
import urllib.request

# vLLM's gauges (SGLang and the simulator export the same names); labels vary by engine version.
GAUGE = re.compile(r"^vllm:num_requests_(?:running|waiting)(?:\{[^}]*\})?\s+(\S+)\s*$", re.M)


def in_flight(url, timeout):
    """Running + waiting requests, or None if the engine does not answer or exports neither."""
    with urllib.request.urlopen(url, timeout=timeout) as r:
        text = r.read().decode("utf-8", "replace")
    values = GAUGE.findall(text)
    return sum(float(v) for v in values) if values else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--settle", type=float, default=5.0)
    ap.add_argument("--max-wait", type=float, default=50.0)
    ap.add_argument("--poll", type=float, default=1.0)
    a = ap.parse_args()
    start = time.monotonic()
    deadline = start + a.max_wait
    time.sleep(min(a.settle, a.max_wait))
    url = f"http://{a.host}:{a.port}/metrics"
    while True:
        try:
            n = in_flight(url, timeout=max(0.1, min(2.0, deadline - time.monotonic())))
        except Exception as e:  # gone already: nothing to wait for
            print(f"engine-drain: {url}: {e}; not waiting", file=sys.stderr)
            return 0
        if n is None:
            print("engine-drain: the engine exports no request gauges; not waiting", file=sys.stderr)
            return 0
        if n == 0:
            print(f"engine-drain: drained after {time.monotonic() - start:.1f}s", file=sys.stderr)
            return 0
        if time.monotonic() + a.poll > deadline:
            print(f"engine-drain: {n:g} requests still in flight after {a.max_wait:g}s; giving up", file=sys.stderr)
            return 0
        time.sleep(a.poll)


if __name__ == "__main__":
    sys.exit(main())
