"""ctest entry point of the Kubernetes manifests' runnable parts (tests/e2e_runner.py)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import e2e_runner  # noqa: E402
import test_engine_drain  # noqa: E402

if __name__ == "__main__":
    sys.exit(e2e_runner.run((test_engine_drain,)))
