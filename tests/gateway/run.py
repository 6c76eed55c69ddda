"""ctest entry point: run.py --tidegate BIN --sim BIN --promtool BIN --source-root DIR TEST_NAME"""
import argparse
import sys
import traceback

import test_faults
import test_features


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tidegate", required=True)
    ap.add_argument("--sim", required=True)
    ap.add_argument("--promtool", default="promtool")
    ap.add_argument("--source-root", required=True)
    ap.add_argument("name")
    env = ap.parse_args()
    fn = getattr(test_faults, "test_" + env.name, None) or getattr(test_features, "test_" + env.name, None)
    if fn is None:
        print(f"no test named {env.name}", file=sys.stderr)
        return 2
    try:
        fn(env)
    except Exception:
        traceback.print_exc()
        return 1
    print(f"PASS {env.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
