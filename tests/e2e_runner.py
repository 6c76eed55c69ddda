"""The one ctest entry point of the Python end-to-end suites (tests/gateway, tests/app,
tests/app_scaler): parses the flags tidegate_e2e_tests() passes and runs test_NAME(env) from
the suite's modules. A test returning "skip" exits 77, which ctest reports as skipped."""
import argparse
import sys
import traceback


def run(modules):
    ap = argparse.ArgumentParser()
    ap.add_argument("--tidegate", required=True)
    ap.add_argument("--sim", required=True)
    ap.add_argument("--promtool", default="promtool")
    ap.add_argument("--source-root", required=True)
    ap.add_argument("--out", default="")
    ap.add_argument("name")
    env = ap.parse_args()
    fn = next((getattr(m, "test_" + env.name) for m in modules if hasattr(m, "test_" + env.name)), None)
    if fn is None:
        print(f"no test named {env.name}", file=sys.stderr)
        return 2
    try:
        result = fn(env)
    except Exception:
        traceback.print_exc()
        return 1
    if result == "skip":
        return 77
    print(f"PASS {env.name}")
    return 0
