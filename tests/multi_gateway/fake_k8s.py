"""A loopback fake Kubernetes API server for the multi-gateway scaler tests: one Deployment with
its `scale` subresource (autoscaling/v1 Scale, merge-patch of spec.replicas), its Service's
EndpointSlices (discovery.k8s.io/v1, one slice per pod as every pod is a real `tidegate-sim` on
its own loopback port), pod merge-patches (the deletion-cost annotation), and
coordination.k8s.io/v1 Leases (404 when missing, 409 AlreadyExists / Conflict on a stale
metadata.resourceVersion). Pods are started and stopped as spec.replicas moves.

Every write is logged with the pid of the gateway that sent it (found from the connection's
socket in /proc), so a test can tell which of several gateways scaled."""
import json
import os
import re
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

NS = "ns1"


def _socket_inode(client_port, server_port):
    """The inode of the client side of a loopback TCP connection (IPv4 /proc/net/tcp)."""
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            cols = line.split()
            local, remote = cols[1], cols[2]
            if int(local.split(":")[1], 16) == client_port and int(remote.split(":")[1], 16) == server_port:
                return cols[9]
    return None


def _pid_holding(inode, pids):
    target = f"socket:[{inode}]"
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                        return pid
                except OSError:
                    continue
        except OSError:
            continue
    return None


class Pod:
    def __init__(self, name, sim_argv, startup_s):
        from harness import _die_with_parent  # tests/gateway/harness.py (on sys.path via app_harness)
        self.name = name
        self.proc = subprocess.Popen(sim_argv + ["--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, preexec_fn=_die_with_parent)
        line = self.proc.stdout.readline()
        assert line.startswith("listening on"), f"sim said: {line!r}"
        self.port = int(line.strip().rsplit(":", 1)[1])
        self.ready_at = time.monotonic() + startup_s
        self.deletion_cost = 0

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


class FakeCluster:
    def __init__(self, sim_argv, deployment="sim", replicas=1, startup_s=0.0):
        self.sim_argv, self.deployment, self.startup_s = sim_argv, deployment, startup_s
        self.lock = threading.Lock()
        self.pods, self.next_pod = [], 0
        self.lease, self.version = None, 100
        self.scale_log = []   # (monotonic t, pid, replicas before, replicas after)
        self.lease_log = []   # (monotonic t, pid, holder)
        self.gateway_pids = []
        self.replicas = 0
        # Pods die with the thread that started them (PR_SET_PDEATHSIG follows the thread, not the
        # process): one long-lived thread starts them all, not the request handlers' threads.
        self.spawner = ThreadPoolExecutor(max_workers=1)
        self._resize(replicas)
        cluster = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _reply(self, code, obj):
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _body(self):
                n = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(n) or b"{}")

            def _sender(self):
                inode = _socket_inode(self.client_address[1], self.server.server_address[1])
                return _pid_holding(inode, list(cluster.gateway_pids)) if inode else None

            def do_GET(self):
                self._reply(*cluster.get(self.path))

            def do_PATCH(self):
                self._reply(*cluster.patch(self.path, self._body(), self._sender()))

            def do_POST(self):
                self._reply(*cluster.write_lease("POST", self.path, self._body(), self._sender()))

            def do_PUT(self):
                self._reply(*cluster.write_lease("PUT", self.path, self._body(), self._sender()))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    # --- Deployment, pods, EndpointSlices ---------------------------------------------------

    def _resize(self, n):
        while len(self.pods) < n:
            self.next_pod += 1
            name = f"{self.deployment}-pod{self.next_pod}"
            self.pods.append(self.spawner.submit(Pod, name, self.sim_argv, self.startup_s).result(timeout=20))
        while len(self.pods) > n:
            # The ReplicaSet removes the pod with the lowest deletion cost first, else the newest.
            victim = min(reversed(self.pods), key=lambda p: p.deletion_cost)
            self.pods.remove(victim)
            victim.close()
        self.replicas = n

    def _scale(self):
        return {"apiVersion": "autoscaling/v1", "kind": "Scale",
                "metadata": {"name": self.deployment, "namespace": NS, "resourceVersion": str(self.version)},
                "spec": {"replicas": self.replicas},
                "status": {"replicas": len(self.pods), "selector": f"app={self.deployment}"}}

    def _slices(self):
        now = time.monotonic()
        items = [{"metadata": {"name": f"{self.deployment}-{p.name[-5:]}",
                               "labels": {"kubernetes.io/service-name": self.deployment}},
                  "addressType": "IPv4",
                  "endpoints": [{"addresses": ["127.0.0.1"],
                                 "conditions": {"ready": now >= p.ready_at, "serving": now >= p.ready_at,
                                                "terminating": False},
                                 "targetRef": {"kind": "Pod", "namespace": NS, "name": p.name}}],
                  "ports": [{"name": "http", "port": p.port, "protocol": "TCP"}]} for p in self.pods]
        return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSliceList",
                "metadata": {"resourceVersion": str(self.version)}, "items": items}

    def get(self, path):
        with self.lock:
            if path == f"/apis/apps/v1/namespaces/{NS}/deployments/{self.deployment}/scale":
                return 200, self._scale()
            if path.startswith(f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices?labelSelector="):
                if path.endswith("%3D" + self.deployment):
                    return 200, self._slices()
                return 200, {"kind": "EndpointSliceList", "items": []}
            m = re.fullmatch(f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/([a-z0-9.-]+)", path)
            if m:
                if self.lease is None or self.lease["metadata"]["name"] != m.group(1):
                    return 404, {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404}
                return 200, self.lease
        return 404, {"kind": "Status", "code": 404}

    def patch(self, path, body, pid):
        with self.lock:
            if path == f"/apis/apps/v1/namespaces/{NS}/deployments/{self.deployment}/scale":
                before = self.replicas
                self.version += 1
                self._resize(int(body["spec"]["replicas"]))
                self.scale_log.append((time.monotonic(), pid, before, self.replicas))
                return 200, self._scale()
            m = re.fullmatch(f"/api/v1/namespaces/{NS}/pods/([a-z0-9.-]+)", path)
            if m:
                cost = body.get("metadata", {}).get("annotations", {}).get("controller.kubernetes.io/pod-deletion-cost")
                for p in self.pods:
                    if p.name == m.group(1) and cost is not None:
                        p.deletion_cost = int(cost)
                return 200, {"kind": "Pod", "metadata": {"name": m.group(1)}}
        return 404, {"kind": "Status", "code": 404}

    # --- Leases -------------------------------------------------------------------------------

    def write_lease(self, method, path, body, pid):
        base = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"
        with self.lock:
            if method == "POST" and path == base:
                if self.lease is not None:
                    return 409, {"kind": "Status", "reason": "AlreadyExists", "code": 409}
                return self._store(body, pid, 201)
            if method == "PUT" and path.startswith(base + "/"):
                if self.lease is None or self.lease["metadata"]["name"] != path[len(base) + 1:]:
                    return 404, {"kind": "Status", "reason": "NotFound", "code": 404}
                rv = body.get("metadata", {}).get("resourceVersion")
                if rv is not None and rv != self.lease["metadata"]["resourceVersion"]:
                    return 409, {"kind": "Status", "reason": "Conflict", "code": 409}
                return self._store(body, pid, 200)
        return 405, {"kind": "Status", "code": 405}

    def _store(self, body, pid, code):
        self.version += 1
        body["metadata"]["resourceVersion"] = str(self.version)
        self.lease = body
        self.lease_log.append((time.monotonic(), pid, body.get("spec", {}).get("holderIdentity", "")))
        return code, body

    def holder(self):
        with self.lock:
            return (self.lease or {}).get("spec", {}).get("holderIdentity", "")

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        with self.lock:
            for p in self.pods:
                p.close()
            self.pods = []
        self.spawner.shutdown()
