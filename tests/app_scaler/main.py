"""ctest entry point; the runner of tests/app (same flags, same skip code) with this module."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "app"))
import run as app_run  # noqa: E402
import test_scaler  # noqa: E402

if __name__ == "__main__":
    app_run.MODULES = (test_scaler,)
    sys.exit(app_run.main())
