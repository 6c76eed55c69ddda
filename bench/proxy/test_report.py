#!/usr/bin/env python3
"""Tests of the proxy bench's report: summarise.py (wrk lines and CPU samples -> JSON) and
record.py (JSON -> bench/RESULTS.md). Synthetic runs, so every expected figure is known."""
import json
import pathlib
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import record  # noqa: E402
import summarise  # noqa: E402

META = {"bench": "proxy", "date": "2026-12-01T00:00:00Z", "commit": "abc1234",
        "machine": {"nproc": 2, "cpu": "test", "load_avg_at_end": "0 0 0"}, "duration_s": 4,
        "connections": 64, "wrk_threads": 2, "rounds": "2 rounds", "load": "test load",
        "simulator": "test sim", "skipped": []}


def wrk_line(requests, rps, p50=100, p99=200):
    r = {"requests": requests, "seconds": requests / rps, "rps": rps, "p50_us": p50, "p90_us": p50,
         "p99_us": p99, "max_us": p99, "mean_us": p50,
         "errors": {"connect": 0, "read": 0, "write": 0, "status": 0, "timeout": 0}}
    return "Running 2s test\nWRKJSON " + json.dumps(r) + "\n"


class Run:
    """A run directory in the layout run.sh writes."""

    def __init__(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = pathlib.Path(self._tmp.name)
        (self.dir / "meta.json").write_text(json.dumps(META))

    def slice(self, target, point, rnd, requests, rps, proxy_ns, sim_ns, busy_ticks, p50=100, p99=200):
        f = self.dir / f"{target}.{point}.r{rnd}.txt"
        f.write_text(wrk_line(requests, rps, p50, p99))
        pathlib.Path(str(f) + ".cpu").write_text(json.dumps(
            {"proxy_ns": proxy_ns, "sim_ns": sim_ns, "busy_ticks": busy_ticks, "ticks_per_s": 100}))

    def close(self):
        self._tmp.cleanup()


class SummariseTest(unittest.TestCase):
    def setUp(self):
        self.run = Run()
        r = self.run
        # 100k requests a slice: 1 ns of CPU per request is 1e5 ns, one tick is 0.1 us a request.
        for rnd, speed in ((1, 1.0), (2, 1.25), (3, 1.1)):  # the host runs slower in rounds 2 and 3
            r.slice("direct", "c64", rnd, 100_000, 80_000, 0, int(14e8 * speed), int(240 * speed))
            r.slice("direct", "c1", rnd, 20_000, 10_000, 0, int(4e8 * speed), int(100 * speed), p50=60, p99=90)
            r.slice("tidegate", "c64", rnd, 100_000, 45_000 / speed, int(16e8 * speed), int(14e8 * speed),
                    int(400 * speed))
            r.slice("nginx", "c64", rnd, 100_000, 44_000 / speed, int(17e8 * speed), int(14e8 * speed),
                    int(410 * speed))
            r.slice("tidegate", "c1", rnd, 20_000, 8_000, int(9e8), int(4e8), 150, p50=100, p99=150)
            r.slice("nginx", "c1", rnd, 20_000, 8_000, int(9e8), int(4e8), 150, p50=105, p99=160)
            r.slice("tidegate", "s64", rnd, 100_000, 37_000, int(24e8), int(18e8), 540)
            r.slice("nginx", "s64", rnd, 100_000, 33_000, int(28e8), int(19e8), 610)
        self.report = summarise.summarise(r.dir)

    def tearDown(self):
        self.run.close()

    def test_cpu_per_request_is_the_median_slice_in_microseconds(self):
        cpu = self.report["targets"]["tidegate"]["c64"]["cpu_us_per_request"]
        self.assertAlmostEqual(cpu["proxy"], 16.0 * 1.1, places=2)   # median of 16, 20, 17.6
        self.assertAlmostEqual(cpu["sim"], 14.0 * 1.1, places=2)
        self.assertAlmostEqual(cpu["machine"], 40.0 * 1.1, places=1)  # 440 ticks of 10 ms / 100k
        self.assertNotIn("proxy", self.report["targets"]["direct"]["c64"]["cpu_us_per_request"])

    def test_ratios_are_taken_round_by_round(self):
        q = self.report["tidegate_vs_nginx_cpu_per_request"]
        self.assertEqual(q["proxy"]["by_round"], [round(16 / 17, 3)] * 3)
        self.assertAlmostEqual(q["proxy_over_sim"]["median"], 16 / 17, places=3)
        self.assertAlmostEqual(q["machine"]["median"], 400 / 410, places=2)
        s = self.report["tidegate_vs_nginx_stream_cpu_per_request"]
        self.assertAlmostEqual(s["proxy"]["median"], 24 / 28, places=3)
        self.assertAlmostEqual(s["proxy_over_sim"]["median"], (24 / 18) / (28 / 19), places=3)
        self.assertEqual(self.report["tidegate_vs_nginx_throughput_by_round"], [round(45 / 44, 3)] * 3)

    def test_added_latency_is_against_the_simulator_alone(self):
        self.assertEqual(self.report["added_latency_at_concurrency_1"]["tidegate"], {"p50_us": 40, "p99_us": 60})
        self.assertEqual(self.report["added_latency_at_concurrency_1"]["nginx"], {"p50_us": 45, "p99_us": 70})

    def test_a_run_without_cpu_samples_still_reports_throughput(self):
        for f in self.run.dir.glob("*.cpu"):
            f.unlink()
        report = summarise.summarise(self.run.dir)
        self.assertNotIn("tidegate_vs_nginx_cpu_per_request", report)
        self.assertNotIn("cpu_us_per_request", report["targets"]["tidegate"]["c64"])
        self.assertAlmostEqual(report["tidegate_vs_nginx_throughput"], 1.023, places=3)


class RecordTest(unittest.TestCase):
    def test_the_new_report_goes_first_and_earlier_analyses_are_kept(self):
        run = Run()
        try:
            run.slice("direct", "c64", 1, 100_000, 80_000, 0, int(14e8), 240)
            run.slice("tidegate", "c64", 1, 100_000, 45_000, int(16e8), int(14e8), 400)
            run.slice("nginx", "c64", 1, 100_000, 44_000, int(17e8), int(14e8), 410)
            report = summarise.summarise(run.dir)
        finally:
            run.close()
        before = ("# Benchmark results\n\n" + record.SECTION + "\n\n### An earlier analysis\n\nkept text\n\n"
                  "## Another bench\n\nother text\n")
        sub = record.render(report, "a note", pathlib.Path("/nonexistent/report.json"))
        after = record.insert(before, sub)
        self.assertLess(after.index("commit abc1234"), after.index("### An earlier analysis"))
        self.assertIn("kept text", after)
        self.assertLess(after.index("kept text"), after.index("## Another bench"))
        self.assertIn("| tidegate | 16.0 / 14.0 / 40.0 |", after)
        self.assertIn("a note", after)
        self.assertIn('"commit": "abc1234"', after)  # a report outside the repository is embedded
        self.assertEqual(record.insert("# Benchmark results\n", sub).count(record.SECTION), 1)


if __name__ == "__main__":
    unittest.main()
