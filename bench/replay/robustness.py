#!/usr/bin/env python3
"""Robustness suite of the autoscaling policy (issue 16).

Every row is one `tidegate-replay --baselines --tune --json` run: a shared trace (or a burstier
variant made from it, replay/include/tidegate/replay/variants.h), at a load factor and a cold
start. Each row reports every policy's TTFT attainment and GPU-hours against the cheapest
static fleet meeting the SLO and against the offline optimum; the tuned policy is tuned on the
first two thirds of the row's trace and reported on the last third, which it never saw.

  bench/replay/robustness.py [--bin build/bin/tidegate-replay] [--jobs 2] [--rows dev|all|heldout|fresh..fresh9|shapes|shapes2|long..long22]
                             [--out bench/replay/robustness] [--no-tune] [--render] [--prefix-aware]
                             [--trace NAME=PATH ... [--trace-config NAME=FILE] [--trace-args NAME=FLAGS]]

Rows: traces x variants x (load factor 0.5/1/2/4 at a 60 s cold start, and cold starts
30/120/180 s at load 1). `dev` rows (original, onoff, spikes) are the ones the policy was
developed on; `heldout` rows (mmpp, wave, and every row's seed 2) were only run at the end.
Writes OUT/rows.jsonl, OUT/table.md and OUT/ratios.svg. The configs route every request to the
replica with the fewest in flight; `--prefix-aware` routes the trace that carries prefix block
ids (mooncake) by prefix instead, as the gateway does by default, for every policy and baseline.
The azure trace has no block ids, and prefix-aware routing without them is only another load
balancer (least loaded of two), so it keeps the configs' routing.

`--trace NAME=PATH` runs the same rows on traces of your own instead (Azure CSV, BurstGPT CSV or
Mooncake JSONL; `--trace-args NAME='--window-s 0:3600'` slices a long one): the check of the
default policy on traffic it was not developed on.
"""
import argparse
import concurrent.futures as cf
import json
import os
import shlex
import statistics
import subprocess
import sys
from typing import NamedTuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DATA = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "traces"))

# Each trace: its file, its replica config, whether its rows carry prefix block ids (only those
# are routed by prefix under --prefix-aware) and extra tidegate-replay flags (--trace-args).
TRACES = {
    "azure": {"path": os.path.join(DATA, "azure_conv_2023.csv"), "config": "configs/replay-azure.yaml",
              "prefix": False, "args": []},
    "mooncake": {"path": os.path.join(DATA, "mooncake_synthetic.jsonl"),
                 "config": "configs/replay-mooncake-h100.yaml", "prefix": True, "args": []},
}
DEV_VARIANTS = ["none", "onoff", "spikes"]
HELDOUT_VARIANTS = ["mmpp", "wave"]
SETTINGS = [(lf, 60) for lf in (0.5, 1, 2, 4)] + [(1, cs) for cs in (30, 120, 180)]
TUNE_GRID = ["--tune-headroom", "0.8,1,1.2", "--tune-burst-memory", "1800,3600", "--tune-noise-z", "2,3",
             "--tune-scale-down", "0"]


# `fresh`: rows no development run looked at (new variant seeds, load factors and a cold start
# none of the rows above use), to check the default policy on traffic it has not seen.
FRESH_VARIANTS = ["none", "onoff", "spikes", "mmpp", "wave"]
FRESH_SETTINGS = [(1.5, 60), (3, 60), (1, 90)]
FRESH_SEEDS = (3, 4)
# `fresh2`: a second such set, run once with the policy as at commit f214c65: seeds 5 and 6,
# load factors 0.7, 2.5 and 6, cold starts 45 and 150 s.
FRESH2_SETTINGS = [(0.7, 45), (2.5, 150), (6, 60)]
FRESH2_SEEDS = (5, 6)
# `fresh3`: a third, run once with the policy as at commit c96d0ff (2026-12-05): seeds 9 and 10
# (the tier rows used 5-8), load factors 0.8, 1.8 and 3.5, cold starts 75, 40 and 100 s.
FRESH3_SETTINGS = [(0.8, 75), (1.8, 40), (3.5, 100)]
FRESH3_SEEDS = (9, 10)
# `fresh4`: a fourth, to judge the change that fresh3 led to (a fleet measured short in a burst is
# kept), run once after deciding: seeds 11 and 12, loads 0.6, 0.9 and 2.2, cold starts 50, 135, 70 s.
FRESH4_SETTINGS = [(0.6, 50), (0.9, 135), (2.2, 70)]
FRESH4_SEEDS = (11, 12)
# `fresh5`: a fifth, defined (2026-12-06, at commit aeeea56) before any run of it, to judge this
# session's change: seeds 13 and 14, loads 0.75, 1.3 and 5, cold starts 55, 110 and 160 s. The
# criterion, set now: no row meeting the SLO with the policy of aeeea56 loses it, the rows above
# the static fleet's GPU-hours do not grow in number, and the worst ratio to static does not rise.
FRESH5_SETTINGS = [(0.75, 55), (1.3, 110), (5, 160)]
FRESH5_SEEDS = (13, 14)
# `fresh5` found an SLO miss (azure onoff seed 13, load 0.75: 95.25%) in both policies, which led
# to a second change (what binds now is remembered through the burst memory). `fresh6`, defined
# before any run of it, judges that: seeds 15 and 16, loads 0.65, 1.6 and 2.8, cold starts 65, 85
# and 120 s. Criterion, set now: against the policy of e7ab118, no row meeting the SLO loses it,
# the rows above the static fleet's GPU-hours grow by at most 2 in number, and every SLO miss of
# e7ab118 that the change does not mend is explained.
FRESH6_SETTINGS = [(0.65, 65), (1.6, 85), (2.8, 120)]
FRESH6_SEEDS = (15, 16)
# `shapes`: variants whose shape no row above has (every earlier set uses the defaults of
# variants.h): short frequent bursts, long rare ones, sharp spikes, a faster and wider MMPP, a
# fast deep wave. Defined 2026-12-06 (at commit 5655170) before any run of it, as a check of the
# default policy out of sample, nothing tuned on it: report SLO met among the feasible rows, the
# rows above the static fleet's GPU-hours and the worst ratio; an SLO miss it finds is analysed,
# and a change that follows is judged on another set defined before its run.
SHAPES_VARIANTS = [("onoff", "on_min=20,on_max=45,gap_min=120,gap_max=300"),
                   ("onoff", "on_min=180,on_max=300,gap_min=900,gap_max=1500,background=0.15"),
                   ("spikes", "every=300,spike_s=30,mult=8"),
                   ("mmpp", "high=60,low=300,ratio=10"),
                   ("wave", "period=600,amplitude=0.8")]
SHAPES_SETTINGS = [(0.6, 30), (1, 60), (2, 120)]
SHAPES_SEEDS = (21,)
# `shapes2`: more shapes no row used, defined 2026-12-06 before any run of it, to judge a change
# that `shapes` led to (a slot's hold counts decode slowed by the prefill each replica carries;
# it passed with no row changed and was not kept: bench/RESULTS.md, "Shapes no row had").
# Criterion, set now, against the policy of 85ad098: no row meeting the SLO loses it, and the rows
# above the static fleet's GPU-hours grow by at most 2 in number.
SHAPES2_VARIANTS = [("onoff", "on_min=10,on_max=30,gap_min=60,gap_max=180"),
                    ("onoff", "on_min=30,on_max=60,gap_min=200,gap_max=400,background=0.1"),
                    ("spikes", "every=450,spike_s=45,mult=6"),
                    ("mmpp", "high=90,low=600,ratio=8"),
                    ("wave", "period=900,amplitude=0.7")]
SHAPES2_SETTINGS = [(0.8, 45), (1.5, 90), (3, 30)]
SHAPES2_SEEDS = (23,)
# `long`: the trace played six times end to end (`--repeat 6`), so a row runs five hours past
# the policy's hour of burst memory and SLO window: every row above is one trace long, and the
# starting fleet (the static fleet) is held through all of it under bursty demand, so those rows
# never show what the policy holds once that hold has expired. Defined 2026-12-06 after a look at
# one such replay (azure onoff seed 1: 88-91 % TTFT attainment), to measure it on every variant.
LONG_SETTINGS = [(1, 60), (2, 120)]
LONG_SEEDS = (1,)
LONG_REPEAT = 6
# `long2`: defined 2026-12-06 before any run of it, to judge a change that `long` leads to (the
# first candidate: a burst memory of two hours by default; `burst_memory: 2h` met the SLO on the
# two worst `long` rows). Variant seed 2, loads 1.5 and 3 at 90 and 45 s cold starts, the trace
# played 4 times. Criterion, set now, against the policy of HEAD (c86ecc7): on `long2` no row
# meeting the SLO loses it and the misses fall in number; on the one-trace sets (all, fresh to
# fresh6, shapes, shapes2) no row meeting the SLO loses it, the rows at or below the static
# fleet's GPU-hours fall by at most 2 in number and the worst ratio to static does not rise.
LONG2_SETTINGS = [(1.5, 90), (3, 45)]
LONG2_SEEDS = (2,)
LONG2_REPEAT = 4
# `long3`: defined 2026-12-06 (at commit 79e5e02) before any run of it, to judge a change that
# the `long` and `long2` wave rows lead to (their misses follow a rise the smooth-demand rule
# took for noise). Variant seed 31, loads 1.2 and 2.5 at 75 and 150 s cold starts, the trace
# played 4 times. Criterion, set now, against the policy of 79e5e02: on `long3` no row meeting
# the SLO loses it and the misses do not grow in number; on the one-trace sets (all, fresh to
# fresh6, shapes, shapes2) no row meeting the SLO loses it, the rows at or below the static
# fleet's GPU-hours fall by at most 2 in number and the worst ratio to static rises by at most 0.01.
LONG3_SETTINGS = [(1.2, 75), (2.5, 150)]
LONG3_SEEDS = (31,)
LONG3_REPEAT = 4
# `long4`: defined 2026-12-06 (at commit d5bdbbd) before any run of it, to judge a change that
# the `long` mooncake wave row leads to (a climb through prompt sizes, whose spread hides one
# cold start's rise in noise: the climb is tested over 1, 2 and 4 cold starts). Variant seed 41,
# loads 0.8 and 2 at 100 and 50 s cold starts, the trace played 4 times. Criterion, set now,
# against the policy of d5bdbbd: on `long4` no row meeting the SLO loses it and the misses do not
# grow in number; on the one-trace sets no row meeting the SLO loses it, the rows at or below the
# static fleet's GPU-hours fall by at most 2 in number and the worst ratio to static rises by at
# most 0.01.
LONG4_SETTINGS = [(0.8, 100), (2, 50)]
LONG4_SEEDS = (41,)
LONG4_REPEAT = 4
# `long5`: defined 2026-12-06 (at commit 8817637) before any run of it, to judge a change that
# `long4`'s azure wave row at load 2 leads to (the slots fill faster than the load climbs: a
# replica carrying more prefill steps more slowly, so each request holds its slot longer; the
# plan's margin and the climb's hold count the slots a load will fill with the hold scaled by
# the step rate). Variant seed 51, loads 1.8 and 0.6 at 40 and 120 s cold starts, the trace
# played 4 times. Criterion, set now, against the policy of 8817637: on `long5` no row meeting
# the SLO loses it, the misses do not grow in number and the mean ratio to static rises by at
# most 0.02; on the one-trace sets no row meeting the SLO loses it, the rows at or below the
# static fleet's GPU-hours fall by at most 2 in number and the worst ratio to static rises by at
# most 0.01.
LONG5_SETTINGS = [(1.8, 40), (0.6, 120)]
LONG5_SEEDS = (51,)
LONG5_REPEAT = 4
# Judged 2026-12-06 (its one-trace part not run once long5 had failed):
# long5 17 -> 18 of 20 met, mean ratio 0.999 -> 1.007, but the azure wave row at load 1.8 lost
# the SLO (99.22 -> 98.90%): the smooth-demand rule cut the slots the margin counted. Not kept as
# judged; long5 is now tuning data for the next step.
# `long6`: defined 2026-12-06 (at commit f174f22) before any run of it, to judge that change
# with the smooth-demand rule keeping the slots the swing margin counts (found on long5's lost
# wave row). Variant seed 61, loads 1.4 and 2.6 at 70 and 110 s cold starts, the trace played 4
# times. Criterion, set now, against the policy of 8817637: on `long6` no row meeting the SLO
# loses it, the misses do not grow in number and the mean ratio to static rises by at most 0.02;
# on the one-trace sets no row meeting the SLO loses it, the rows at or below the static fleet's
# GPU-hours fall by at most 2 in number and the worst ratio to static rises by at most 0.01.
LONG6_SETTINGS = [(1.4, 70), (2.6, 110)]
LONG6_SEEDS = (61,)
LONG6_REPEAT = 4
# Judged 2026-12-06: long6 20 -> 20 of 20 met, mean ratio 1.003 -> 1.012; but on `all` the worst
# ratio to static rose 1.043 -> 1.194 (azure onoff at load 1: the hold measured in the gap after a
# burst is the burst's slow slots, then scaled again as if measured at the gap's step rate). Not
# kept as judged; `all`'s onoff rows are now tuning data too.
# `long7` and `fresh7`: defined 2026-12-06 (at commit 8bb960d) before any run of them, to judge
# that change with the hold's step rate counted tick by tick over the window (slot-steps over
# slot-seconds) and a prefill step taking one request's prefill (up to the budget), both found on
# `all`'s azure onoff rows. long7: variant seed 71, loads 1.1 and 2.4 at 55 and 130 s cold starts,
# the trace played 4 times. fresh7: seeds 17 and 18, loads 0.85, 1.7 and 3.2 at 50, 95 and 140 s.
# Criterion, set now, against the policy of 8817637: on `long7` and `fresh7` no row meeting the
# SLO loses it, the misses do not grow in number and the mean ratio to static rises by at most
# 0.02; on the other one-trace sets no row meeting the SLO loses it, the rows at or below the
# static fleet's GPU-hours fall by at most 2 in number and the worst ratio to static rises by at
# most 0.01 on each set.
LONG7_SETTINGS = [(1.1, 55), (2.4, 130)]
LONG7_SEEDS = (71,)
LONG7_REPEAT = 4
FRESH7_SETTINGS = [(0.85, 50), (1.7, 95), (3.2, 140)]
FRESH7_SEEDS = (17, 18)
# Judged 2026-12-06: long7 19 -> 19 of 20 met (its miss, azure onoff at load 1.1, 94.55 ->
# 96.30%), mean ratio 0.991 -> 0.992; fresh7 54 -> 54, 1.006 -> 1.007. But the worst ratio to
# static rose on `all` (1.043 -> 1.086) and on `fresh4` (1.040 -> 1.078): bursty azure rows the
# starting fleet's hold already met, 1-8% dearer for no attainment. Not kept: the policy is that
# of 8817637 again. Rows: bench/replay/slots/.
# `long8` and `fresh8`: defined 2026-12-06 (at commit f810fd0, before any run of them) to judge
# a fourth try at the slots a climb fills: the step-rate-scaled slot count kept only for a climb
# under smooth demand (the load it reaches a cold start and half a demand window on), not for the
# burst memory's swings, whose slots were what raised the bursty rows' cost in step 3. Tuned on
# seen sets only (long4, long5, all, fresh4). long8: variant seed 81, loads 1.3 and 2.2 at 85 and
# 60 s cold starts, the trace played 4 times. fresh8: seeds 19 and 20, loads 0.7, 1.4 and 2.8 at
# 75, 35 and 165 s. Criterion, set now, against the policy of 8817637 (f810fd0's): on `long8` and
# `fresh8` no row meeting the SLO loses it, the misses do not grow in number and the mean ratio
# to static rises by at most 0.02; on the other one-trace sets no row meeting the SLO loses it,
# the rows at or below the static fleet's GPU-hours fall by at most 2 in number and the worst
# ratio to static rises by at most 0.01 on each set.
# Amended (same session, still before any run of long8 or fresh8): counting the slots for climbs
# alone lost long5's azure wave row at load 1.8, as step 1 had (the smooth-demand rule refused a
# swing's replica while the slots filled), and a climb term on top raised fresh4's worst ratio to
# static by 0.013 (a wave row's first minutes). So the try counts the swing margin's slots under
# smooth demand (a climb is such a swing), kept by the smooth-demand rule, and nothing in slots
# under bursty demand: steps 1-3 with the slots gated on demand that is not bursty. Tuned on
# long4, long5, all and fresh4. The criterion is unchanged.
LONG8_SETTINGS = [(1.3, 85), (2.2, 60)]
LONG8_SEEDS = (81,)
LONG8_REPEAT = 4
FRESH8_SETTINGS = [(0.7, 75), (1.4, 35), (2.8, 165)]
FRESH8_SEEDS = (19, 20)
# Judged 2026-12-06: long8 19 -> 19 of 20 met (its miss, mooncake wave at 2.2, unmoved), mean
# ratio 1.0002 -> 1.0036; fresh8 54 -> 54, unchanged. But on `fresh5` the worst ratio to static
# rose 1.033 -> 1.058 (azure none at load 5, 160 s cold start: a swing to the hour's one peak,
# just short of the bursty test, counted in slots held a tenth replica the static nine did
# without). Not kept: the policy is that of 8817637 again. Rows: bench/replay/slots/.
# `long9` and `long10`: defined 2026-12-07 (at commit c7fe7a2, before any run of them) to judge a
# change that the six-hour bursty misses of `long4`, `long5` and `long7` lead to (azure onoff and
# spikes at loads 0.6-1.1: once the starting fleet's hold has expired, the fleet falls in one step
# to what the burst memory's modelled peak asks for, and the next burst meets it short). The
# change: under bursty demand, a fleet is released by at most one replica per burst it served
# within the SLO, and not below one more than a fleet measured short in a burst. Tuned on seen
# sets only (long4, long5, long7). long9: variant seed 91, loads 0.7 and 1.0 at 95 and 65 s cold
# starts; long10: variant seed 101, loads 0.9 and 1.6 at 115 and 50 s; each trace played 4 times.
# Criterion, set now, against the policy of 8817637 (c7fe7a2's): on `long9` and `long10` no row
# meeting the SLO loses it, the misses do not grow in number and the mean ratio to static rises
# by at most 0.02; on `long4`..`long8` the misses do not grow in number and no row meeting the
# SLO loses it; on the one-trace sets no row meeting the SLO loses it, the rows at or below the
# static fleet's GPU-hours fall by at most 2 in number and the worst ratio to static rises by at
# most 0.01 on each set.
LONG9_SETTINGS = [(0.7, 95), (1.0, 65)]
LONG9_SEEDS = (91,)
LONG9_REPEAT = 4
LONG10_SETTINGS = [(0.9, 115), (1.6, 50)]
LONG10_SEEDS = (101,)
LONG10_REPEAT = 4
# Judged 2026-12-07 (the first form of the change, at commit c8b5866 plus the change): the
# criterion was met on both judges (long9 19 -> 19 met, mean ratio 0.9855 -> 0.9893; long10
# 18 -> 18, 0.9859 -> 0.9882), but it mended none of their misses, and long10's azure onoff at load
# 0.9 fell from 98.08 to 94.46%: a burst a little short (p99 1.6 s) but not short beyond chance
# counted as served, and one replica fewer then met a burst larger than any it had served (p99
# 8.9 s). On the tuning sets it mended four of five misses (long4 onoff and spikes at 0.8, long5
# onoff at 0.6, long7 onoff at 1.1). Not kept in that form; long9 and long10 are now seen.
# `long11` and `long12`: defined 2026-12-07 (at the same commit, before any run of them) to judge
# the second form: a burst vouches for its fleet only when its own first tokens put the miss
# rate's upper bound within the budget, and only for bursts no larger than it (its peak, net of
# noise, is the largest the burst memory holds). Tuned on long4, long5, long7, long9 and long10.
# long11: variant seed 111, loads 0.75 and 1.3 at 80 and 140 s cold starts; long12: variant seed
# 121, loads 0.95 and 2.0 at 60 and 100 s; each trace played 4 times. Criterion, set now, the same
# as long9's: on `long11` and `long12` no row meeting the SLO loses it, the misses do not grow in
# number and the mean ratio to static rises by at most 0.02; on `long4`..`long10` the misses do
# not grow in number and no row meeting the SLO loses it; on the one-trace sets no row meeting the
# SLO loses it, the rows at or below the static fleet's GPU-hours fall by at most 2 in number and
# the worst ratio to static rises by at most 0.01 on each set.
LONG11_SETTINGS = [(0.75, 80), (1.3, 140)]
LONG11_SEEDS = (111,)
LONG11_REPEAT = 4
LONG12_SETTINGS = [(0.95, 60), (2.0, 100)]
LONG12_SEEDS = (121,)
LONG12_REPEAT = 4
# Judged 2026-12-07 (0385f8a against 8817637's policy): met. long11 20 -> 20 of 20, mean ratio
# 0.9991 -> 1.0037; long12 18 -> 19 (azure onoff at 0.95: 97.47 -> 99.20%), 0.9922 -> 0.9930;
# long4..long10 no row lost (misses 11 -> 7); the one-trace sets unchanged. Kept. Rows:
# bench/replay/bursts/.
# `long13` and `long14`: defined 2026-12-07 (at commit a8962c0, before any run of them) to judge a
# change that long10's azure spikes at 0.9 (97.01%) leads to: a burst measured short beyond chance
# keeps its fleet while bursts go on, as a served burst's record is kept, instead of for the burst
# memory after it was measured (the memory of its load then forgot it, smaller bursts vouched for
# steps below its fleet, and the next large burst met 7 where 9 had been short). Tuned on long9
# and long10. long13: variant seed 131, loads 0.85 and 1.2 at 105 and 55 s cold starts; long14:
# variant seed 141, loads 0.65 and 1.45 at 125 and 85 s; each trace played 4 times. Criterion, set
# now, the same as long11's, against the policy of a8962c0 (0385f8a's): on `long13` and `long14` no
# row meeting the SLO loses it, the misses do not grow in number and the mean ratio to static
# rises by at most 0.02; on `long4`..`long12` the misses do not grow in number and no row meeting
# the SLO loses it; on the one-trace sets no row meeting the SLO loses it, the rows at or below the
# static fleet's GPU-hours fall by at most 2 in number and the worst ratio to static rises by at
# most 0.01 on each set.
LONG13_SETTINGS = [(0.85, 105), (1.2, 55)]
LONG13_SEEDS = (131,)
LONG13_REPEAT = 4
LONG14_SETTINGS = [(0.65, 125), (1.45, 85)]
LONG14_SEEDS = (141,)
LONG14_REPEAT = 4
# Judged 2026-12-07 (the change against a8962c0's policy): met. long13 18 -> 18 of 20, mean ratio
# 0.9959 -> 0.9959; long14 18 -> 19 (azure spikes at 0.65: 98.80 -> 99.64%), 1.0134 -> 1.0135;
# long4..long12 no row lost (misses 8 -> 7); the one-trace sets unchanged. Kept. Rows:
# bench/replay/shortfall/.
# `long15`, `long16` and `fresh9`: defined 2026-12-07 (at commit 5e34b12 plus the change, before
# any run of them) to judge a change that mooncake's rows lead to (19 of 22 six-hour `none` rows and
# 20 of 22 `wave` rows over static, by 1-9%, at the same attainment as the static fleet): where the
# held fleet is measured to meet the SLO (while learning, or vouched for under smooth demand), a
# backlog binds on top of the load less its noise, not the whole load estimate, so a queue at the
# fleet's edge no longer starts replicas that arrive a cold start later and help no first token.
# Looked at on long4's mooncake none row at 2.0, then run on the mooncake rows of every seen set.
# long15: variant seed 151, loads 1.15 and 2.3 at 115 and 45 s cold starts; long16: variant seed
# 161, loads 0.7 and 1.75 at 60 and 150 s; each trace played 4 times. fresh9: seeds 25 and 26,
# loads 1.1, 2.3 and 3.6 at 45, 105 and 155 s. Criterion, set now, against the policy of 5e34b12:
# on `long15`, `long16` and `fresh9` no row meeting the SLO loses it, the misses do not grow in
# number, the rows at or below the static fleet's GPU-hours do not fall in number and the mean
# ratio to static does not rise; on every seen set (the one-trace sets and long4..long14) no row
# meeting the SLO loses it and the rows at or below static do not fall in number.
LONG15_SETTINGS = [(1.15, 115), (2.3, 45)]
LONG15_SEEDS = (151,)
LONG15_REPEAT = 4
LONG16_SETTINGS = [(0.7, 60), (1.75, 150)]
LONG16_SEEDS = (161,)
LONG16_REPEAT = 4
FRESH9_SETTINGS = [(1.1, 45), (2.3, 105), (3.6, 155)]
FRESH9_SEEDS = (25, 26)
# Judged 2026-12-07 (b72178b against 5e34b12's policy): met. long15 20 -> 20 of 20, rows at or
# below static 15 -> 18, mean ratio 0.9967 -> 0.9914; long16 20 -> 20, 14 -> 16, 0.9923 -> 0.9906;
# fresh9 54 -> 54, 35 -> 49, 1.0059 -> 1.0014; on the seen sets no row lost, two six-hour misses
# mended (long8's and long12's mooncake wave), the rows at or below static up on every set. Kept.
# Rows: bench/replay/backlog/.
# `long17` and `long18`: defined 2026-12-07 (at commit 21ce897 plus the change, before any run of
# them) to judge a change that four six-hour azure on/off misses lead to (long9 1.0/65, long10
# 0.9/115, long13 0.85/105 and 1.2/55: a step one replica below the fleet that served the largest
# burst remembered, then a burst larger than any before it): the step is taken only when the SLO
# window's unused miss budget covers what it risks, 1/(n+1) (the chance that the next of n
# remembered bursts is the largest yet) times the most first tokens a remembered burst brought.
# Looked at on those four rows, then run on every seen six-hour set. long17: variant seed 171,
# loads 0.95 and 1.6 at 85 and 130 s cold starts; long18: variant seed 181, loads 0.8 and 2.6 at 40
# and 95 s; each trace played 4 times. Criterion, set now, against the policy of 21ce897: on
# `long17` and `long18` no row meeting the SLO loses it, the misses do not grow in number and the
# mean ratio to static rises by at most 0.01 on each; their on/off, spikes and mmpp rows started
# at 1.5 times the static fleet (`rerun_policy.py --oversize 1.5`, an operator's guess too large)
# lose no row meeting the SLO and their mean ratio to static rises by at most 0.03; on the seen
# six-hour sets (long4..long16) no row meeting the SLO loses it and on the one-trace sets no row
# meeting the SLO loses it.
LONG17_SETTINGS = [(0.95, 85), (1.6, 130)]
LONG17_SEEDS = (171,)
LONG17_REPEAT = 4
LONG18_SETTINGS = [(0.8, 40), (2.6, 95)]
LONG18_SEEDS = (181,)
LONG18_REPEAT = 4
# Judged 2026-12-07 (9e6e0c7 against 21ce897's policy): met. long17 20 -> 20 of 20, mean ratio
# 0.9836 -> 0.9849; long18 20 -> 20, 0.9974 -> 0.9974; their bursty rows started at 1.5x static 24
# -> 24, 1.4757 -> 1.4958 (long17 +0.017, long18 +0.023); long4..long16 252 -> 256 (the four azure
# on/off misses mended), no row lost; the one-trace sets unchanged. Kept. Rows: bench/replay/gate/.
# `long19` and `long20`: defined 2026-12-07 (at commit 592685e, before any run of them or of the
# change) to judge a change that the smooth six-hour rows over static lead to (14 azure `none` rows
# at 1.02-1.12x, the cheapest static fleet being 2-5 replicas: the queueing model asks for one more
# at each crest while the held fleet is measured well within the budget): under smooth demand the
# model's queueing misses are calibrated by what the SLO window measured, its predicted misses at
# the fleet that ran against the upper bound of the misses that came. Looked at on long4's azure
# none row at 0.8/100, then run on every seen set. (That draft changed nothing on the row: the
# model predicted fewer misses than came, most of which no fleet avoids. It was dropped before any
# run of the change on these sets, for the change judged here: under smooth demand no replica is
# started for misses the SLO window's unused budget absorbs over a cold start, at the load
# expected. The sets and the criterion are as committed.) long19: variant seed 191, loads 0.75 and 2.1 at
# 70 and 120 s cold starts; long20: variant seed 201, loads 1.05 and 3.2 at 35 and 160 s; each
# trace played 4 times. Criterion, set now, against the policy of 592685e: on `long19` and
# `long20` no row meeting the SLO loses it, the misses do not grow in number, the rows at or below
# the static fleet's GPU-hours do not fall in number and the mean ratio to static does not rise; on
# every seen set (the one-trace sets and long4..long18) no row meeting the SLO loses it and the rows
# at or below static do not fall in number.
LONG19_SETTINGS = [(0.75, 70), (2.1, 120)]
LONG19_SEEDS = (191,)
LONG19_REPEAT = 4
LONG20_SETTINGS = [(1.05, 35), (3.2, 160)]
LONG20_SEEDS = (201,)
LONG20_REPEAT = 4
# Judged 2026-12-07 (e4ef56e against 592685e's policy): on the judges met. long19 19 -> 19 of 20
# (the miss, azure none at 2.1/120, unchanged at 98.97%), rows at or below static 12 -> 13, mean
# ratio 0.9986 -> 0.9943; long20 19 -> 19 (the miss infeasible), 16 -> 16, 0.9814 -> 0.9807. Not
# met on the seen sets: long14's mooncake wave at 0.65/125 fell from 99.07% to 98.998% (160 late
# first tokens of 15,972 where 159 were allowed). The budget was spent in a climb: a wave that
# rose on past the cold start met each later start a minute late. Not kept as it was.
# `long21` and `long22`: defined 2026-12-07 (at commit e4ef56e, before any run of them or of the
# change) to judge that change mended: the budget is not spent while the load climbs (a climb
# does not pass within a cold start as a crest does; each start delayed delays every later one).
# Looked at on long14's mooncake wave row at 0.65/125. (That form, 57c6b90, undid nearly all of the
# change: on the seen six-hour sets it moved one row, by 0.7%, as azure's crests are reached by
# climbs too. It was replaced before any run of it on these sets by the form judged here: in a
# climb the budget is paced at the highest load the climb is known to reach, what a cold start of
# it brings or the crest the history remembers if higher; a climb towards a remembered crest needs
# every later start too. The sets and the criterion are as committed.) long21: variant seed 211, loads 0.85 and
# 1.9 at 50 and 145 s cold starts; long22: variant seed 221, loads 0.7 and 2.8 at 90 and 40 s; each
# trace played 4 times. Criterion, set now, against the policy of 592685e: on `long21` and `long22`
# no row meeting the SLO loses it, the misses do not grow in number, the rows at or below the
# static fleet's GPU-hours do not fall in number and the mean ratio to static does not rise; on
# the seen six-hour sets (long4..long20) no row meeting the SLO loses it and the rows at or below
# static do not fall in number. The one-trace sets are run only if time allows (said with the
# result either way).
LONG21_SETTINGS = [(0.85, 50), (1.9, 145)]
LONG21_SEEDS = (211,)
LONG21_REPEAT = 4
LONG22_SETTINGS = [(0.7, 90), (2.8, 40)]
LONG22_SEEDS = (221,)
LONG22_REPEAT = 4
# Judged 2026-12-07 (1a41e06 against 592685e's policy): met. long21 20 -> 20 of 20, rows at or
# below static 14 -> 14, mean ratio 1.0006 -> 0.9990; long22 20 -> 20, 14 -> 15, 0.9939 -> 0.9901;
# long4..long20 no row lost, rows at or below static 258 -> 264, mean 0.9935 -> 0.9907 (the
# long14 row the first form lost: 99.067%); the one-trace sets: no row lost. Kept. Rows:
# bench/replay/pacing/.
# `long23` and `long24`: defined 2026-12-07 (at commit d1d5c41, before any run of them or of the
# change) to judge a release in the gaps of bursts that keep time (scaler quiet_gap.h): after a
# burst, the fleet held for the next is released and started again a cold start before the
# earliest the next burst is expected, a one-sided prediction bound on the gaps seen (Student's
# t), the chance that it comes earlier paid from the SLO window's unused budget. Looked at on
# the twelve onoff rows of long21, long22 and long4 (azure onoff 0.85/50 of long21: 1.000 -> 0.874x
# static at the same attainment). long23: variant seed 231, loads 0.9 and 2.2 at 65 and 110 s
# cold starts; long24: variant seed 241, loads 0.6 and 1.5 at 45 and 95 s; each trace played 4
# times. Criterion, set now, against the policy of d1d5c41: on `long23` and `long24` no row
# meeting the SLO loses it, the misses do not grow in number, the rows at or below the static
# fleet's GPU-hours do not fall in number, the mean ratio to static does not rise, and the onoff
# rows' mean ratio falls; on the seen six-hour sets (long4..long22) no row meeting the SLO loses
# it and the rows at or below static do not fall in number.
LONG23_SETTINGS = [(0.9, 65), (2.2, 110)]
LONG23_SEEDS = (231,)
LONG23_REPEAT = 4
LONG24_SETTINGS = [(0.6, 45), (1.5, 95)]
LONG24_SEEDS = (241,)
LONG24_REPEAT = 4
# Judged 2026-12-07 (5b9e96d against d1d5c41's policy): met. long23 20 -> 20 of 20, rows at or
# below static 14 -> 14, mean ratio 0.9934 -> 0.9922 (one row moved: azure onoff 0.9/65, 1.000
# -> 0.976 at the same attainment); long24 20 -> 20, 18 -> 18, 0.9901 -> 0.9890 (its two azure
# onoff rows, 1.000 -> 0.989). The seen sets were not run on that form: it was refined first.
# `long25`: defined 2026-12-07 (at commit 090b934, before any run of it) to judge that refinement:
# the bursts' clock is the intervals between their starts or the gaps after their ends, whichever
# spread less (a start is seen within seconds, an end only as the long window forgets the burst).
# Looked at on the sixteen onoff rows of long4, long21, long22 and long23. long25: variant seed 251,
# loads 0.75 and 1.8 at 55 and 125 s cold starts, each trace played 4 times. Criterion, set now,
# against the policy of d1d5c41: on `long25`, and on `long24` (run once on 5b9e96d's form, not on
# this one), no row meeting the SLO loses it, the misses do not grow in number, the rows at or
# below static do not fall in number and the mean ratio to static does not rise; on long24 the
# onoff rows' mean ratio is no higher than 5b9e96d's form had; on the seen six-hour sets
# (long4..long23) no row meeting the SLO loses it and the rows at or below static do not fall in
# number.
LONG25_SETTINGS = [(0.75, 55), (1.8, 125)]
LONG25_SEEDS = (251,)
LONG25_REPEAT = 4
# Judged 2026-12-07 (090b934 against d1d5c41's policy): failed. long25's azure mmpp at 0.75/55 lost
# the SLO (99.78% -> 98.96%): five merged bursts had come at regular-looking start-to-start
# intervals by chance, and the next came early. Reverted in f19bb63 (gaps from a burst's end, as
# 5b9e96d). That form on long25, never looked at for it: 20 -> 20 of 20, at or below static 15 -> 15,
# mean 0.9925 -> 0.9911; on long23/long24 identical to 5b9e96d's rows; on the seen six-hour sets
# (long19..long22 every row, long4..long18 the on/off rows) no row lost, at or below static
# 293 -> 297. Rows: bench/replay/quiet/.
# Row sets made as a grid: variants as (kind, shape parameters), settings, seeds, and how many
# times each row plays its trace end to end.
class RowSet(NamedTuple):
    variants: list
    settings: list
    seeds: tuple
    repeat: int = 1


_FRESH = [(v, "") for v in FRESH_VARIANTS]
GRID_SETS = {"fresh": RowSet(_FRESH, FRESH_SETTINGS, FRESH_SEEDS), "fresh2": RowSet(_FRESH, FRESH2_SETTINGS, FRESH2_SEEDS),
             "fresh3": RowSet(_FRESH, FRESH3_SETTINGS, FRESH3_SEEDS), "fresh4": RowSet(_FRESH, FRESH4_SETTINGS, FRESH4_SEEDS),
             "fresh5": RowSet(_FRESH, FRESH5_SETTINGS, FRESH5_SEEDS), "fresh6": RowSet(_FRESH, FRESH6_SETTINGS, FRESH6_SEEDS),
             "shapes": RowSet(SHAPES_VARIANTS, SHAPES_SETTINGS, SHAPES_SEEDS),
             "shapes2": RowSet(SHAPES2_VARIANTS, SHAPES2_SETTINGS, SHAPES2_SEEDS),
             "long": RowSet(_FRESH, LONG_SETTINGS, LONG_SEEDS, LONG_REPEAT),
             "long2": RowSet(_FRESH, LONG2_SETTINGS, LONG2_SEEDS, LONG2_REPEAT),
             "long3": RowSet(_FRESH, LONG3_SETTINGS, LONG3_SEEDS, LONG3_REPEAT),
             "long4": RowSet(_FRESH, LONG4_SETTINGS, LONG4_SEEDS, LONG4_REPEAT),
             "long5": RowSet(_FRESH, LONG5_SETTINGS, LONG5_SEEDS, LONG5_REPEAT),
             "long6": RowSet(_FRESH, LONG6_SETTINGS, LONG6_SEEDS, LONG6_REPEAT),
             "long7": RowSet(_FRESH, LONG7_SETTINGS, LONG7_SEEDS, LONG7_REPEAT),
             "fresh7": RowSet(_FRESH, FRESH7_SETTINGS, FRESH7_SEEDS),
             "long8": RowSet(_FRESH, LONG8_SETTINGS, LONG8_SEEDS, LONG8_REPEAT),
             "fresh8": RowSet(_FRESH, FRESH8_SETTINGS, FRESH8_SEEDS),
             "long9": RowSet(_FRESH, LONG9_SETTINGS, LONG9_SEEDS, LONG9_REPEAT),
             "long10": RowSet(_FRESH, LONG10_SETTINGS, LONG10_SEEDS, LONG10_REPEAT),
             "long11": RowSet(_FRESH, LONG11_SETTINGS, LONG11_SEEDS, LONG11_REPEAT),
             "long12": RowSet(_FRESH, LONG12_SETTINGS, LONG12_SEEDS, LONG12_REPEAT),
             "long13": RowSet(_FRESH, LONG13_SETTINGS, LONG13_SEEDS, LONG13_REPEAT),
             "long14": RowSet(_FRESH, LONG14_SETTINGS, LONG14_SEEDS, LONG14_REPEAT),
             "long15": RowSet(_FRESH, LONG15_SETTINGS, LONG15_SEEDS, LONG15_REPEAT),
             "long16": RowSet(_FRESH, LONG16_SETTINGS, LONG16_SEEDS, LONG16_REPEAT),
             "long17": RowSet(_FRESH, LONG17_SETTINGS, LONG17_SEEDS, LONG17_REPEAT),
             "long18": RowSet(_FRESH, LONG18_SETTINGS, LONG18_SEEDS, LONG18_REPEAT),
             "long19": RowSet(_FRESH, LONG19_SETTINGS, LONG19_SEEDS, LONG19_REPEAT),
             "long20": RowSet(_FRESH, LONG20_SETTINGS, LONG20_SEEDS, LONG20_REPEAT),
             "long21": RowSet(_FRESH, LONG21_SETTINGS, LONG21_SEEDS, LONG21_REPEAT),
             "long22": RowSet(_FRESH, LONG22_SETTINGS, LONG22_SEEDS, LONG22_REPEAT),
             "long23": RowSet(_FRESH, LONG23_SETTINGS, LONG23_SEEDS, LONG23_REPEAT),
             "long24": RowSet(_FRESH, LONG24_SETTINGS, LONG24_SEEDS, LONG24_REPEAT),
             "long25": RowSet(_FRESH, LONG25_SETTINGS, LONG25_SEEDS, LONG25_REPEAT),
             "fresh9": RowSet(_FRESH, FRESH9_SETTINGS, FRESH9_SEEDS)}


def variant_spec(row):
    """The --variant argument of a row: kind, then its shape parameters (if any) and seed."""
    if row["variant"] == "none":
        return "none"
    params = row["params"] + "," if row.get("params") else ""
    return f"{row['variant']}:{params}seed={row['seed']}"


def variant_label(row):
    return (row["variant"] + (f" {row['params']}" if row.get("params") else "") +
            (f" (trace x{row['repeat']})" if row.get("repeat", 1) > 1 else ""))


def rows(which):
    out = []
    if which in GRID_SETS:
        rs = GRID_SETS[which]
        for trace in TRACES:
            for v, params in rs.variants:
                for seed in ((1,) if v == "none" else rs.seeds):
                    for lf, cs in rs.settings:
                        shape = {"params": params} if params else {}
                        if rs.repeat > 1:
                            shape["repeat"] = rs.repeat
                        out.append({"trace": trace, "variant": v, **shape, "load": lf, "cold": cs, "seed": seed})
        return out
    for trace in TRACES:
        variants = {"dev": DEV_VARIANTS, "heldout": HELDOUT_VARIANTS, "all": DEV_VARIANTS + HELDOUT_VARIANTS}[which]
        for v in variants:
            for lf, cs in SETTINGS:
                out.append({"trace": trace, "variant": v, "load": lf, "cold": cs, "seed": 1})
        if which in ("heldout", "all"):
            for v in ("onoff", "spikes", "mmpp"):
                out.append({"trace": trace, "variant": v, "load": 1, "cold": 60, "seed": 2})
    return out


def run_row(binary, row, tune, prefix_aware=False, initial=None):
    """The row's replay with every baseline; with `initial` (the row's cheapest static N, known
    from an earlier run) the default policy alone, started at that fleet."""
    trace = TRACES[row["trace"]]
    cmd = [binary, "--trace", trace["path"], "--config", os.path.join(ROOT, trace["config"]), "--variant", variant_spec(row),
           "--load-factor", str(row["load"]), "--cold-start-s", str(row["cold"]), "--json",
           "--no-progress", "--threads", "1", "--replicas-max", "128"]
    cmd += ["--baselines"] if initial is None else ["--initial-replicas", str(initial)]
    cmd += trace["args"]
    if row.get("repeat", 1) > 1:
        cmd += ["--repeat", str(row["repeat"])]
    if prefix_aware and trace["prefix"]:
        cmd += ["--balancer", "prefix_aware"]
    if tune:
        cmd += ["--tune"] + TUNE_GRID
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {p.stderr[-2000:]}")
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    return {**row, "summary": summary}


def policy_rows(result):
    s = result["summary"]
    by = {b["policy"]: b for b in s["baselines"]}
    static = next(b for name, b in by.items() if name.startswith("static"))
    out = {"static": static, "optimum": by.get("optimum"), "tidegate": s,
           "hpa": by.get("hpa"), "kpa": by.get("kpa")}
    return out


def feasible(result):
    return policy_rows(result)["static"]["meets_slo"]


def fmt_ratio(v):
    return "-" if v is None else f"{v:.2f}"


def table(results):
    lines = ["| trace | variant | load | cold s | static N | optimum /static | tidegate att % | tidegate /static | "
             "tidegate /optimum | tuned held-back att % | tuned held-back /static | HPA att % | KPA att % |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        p = policy_rows(r)
        st, tg, opt = p["static"], p["tidegate"], p["optimum"]
        n = st["policy"].split("=")[1].split(")")[0] if "=" in st["policy"] else "?"
        th = r["summary"].get("tuned_held_back")
        variant = variant_label(r) + (f" (seed {r['seed']})" if r["seed"] != 1 else "")
        lines.append(
            f"| {r['trace']} | {variant} | {r['load']} | {r['cold']} | {n}{'' if st['meets_slo'] else ' (none meets)'} | "
            f"{fmt_ratio(opt['gpu_hours_vs_static'] if opt else None)} | {tg['ttft_slo_attainment']*100:.2f} | "
            f"{fmt_ratio(tg['gpu_hours_vs_static'])} | {fmt_ratio(tg['gpu_hours_vs_optimum'])} | "
            f"{th['ttft_slo_attainment']*100:.2f} | {fmt_ratio(th['gpu_hours_vs_static'])} | "
            if th else
            f"| {r['trace']} | {variant} | {r['load']} | {r['cold']} | {n}{'' if st['meets_slo'] else ' (none meets)'} | "
            f"{fmt_ratio(opt['gpu_hours_vs_static'] if opt else None)} | {tg['ttft_slo_attainment']*100:.2f} | "
            f"{fmt_ratio(tg['gpu_hours_vs_static'])} | {fmt_ratio(tg['gpu_hours_vs_optimum'])} | - | - | ")
        lines[-1] += f"{p['hpa']['ttft_slo_attainment']*100:.1f} | {p['kpa']['ttft_slo_attainment']*100:.1f} |"
    return "\n".join(lines)


def gpu_hours_in_time(t):
    """GPU-hours less the cold starts the trace ended before (`gpu_hours_unready_at_end`): a trace
    is a slice of a stream that goes on, and what a policy started in its last cold start was
    billed without a chance to serve. A second figure beside the raw one, never instead of it."""
    return t["gpu_hours"] - t.get("gpu_hours_unready_at_end", 0.0)


def verdict(results):
    ok_rows = [r for r in results if feasible(r)]
    infeasible = [r for r in results if not feasible(r)]
    met = [r for r in ok_rows if policy_rows(r)["tidegate"]["meets_slo"]]
    cheaper = [r for r in met if policy_rows(r)["tidegate"]["gpu_hours_vs_static"] <= 1.0 + 1e-9]
    vs_static = [policy_rows(r)["tidegate"]["gpu_hours_vs_static"] for r in ok_rows]
    vs_opt = [policy_rows(r)["tidegate"]["gpu_hours_vs_optimum"] for r in ok_rows
              if policy_rows(r)["tidegate"]["gpu_hours_vs_optimum"]]
    held = [r["summary"]["tuned_held_back"] for r in ok_rows if r["summary"].get("tuned_held_back")]
    lines = [f"- rows: {len(results)}, of which {len(infeasible)} infeasible (no static fleet up to the maximum meets "
             f"the SLO; reported, not scored)",
             f"- Tidegate default meets the SLO on {len(met)} of {len(ok_rows)} feasible rows, and does so at no more "
             f"GPU-hours than the cheapest static fleet on {len(cheaper)} of them",
             f"- GPU-hours vs static: median {statistics.median(vs_static):.3f}, max {max(vs_static):.3f}; "
             f"vs the offline optimum: median {statistics.median(vs_opt):.3f}" if vs_static and vs_opt else "-"]
    if held:
        held_met = sum(1 for h in held if h["meets_slo"])
        lines.append(f"- tuned setting on its held-back third: meets the SLO on {held_met} of {len(held)} rows")
    misses = [r for r in ok_rows if not policy_rows(r)["tidegate"]["meets_slo"]]
    dearer = [r for r in met if policy_rows(r)["tidegate"]["gpu_hours_vs_static"] > 1.0 + 1e-9]
    # The JSON rounds GPU-hours to 1e-4, so two figures that are equal may differ by that much.
    edge = [r for r in dearer
            if gpu_hours_in_time(policy_rows(r)["tidegate"]) <= policy_rows(r)["static"]["gpu_hours"] + 1e-4]
    if dearer:
        lines.append(f"- of the {len(dearer)} rows dearer than static, {len(edge)} are at or below it without the cold "
                     f"starts the trace ended before (`gpu_hours_unready_at_end`)")
    for label, rs in (("misses the SLO", misses), ("dearer than static", dearer)):
        for r in rs:
            t = policy_rows(r)["tidegate"]
            cut = t.get("gpu_hours_unready_at_end", 0.0)
            in_time = gpu_hours_in_time(t) / policy_rows(r)["static"]["gpu_hours"]
            lines.append(f"  - {label}: {r['trace']} {variant_label(r)} seed {r['seed']} load {r['load']} cold {r['cold']}: "
                         f"{t['ttft_slo_attainment']*100:.2f}%, {t['gpu_hours_vs_static']:.4f}x static" +
                         (f" ({in_time:.4f}x without {cut:.3f} GPU-h of cold starts the trace ended before)"
                          if cut > 0 else ""))
    return "\n".join(lines)


def svg(results, path):
    """Tidegate's GPU-hours / static against its TTFT attainment, one dot per feasible row."""
    w, h, left, bottom = 760, 450, 70, 80
    pts = []
    for r in results:
        if not feasible(r):
            continue
        t = policy_rows(r)["tidegate"]
        pts.append((t["gpu_hours_vs_static"], t["ttft_slo_attainment"] * 100, r["variant"], r["trace"]))
    xmax = max([1.2] + [p[0] * 1.05 for p in pts])
    xmin = min([0.6] + [p[0] - 0.05 for p in pts])
    ymin = min([98.5] + [p[1] - 0.2 for p in pts])
    colours = {"none": "#1f77b4", "onoff": "#d62728", "spikes": "#ff7f0e", "mmpp": "#2ca02c", "wave": "#9467bd"}
    X = lambda v: left + (w - left - 20) * (v - xmin) / (xmax - xmin)
    Y = lambda v: 20 + (h - bottom - 20) * (100 - v) / (100 - ymin)
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' font-family='sans-serif' font-size='11'>",
           f"<rect width='{w}' height='{h}' fill='white'/>",
           f"<line x1='{X(1)}' y1='20' x2='{X(1)}' y2='{h-bottom}' stroke='#888' stroke-dasharray='4,3'/>",
           f"<line x1='{left}' y1='{Y(99)}' x2='{w-20}' y2='{Y(99)}' stroke='#888' stroke-dasharray='4,3'/>",
           f"<text x='{X(1)+4}' y='32'>static = 1.0</text><text x='{w-120}' y='{Y(99)-4}'>SLO 99 %</text>",
           f"<line x1='{left}' y1='{h-bottom}' x2='{w-20}' y2='{h-bottom}' stroke='black'/>",
           f"<line x1='{left}' y1='20' x2='{left}' y2='{h-bottom}' stroke='black'/>",
           f"<text x='{w/2-150}' y='{h-10}'>Tidegate GPU-hours / cheapest static fleet meeting the SLO</text>",
           f"<text x='14' y='{h/2}' transform='rotate(-90 14 {h/2})'>TTFT attainment %</text>"]
    for i in range(0, 7):
        v = xmin + (xmax - xmin) * i / 6
        out.append(f"<text x='{X(v)-10}' y='{h-bottom+14}'>{v:.2f}</text>")
    for i in range(0, 5):
        v = ymin + (100 - ymin) * i / 4
        out.append(f"<text x='{left-44}' y='{Y(v)+4}'>{v:.2f}</text>")
    for x, y, v, trace in pts:
        shape = "circle" if trace == "azure" else "rect"
        if shape == "circle":
            out.append(f"<circle cx='{X(x):.1f}' cy='{Y(y):.1f}' r='4' fill='{colours.get(v, '#333')}' fill-opacity='0.8'/>")
        else:
            out.append(f"<rect x='{X(x)-4:.1f}' y='{Y(y)-4:.1f}' width='8' height='8' fill='{colours.get(v, '#333')}' "
                       f"fill-opacity='0.8'/>")
    for i, (v, c) in enumerate(colours.items()):
        out.append(f"<circle cx='{left+20+i*95}' cy='{h-bottom+36}' r='4' fill='{c}'/>"
                   f"<text x='{left+28+i*95}' y='{h-bottom+40}'>{v}</text>")
    out.append(f"<text x='{w-230}' y='{h-bottom+40}'>circle: azure, square: mooncake</text>")
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin", "tidegate-replay"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--rows", choices=["dev", "heldout", "all", *GRID_SETS], default="all")
    ap.add_argument("--out", default=os.path.join(HERE, "robustness"))
    ap.add_argument("--no-tune", action="store_true")
    ap.add_argument("--prefix-aware", action="store_true",
                    help="route the traces with prefix block ids by prefix (the gateway's default balancer)")
    ap.add_argument("--render", action="store_true", help="rewrite table.md and ratios.svg from OUT/rows.jsonl")
    ap.add_argument("--trace", action="append", default=[], metavar="NAME=PATH",
                    help="run the rows on this trace instead of the shared ones (repeatable; any format "
                         "tidegate-replay reads). Config: configs/replay-mooncake-h100.yaml for .jsonl, "
                         "configs/replay-azure.yaml otherwise, unless --trace-config names one")
    ap.add_argument("--trace-config", action="append", default=[], metavar="NAME=FILE")
    ap.add_argument("--trace-args", action="append", default=[], metavar="NAME=FLAGS",
                    help="extra tidegate-replay flags for a trace, e.g. 'burst=--window-s 0:3600 --trace-model GPT-4'")
    args = ap.parse_args()
    if args.trace:
        use_traces(args.trace, args.trace_config, args.trace_args)
    if args.render:
        with open(os.path.join(args.out, "rows.jsonl")) as f:
            return write_report([json.loads(line) for line in f], args.out)
    if not all(os.path.exists(t["path"]) for t in TRACES.values()):
        print(f"robustness: shared traces not found under {DATA}, skipped")
        return 0
    os.makedirs(args.out, exist_ok=True)
    todo = rows(args.rows)
    results = [None] * len(todo)
    with cf.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(run_row, args.bin, r, not args.no_tune, args.prefix_aware): i for i, r in enumerate(todo)}
        for n, fut in enumerate(cf.as_completed(futures), 1):
            results[futures[fut]] = fut.result()
            print(f"  {n}/{len(todo)} rows", file=sys.stderr, end="\r")
    print(file=sys.stderr)
    with open(os.path.join(args.out, "rows.jsonl"), "w") as f:
        for r in results:
            f.write(json.dumps(r) + "\n")
    return write_report(results, args.out)


def named(items, flag):
    out = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name or not value:
            sys.exit(f"robustness: {flag} expects NAME=VALUE, got {item!r}")
        out[name] = value
    return out


def use_traces(traces, configs, extra):
    """Replaces the shared traces by the user's: the same rows, on traffic of their own."""
    paths, cfgs, flags = named(traces, "--trace"), named(configs, "--trace-config"), named(extra, "--trace-args")
    for name in list(cfgs) + list(flags):
        if name not in paths:
            sys.exit(f"robustness: {name!r} names no --trace")
    for name, path in paths.items():
        if not os.path.exists(path):
            sys.exit(f"robustness: --trace {name}={path}: no such file")
    TRACES.clear()
    for name, path in paths.items():
        jsonl = path.endswith(".jsonl")
        default = "configs/replay-mooncake-h100.yaml" if jsonl else "configs/replay-azure.yaml"
        TRACES[name] = {"path": os.path.abspath(path), "config": os.path.abspath(cfgs.get(name, os.path.join(ROOT, default))),
                        "prefix": jsonl, "args": shlex.split(flags.get(name, ""))}


def write_report(results, out):
    text = "### Verdict\n\n" + verdict(results) + "\n\n### Rows\n\n" + table(results) + "\n"
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(text)
    svg(results, os.path.join(out, "ratios.svg"))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
