"""A real redis-server for the multi-gateway tests: on a free 127.0.0.1 port, append-only with
fsync on every write (so SIGKILL loses nothing acknowledged), restartable on the same port and
data directory. Talks RESP over a plain socket (no client library needed)."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from harness import _die_with_parent, free_port


def binary():
    return shutil.which("redis-server") or next(
        (p for p in ("/usr/bin/redis-server", "/usr/sbin/redis-server") if os.access(p, os.X_OK)), None)


class RedisServer:
    def __init__(self):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="tidegate-redis-")
        self.proc = None

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def start(self):
        self.proc = subprocess.Popen(
            [binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--dir", self.dir,
             "--appendonly", "yes", "--appendfsync", "always", "--daemonize", "no", "--loglevel", "warning",
             # Streams in nodes of 16 entries (default 100): MAXLEN ~ trims whole nodes, so a test
             # trims a stream with tens of events rather than hundreds.
             "--stream-node-max-entries", "16"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        end = time.monotonic() + 10
        while time.monotonic() < end:
            try:
                if self.call("PING") == "PONG":
                    return self
            except (OSError, AssertionError):  # not listening yet, or -LOADING its append-only file
                pass
            time.sleep(0.02)
        raise AssertionError("redis-server did not answer PING")

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def close(self):
        if self.proc and self.proc.poll() is None:
            self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def call(self, *args):
        """One command; returns a str, an int or None (arrays are not needed here)."""
        out = b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a.encode()), a.encode()) for a in args)
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
            s.sendall(out)
            f = s.makefile("rb")
            line = f.readline().rstrip(b"\r\n")
            kind, rest = line[:1], line[1:].decode()
            if kind == b"+":
                return rest
            if kind == b":":
                return int(rest)
            if kind == b"$":
                n = int(rest)
                return None if n < 0 else f.read(n + 2)[:-2].decode()
            raise AssertionError(f"redis said {line!r}")
