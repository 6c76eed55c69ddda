"""Three `tidegate` processes with one scaler config over one (fake) Kubernetes cluster: the
scalers elect a leader through a coordination.k8s.io/v1 Lease; only it patches the Deployment's
scale, the followers route every pod it runs and keep deciding (not actuated). kill -9 of the
leader moves the lease within its duration, and the new leader goes on scaling from where the
old one left off, with no second writer. Pods are real `tidegate-sim` processes on 127.0.0.1."""
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time

import httpx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "app_scaler"))
sys.path.insert(0, HERE)
from scaler_app import ADMIN, Load, model_yaml, wait_until  # noqa: E402
from app_harness import keys_yaml  # noqa: E402
from harness import SLOWDOWN, Gateway  # noqa: E402
from fake_k8s import FakeCluster  # noqa: E402

LEASE_S, RETRY_S = 3.0, 0.5


def scaler_yaml(api):
    return f"""scaler:
  tick: 250ms
  leader_election: {{kind: kubernetes, lease_name: tidegate-scaler, lease_duration: {LEASE_S}s,
                     renew_deadline: 2s, retry_period: {RETRY_S}s, request_timeout: 1s}}
  pools:
    - model: m
      actuator: {{kind: kubernetes, api_server: "{api}", namespace: ns1, token: t0k3n, deployment: sim,
                  service: sim, port_name: http, retries: 1, request_timeout: 1s}}
      lifecycle: {{warm_pool_size: 0, startup_timeout: 30s, drain_timeout: 20s}}
      signals: {{engine_metrics: true, metrics_path: /metrics, nvml: false}}
      policy:
        min_replicas: 1
        max_replicas: 6
        targets: {{concurrency_per_replica: 4}}
        stable_window: 4s
        panic_window: 1s
        scale_down_stabilization: 120s
"""


def scaler_state(gw):
    r = httpx.get(gw.url + "/admin/scaler", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


class Fleet:
    """The fake cluster (one ready pod to start with) and three gateways on the same config."""

    def __init__(self, env, stack):
        sim = [env.sim, "--model", "m", "--ttft-ms", "30", "--tpot-ms", "15", "--max-batch", "64", "--echo",
               "--threads", "1"]
        self.cluster = FakeCluster(sim, replicas=1)
        stack.callback(self.cluster.close)
        self.gws, self.killed = [], set()
        top = keys_yaml() + scaler_yaml(self.cluster.url)
        for _ in range(3):
            gw = Gateway(env.tidegate, model_yaml(), top=top, timeouts="total: 60s, first_byte: 40s")
            self.cluster.gateway_pids.append(gw.proc.pid)
            stack.callback(lambda g=gw: g.close() if g.proc.pid not in self.killed else g.proc.wait(timeout=10))
            self.gws.append(gw)

    def alive(self):
        return [g for g in self.gws if g.proc.pid not in self.killed]

    def leader(self, timeout):
        """The one gateway acting, once every live one agrees on who that is."""
        found = {}

        def agreed():
            states = {g: scaler_state(g)["leader_election"] for g in self.alive()}
            leaders = [g for g, s in states.items() if s["role"] == "leader"]
            if len(leaders) != 1:
                return False
            who = states[leaders[0]]["identity"]
            if not all(s["holder"] == who for s in states.values()):
                return False
            found["gw"] = leaders[0]
            return True

        wait_until(agreed, timeout=timeout, interval=0.1, what="one leader that every gateway names")
        assert found["gw"].proc.pid == int(scaler_state(found["gw"])["leader_election"]["identity"].rsplit("_", 1)[1])
        return found["gw"]

    def kill(self, gw):
        gw.proc.kill()
        gw.proc.wait(timeout=10)
        self.killed.add(gw.proc.pid)

    def writers(self, since=0.0):
        return {pid for t, pid, _, _ in self.cluster.scale_log if t >= since}


def routes_every_pod(gw, cluster):
    pool = scaler_state(gw)["pools"][0]
    return pool["counts"]["active"] == len(cluster.pods) and pool["role"] in ("leader", "follower")


def check_pods_alive(cluster):
    dead = [(p.name, p.proc.poll()) for p in cluster.pods if p.proc.poll() is not None]
    assert not dead, f"pods died under the test: {dead}"


def check_steps(cluster):
    """Each scale write moved spec.replicas by one from what its writer had just read: two
    writers at once would show as a step from a stale read (a lost or doubled update)."""
    log = cluster.scale_log
    for i, (_, pid, before, after) in enumerate(log):
        assert abs(after - before) == 1, f"write {i} from pid {pid}: {before} -> {after}; log {log}"


def test_leader_one_scaler_acts(env):
    with contextlib.ExitStack() as stack:
        f = Fleet(env, stack)
        leader = f.leader(timeout=10)
        followers = [g for g in f.gws if g is not leader]
        for g in f.gws:
            wait_until(lambda g=g: routes_every_pod(g, f.cluster), timeout=10, what="every gateway routes the pod")
        # A burst spread over the three: 12 streams at 4 per replica want 3 replicas.
        loads = [Load(g, 4, max_tokens=150, deadline_s=30) for g in f.gws]
        try:
            wait_until(lambda: f.cluster.replicas >= 3, timeout=20, what="the Deployment scaled to 3")
            for g in f.gws:
                wait_until(lambda g=g: routes_every_pod(g, f.cluster), timeout=10, what="every gateway routes all")
            time.sleep(2)  # room for a second scaler to add its own replicas, were there one
        finally:
            for load in loads:
                load.stop()
        assert f.writers() == {leader.proc.pid}, f"scale writers {f.writers()}, leader {leader.proc.pid}"
        check_steps(f.cluster)
        check_pods_alive(f.cluster)
        assert f.cluster.replicas <= 4, f"12 streams at 4 per replica scaled to {f.cluster.replicas}"
        for load in loads:
            assert load.ok > 0 and not load.failed, load.failed[:3]
        # The followers decided too (their own view of the burst) and did nothing with it.
        for g in followers:
            pool = scaler_state(g)["pools"][0]
            ups = [d for d in pool["changes"] if d["direction"] == "up"]
            assert ups and all(d["actuated"] is False for d in ups), pool["changes"][:3]
            assert g.metric("tidegate_scaler_leader", {"model": "m"}) == 0
            assert g.metric("tidegate_scaler_actuator_errors_total", {"model": "m"}) == 0
        assert leader.metric("tidegate_scaler_leader", {"model": "m"}) == 1
        for g in f.gws:  # the new series keep the exposition promtool-clean
            text = httpx.get(g.url + "/metrics", timeout=10).text
            r = subprocess.run([env.promtool, "check", "metrics"], input=text, capture_output=True, text=True,
                               timeout=30)
            assert r.returncode == 0, r.stdout + r.stderr
        assert leader.metric("tidegate_scaler_leader_transitions_total", {"model": "m"}) == 1
        # (Its first ticks ran before it held the lease: those were not actuated either.)
        ups = [d for d in scaler_state(leader)["pools"][0]["changes"] if d["direction"] == "up"]
        assert ups and ups[0]["actuated"] is True, ups[:2]


def test_leader_kill9_takeover(env):
    with contextlib.ExitStack() as stack:
        f = Fleet(env, stack)
        old = f.leader(timeout=10)
        loads = {g: Load(g, 2, max_tokens=150, deadline_s=40) for g in f.gws}  # 6 streams: 2 replicas
        try:
            wait_until(lambda: f.cluster.replicas >= 2, timeout=20, what="the Deployment scaled to 2")
            killed_at = time.monotonic()
            f.kill(old)
            loads.pop(old).stop()  # its clients now fail fast; the other two gateways' must not
            new = f.leader(timeout=LEASE_S + 2 * RETRY_S + 3)
            who = scaler_state(new)["leader_election"]["identity"]
            assert f.cluster.holder() == who
            # When the API server took the new holder's write, not when this test's polling of
            # three gateways saw it (seconds late on a loaded box under ASan).
            moved_after = next(t for t, _, h in f.cluster.lease_log if t >= killed_at and h == who) - killed_at
            print(f"leadership moved {moved_after:.2f}s after kill -9 (lease {LEASE_S}s, retry {RETRY_S}s)")
            # Last renewal <= one retry before the kill, seen <= one retry later, acquired on the
            # next round after lease_duration: within lease_duration + 2 retry periods (+ polling).
            assert moved_after <= LEASE_S + 2 * RETRY_S + 0.5 * SLOWDOWN, f"leadership moved after {moved_after:.2f}s"
            # More load on the two left: 16 streams want 4 replicas; the new leader adds them.
            more = [Load(g, 6, max_tokens=150, deadline_s=30) for g in f.alive()]
            try:
                wait_until(lambda: f.cluster.replicas >= 4, timeout=20, what="the new leader scaled to 4")
                time.sleep(2)
            finally:
                for load in more:
                    load.stop()
        finally:
            for load in loads.values():
                load.stop()
        assert f.writers(0) - f.writers(killed_at) == {old.proc.pid}, f.cluster.scale_log
        assert f.writers(killed_at) == {new.proc.pid}, f"writers after the kill {f.writers(killed_at)}"
        check_steps(f.cluster)
        check_pods_alive(f.cluster)
        assert 4 <= f.cluster.replicas <= 5, f"16 streams at 4 per replica scaled to {f.cluster.replicas}"
        holders = [h for _, _, h in f.cluster.lease_log]
        assert holders[-1].endswith(f"_{new.proc.pid}"), holders[-3:]
        survivors = f.alive()
        for g in survivors:
            assert not loads[g].failed and not any(l.failed for l in more), (
                loads[g].failed[:2], [l.failed[:2] for l in more], f.cluster.scale_log,
                [(p.name, p.proc.poll()) for p in f.cluster.pods])
            wait_until(lambda g=g: routes_every_pod(g, f.cluster), timeout=10, what="survivors route every pod")
        assert new.metric("tidegate_scaler_leader", {"model": "m"}) == 1


def sim_children(pids):
    """{gateway pid: number of its live `tidegate-sim` children} (ppid from /proc/N/stat)."""
    out = {pid: 0 for pid in pids}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0")[0]
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, ppid = fields[0], int(fields[1])
        if ppid in out and argv0.endswith(b"tidegate-sim") and state != "Z":
            out[ppid] += 1
    return out


def test_leader_file_lock(env):
    """kind: file with the process actuator: three gateways on one host, one lock file. Only the
    lock holder starts `tidegate-sim` children; the followers route them through the view it
    publishes. kill -9 of the holder: its children die with it, another gateway takes the lock
    within a retry period and starts its own; at no time do two live gateways run replicas."""
    from scaler_app import scaler_yaml as process_scaler_yaml
    lock_dir = tempfile.mkdtemp(prefix="tidegate-lock-")
    text = process_scaler_yaml(env.sim, min_r=1, max_r=4, per_replica=4, stabilisation="120s")
    text = text.replace("  pools:\n", f"  leader_election: {{kind: file, lock_file: \"{lock_dir}/scaler.lock\","
                                      f" retry_period: 250ms}}\n  pools:\n", 1)
    with contextlib.ExitStack() as stack:
        gws, killed = [], set()
        for _ in range(3):
            gw = Gateway(env.tidegate, model_yaml(), top=keys_yaml() + text, timeouts="total: 60s, first_byte: 40s")
            stack.callback(lambda g=gw: g.close() if g.proc.pid not in killed else None)
            gws.append(gw)
        seen, stop = [], threading.Event()

        def sample():  # which live gateways have replicas, every 50 ms
            while not stop.is_set():
                live = [g.proc.pid for g in gws if g.proc.pid not in killed]
                seen.append((time.monotonic(), sim_children(live)))
                time.sleep(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        stack.callback(lambda: (stop.set(), sampler.join(5)))

        def leader():
            states = {g: scaler_state(g)["leader_election"] for g in gws if g.proc.pid not in killed}
            leaders = [g for g, s in states.items() if s["role"] == "leader"]
            ok = len(leaders) == 1 and all(s["holder"] == states[leaders[0]]["identity"] for s in states.values())
            return leaders[0] if ok else None

        old = wait_until(leader, timeout=10, interval=0.1, what="one lock holder every gateway names")
        # The load starts once every gateway routes the holder's first replica: a follower that has
        # not yet read the holder's view has no replica at all and answers 503 (not what is tested).
        for g in gws:
            wait_until(lambda g=g: scaler_state(g)["pools"][0]["counts"]["active"] >= 1, timeout=20,
                       what="every gateway routes the first replica")
        loads = [Load(g, 4, max_tokens=150, deadline_s=40) for g in gws]  # 12 streams: 3 replicas
        try:
            wait_until(lambda: sim_children([old.proc.pid])[old.proc.pid] >= 3, timeout=20, what="3 replicas")
            for g in gws:  # followers route the holder's processes through its published view
                wait_until(lambda g=g: scaler_state(g)["pools"][0]["counts"]["active"] >= 3, timeout=10,
                           what="every gateway routes the holder's replicas")
            before = [len(l.failed) for l in loads]
            assert sum(before) == 0, [l.failed[:2] for l in loads]
            killed_at = time.monotonic()
            old.proc.kill()
            old.proc.wait(timeout=10)
            killed.add(old.proc.pid)
            loads[gws.index(old)].stop()
            new = wait_until(leader, timeout=5, interval=0.05, what="a new lock holder")
            moved_after = time.monotonic() - killed_at
            print(f"lock moved {moved_after:.2f}s after kill -9 (retry_period 250ms)")
            assert moved_after <= 2.0 * SLOWDOWN, moved_after
            wait_until(lambda: sim_children([new.proc.pid])[new.proc.pid] >= 1, timeout=15, what="the new holder's replicas")
            survivors = [l for g, l in zip(gws, loads) if g is not old]
            ok_then = sum(l.ok for l in survivors)
            wait_until(lambda: sum(l.ok for l in survivors) > ok_then + 4, timeout=20, what="streams served again")
        finally:
            for load in loads:
                load.stop()
        stop.set()
        sampler.join(5)
        both = [(t, c) for t, c in seen if sum(1 for n in c.values() if n) > 1]
        assert not both, f"two gateways ran replicas at once: {both[:3]}"
        most = max(seen, key=lambda tc: sum(tc[1].values()))
        assert sum(most[1].values()) <= 4, f"more replicas than max_replicas: {most}, killed at {killed_at}"
        runners = {pid for _, c in seen for pid, n in c.items() if n}
        assert runners == {old.proc.pid, new.proc.pid}, runners


def test_leader_file_lock_scale_down_keeps_follower_streams(env):
    """kind: file, scale-down: the holder drains replicas that the followers are streaming from.
    The followers drain them too (nothing new goes there) and the holder stops them only once
    those streams have ended, so that no follower's stream is cut by another gateway's
    scale-down."""
    from scaler_app import scaler_yaml as process_scaler_yaml
    lock_dir = tempfile.mkdtemp(prefix="tidegate-lock-")
    text = process_scaler_yaml(env.sim, min_r=1, max_r=4, per_replica=4, stabilisation="1s")
    text = text.replace("  pools:\n", f"  leader_election: {{kind: file, lock_file: \"{lock_dir}/scaler.lock\","
                                      f" retry_period: 250ms}}\n  pools:\n", 1)
    # Without the engines' counts the holder sizes on its own gateway's demand alone: once its
    # load ends it drains every replica but one, and every one of them carries follower streams.
    text = text.replace("engine_metrics: true", "engine_metrics: false", 1)
    with contextlib.ExitStack() as stack:
        gws = []
        for _ in range(3):
            gw = Gateway(env.tidegate, model_yaml(), top=keys_yaml() + text, timeouts="total: 60s, first_byte: 40s")
            stack.callback(gw.close)
            gws.append(gw)

        def leader():
            states = {g: scaler_state(g)["leader_election"] for g in gws}
            leaders = [g for g, s in states.items() if s["role"] == "leader"]
            ok = len(leaders) == 1 and all(s["holder"] == states[leaders[0]]["identity"] for s in states.values())
            return leaders[0] if ok else None

        def counts(g):
            return scaler_state(g)["pools"][0]["counts"]

        holder = wait_until(leader, timeout=10, interval=0.1, what="one lock holder every gateway names")
        followers = [g for g in gws if g is not holder]
        for g in gws:
            wait_until(lambda g=g: counts(g)["active"] >= 1, timeout=20, what="every gateway routes the first replica")
        # 12 streams at 4 per replica through the holder: it runs 3 replicas, every gateway routes them.
        short = [Load(holder, 12, max_tokens=150, deadline_s=40)]
        try:
            wait_until(lambda: sim_children([holder.proc.pid])[holder.proc.pid] >= 3, timeout=20, what="3 replicas")
            for g in gws:
                wait_until(lambda g=g: counts(g)["active"] >= 3, timeout=10, what="every gateway routes 3 replicas")
            # Long streams (600 tokens at 15 ms: 9 s) from the followers only, over every replica.
            long = [Load(g, 6, max_tokens=600, per_client=1, deadline_s=50) for g in followers]
            time.sleep(1.0)
        finally:
            for load in short:
                load.stop()
        # The short load has ended: the holder scales down while the long streams still run.
        drained_during = wait_until(lambda: counts(holder)["draining"] >= 1 and counts(holder), timeout=8,
                                    interval=0.1, what="the holder draining a replica while the followers stream")
        wait_until(lambda: any(counts(g)["draining"] >= 1 for g in followers), timeout=3, interval=0.1,
                   what="a follower draining it too")
        for load in long:
            load.stop(timeout=40)
        failed = [f for load in long for f in load.failed]
        assert not failed, f"follower streams cut by the holder's scale-down: {failed[:3]} (holder {drained_during})"
        assert sum(load.ok for load in long) == 12
        wait_until(lambda: sim_children([holder.proc.pid])[holder.proc.pid] == 1, timeout=20,
                   what="the holder down to 1 replica once the streams ended")
        faults = [f["kind"] for g in gws for f in scaler_state(g)["pools"][0]["faults"]]
        assert "died" not in faults and "drain_timeout" not in faults, faults


def test_leader_bad_config(env):
    """Bad leader_election settings stop the gateway at start with the key (and line) named."""
    from scaler_app import scaler_yaml as process_scaler_yaml
    base = process_scaler_yaml(env.sim)
    cases = [
        ("{kind: kubernetes, lease_duration: 5s, renew_deadline: 5s}",
         "scaler.leader_election.renew_deadline (line"),
        ("{kind: file, lock_file: /nonexistent-dir/tidegate/scaler.lock}",
         "scaler.leader_election.lock_file: cannot open '/nonexistent-dir/tidegate/scaler.lock'"),
        ("{kind: kubernetes}", "scaler.leader_election.api_server: no API server"),
    ]
    for election, expected in cases:
        text = base.replace("  pools:\n", f"  leader_election: {election}\n  pools:\n", 1)
        env_before = os.environ.pop("KUBERNETES_SERVICE_HOST", None)
        try:
            Gateway(env.tidegate, model_yaml(), top=keys_yaml() + text).close()
            raise AssertionError(f"{election}: the gateway started")
        except AssertionError as e:
            assert "gateway exited" in str(e) and expected in str(e), f"{election}: {str(e)[-600:]}"
        finally:
            if env_before is not None:
                os.environ["KUBERNETES_SERVICE_HOST"] = env_before


def test_leader_k8s_manifest_config(env):
    """The gateway config in configs/k8s (3 replicas: leader_election, redis, the Kubernetes
    actuator) passes the real binary's --check-config, so the manifest cannot drift from the
    loaders (scaler.manifests checks the objects it names)."""
    lines = open(os.path.join(env.source_root, "configs", "k8s", "tidegate.yaml")).read().splitlines()
    start = lines.index("  tidegate.yaml: |") + 1
    end = lines.index("---", start)
    text = "\n".join(line[4:] for line in lines[start:end]) + "\n"
    assert "leader_election:" in text and "redis:" in text, text[:400]
    path = os.path.join(tempfile.mkdtemp(prefix="tidegate-k8s-"), "tidegate.yaml")
    with open(path, "w") as f:
        f.write(text)
    r = subprocess.run([env.tidegate, "--check-config", path], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "config ok" in r.stdout, r.stdout + r.stderr
