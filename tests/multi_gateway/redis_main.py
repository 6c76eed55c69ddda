"""ctest entry point of the multi-gateway shared-state tests (tests/e2e_runner.py)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import e2e_runner  # noqa: E402
import test_redis_routing  # noqa: E402
import test_redis_state  # noqa: E402

if __name__ == "__main__":
    sys.exit(e2e_runner.run((test_redis_state, test_redis_routing)))
