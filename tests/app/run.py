"""ctest entry point: run.py --tidegate BIN --sim BIN [--promtool BIN] --source-root DIR --out DIR TEST_NAME"""
import argparse
import sys
import traceback

import test_admin
import test_cache
import test_cost

MODULES = (test_cache, test_admin, test_cost)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tidegate", required=True)
    ap.add_argument("--sim", required=True)
    ap.add_argument("--promtool", default="promtool")
    ap.add_argument("--source-root", required=True)
    ap.add_argument("--out", default="")
    ap.add_argument("name")
    env = ap.parse_args()
    fn = next((getattr(m, "test_" + env.name) for m in MODULES if hasattr(m, "test_" + env.name)), None)
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


if __name__ == "__main__":
    sys.exit(main())
