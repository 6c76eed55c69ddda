"""ctest entry point of the gateway suite (tests/e2e_runner.py)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import e2e_runner  # noqa: E402
import test_faults  # noqa: E402
import test_features  # noqa: E402
import test_hardening  # noqa: E402
import test_routing  # noqa: E402

if __name__ == "__main__":
    sys.exit(e2e_runner.run((test_faults, test_features, test_hardening, test_routing)))
