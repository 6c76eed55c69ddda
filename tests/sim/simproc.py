"""Starts a real tidegate-sim on a free port and stops it; shared by the sim tests and benches."""
import os
import select
import subprocess
import time


def _die_with_parent():
    """Children get SIGKILL when the test process exits, even after a failed assertion,
    so no simulator or gateway outlives its test (and holds ctest's output pipe)."""
    import ctypes
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL


class Sim:
    def __init__(self, binary, *flags, expect_exit=0):
        self.expect_exit = expect_exit
        self.proc = subprocess.Popen([binary, "--port", "0", *map(str, flags)], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, preexec_fn=_die_with_parent)
        ready, _, _ = select.select([self.proc.stdout], [], [], 10)
        if not ready:
            self.stop()
            raise RuntimeError("tidegate-sim printed nothing in 10 s")
        line = self.proc.stdout.readline().strip()
        if not line.startswith("listening on "):
            self.stop()
            raise RuntimeError(f"unexpected first line {line!r}: {self.proc.stderr.read()}")
        self.addr = line.split()[-1]
        self.url = f"http://{self.addr}"
        self.port = int(self.addr.rsplit(":", 1)[1])

    def stop(self):
        """Stops the server (SIGTERM) and returns its exit status."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        rc = self.stop()
        # A clean shutdown is part of the contract (and where sanitizers report leaks).
        if exc_type is None and rc != self.expect_exit:
            raise AssertionError(f"tidegate-sim exited {rc}, expected {self.expect_exit}: {self.proc.stderr.read()[-3000:]}")
