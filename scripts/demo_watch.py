#!/usr/bin/env python3
"""Prints the scaler's view while the demo runs: replica counts by state and, whenever the
decision changes, the decision with its reason and per-signal desired counts (GET /admin/scaler)."""
import argparse
import time

import httpx


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default="http://127.0.0.1:8080")
    ap.add_argument("--admin-key", default="admin-demo")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--until-min", action="store_true", help="stop early once back to min_replicas, nothing draining")
    args = ap.parse_args()
    end = time.monotonic() + min(args.seconds, 900)
    last_counts, last_reason, start = None, None, time.monotonic()
    with httpx.Client(base_url=args.base, timeout=5, headers={"Authorization": f"Bearer {args.admin_key}"}) as c:
        while time.monotonic() < end:
            try:
                pools = c.get("/admin/scaler").json()["pools"]
            except (httpx.HTTPError, ValueError, KeyError) as e:
                print(f"[watch] /admin/scaler unavailable: {e}", flush=True)
                time.sleep(1)
                continue
            for p in pools:
                counts = p["counts"]
                d = (p.get("decisions") or [{}])[0]
                stamp = f"[watch +{time.monotonic() - start:5.1f}s] {p['model']}"
                if counts != last_counts:
                    print(f"{stamp} replicas active={counts['active']} warm={counts['warm']} "
                          f"starting={counts['starting']} draining={counts['draining']}", flush=True)
                    last_counts = counts
                if d and (d.get("desired"), d.get("reason_code")) != last_reason:
                    sigs = ", ".join(f"{s.get('signal')}={s.get('stable_value')}->{s.get('stable_desired')}"
                                     for s in d.get("signals", []))
                    print(f"{stamp} decision desired={d['desired']} ({d['direction']}): {d['reason']} [{sigs}]",
                          flush=True)
                    last_reason = (d.get("desired"), d.get("reason_code"))
                if (args.until_min and counts["active"] <= p["limits"]["min_replicas"] and counts["draining"] == 0
                        and time.monotonic() - start > 5):
                    print(f"{stamp} back to min_replicas={p['limits']['min_replicas']}", flush=True)
                    return
            time.sleep(1)


if __name__ == "__main__":
    main()
