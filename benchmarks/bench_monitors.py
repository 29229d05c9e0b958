"""Benchmark of the AF/SF/DR/WF monitors (issue 2): events/s, ratios and peak memory.

Run from the repository root::

    .venv/bin/python benchmarks/bench_monitors.py                  # 10^5, 10^6, 10^7
    .venv/bin/python benchmarks/bench_monitors.py --sizes 1e5,1e6
    .venv/bin/python benchmarks/bench_monitors.py --quick          # 10^4, 10^5: < 30 s

What is measured, on the same seeded synthetic trace at each size:

- **online**: `Monitor.feed` with AF+SF+DR+WF, over event objects built
  beforehand (generation is not timed);
- **offline**: `check_offline` on a `ColumnarTrace` built beforehand from the
  same events (only `check_offline` is timed, not the columnar construction);
- **hand-written SF**: `handwritten_sf` below, a single-purpose SF checker
  (per-window entitlement count, a dict of pending deadlines and a heap);
- **reelay** (PyPI ``reelay``, C++ behind pybind11): a first-order dense-time
  past-MTL formula (`REELAY_SF`), quantified ``forall[r]`` over request ids,
  fed dict records; at 10^5 events and below only (it is slow).

Sizes ≥ `STREAM_FROM` events are not materialised: each measurement runs in
its own child process, which takes `CHUNK` events at a time from the lazy
generator (untimed) and feeds them to the checker (timed), 1 run; the online
child's peak RSS (VmHWM) is the memory figure. The offline child has to
materialise the trace and its columns (untimed), so its RSS is large by
construction; it times `OFFLINE_STREAMED_REPEATS` runs of `check_offline` on
them and reports the median, and the first (cold) run apart: on this VM
the cold run's kernel time (page faults, huge-page compaction for fresh
arrays) varies from 0.1 to 1.4 s between identical runs. Smaller sizes run
in this process on a materialised trace, median of ``--repeats`` runs.

Every checker's SF verdicts (the set of request ids, and for the exact
checkers the violation times) are compared; a disagreement stops the run.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import heapq
import itertools
import json
import math
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere; an rvguard on PYTHONPATH (a compiled
    sys.path.append(str(ROOT))  # build) or installed comes first

from rvguard.columnar import ColumnarTrace  # noqa: E402
from rvguard.contract import Contract, load_contract  # noqa: E402
from rvguard.events import Admit, Arrive, Basis, Complete, Dispatch, Drop, Event, Fail, Reject  # noqa: E402
from rvguard.monitors import Monitor  # noqa: E402
from rvguard.monitors.offline import check_offline  # noqa: E402

CONTRACT_PATH = ROOT / "specs" / "marquee.yaml"
US = 1_000_000  # the generator's clock ticks in integer microseconds
STREAM_FROM = 5_000_000  # sizes from here on are streamed in child processes
REELAY_MAX = 100_000  # reelay runs at sizes up to this
PROPERTIES = ("AF", "SF", "DR", "WF")
CHUNK = 50_000  # streamed runs: events generated (untimed) per chunk, then checked (timed)
OFFLINE_STREAMED_REPEATS = 3  # streamed sizes: check_offline runs on the one materialised trace
KIND_NAMES = ("arrive", "admit", "reject", "dispatch", "complete", "drop", "fail")

# --------------------------------------------------------------------------
# The synthetic workload
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """Two tenants on the marquee contract; times in seconds, probabilities per request.

    Assured arrivals are Poisson(``assured_rate``) against a floor of B = 6
    per 1 s window, so some windows overflow and their excess is rejected
    (``excess: reject``). Entitled requests are admitted on the ``floor``
    basis and mostly complete on time; fates below inject late completions,
    hangs (no completion; a client ``fail`` after ``timeout``), doomed drops,
    backend failures and, rarely, an entitled rejection (an AF violation).
    Opportunistic requests carry most of the volume and of the live state.
    """

    seed: int = 20240602
    assured_rate: float = 5.0
    opportunistic_rate: float = 250.0
    max_live: int = 1000
    admit_delay: tuple[float, float] = (50e-6, 2e-3)
    assured_wait: float = 0.3  # mean of the exponential admission → dispatch wait
    opportunistic_wait: float = 1.0
    service: tuple[float, float] = (0.236, 0.66)  # uniform, between L and s_max
    timeout: float = 10.0
    # fates of an entitled assured request
    p_af_reject: float = 0.001
    p_late: float = 0.02
    p_hang: float = 0.01
    p_doomed_drop: float = 0.005
    p_backend_fail: float = 0.002
    # fates of an opportunistic request
    p_opp_reject: float = 0.08
    p_opp_hang: float = 0.01
    p_opp_doomed_drop: float = 0.005
    p_opp_bad_drop: float = 0.0005  # a drop that is not doomed: a DR violation


@dataclass
class GeneratorStats:
    """Filled in while the generator runs."""

    events: int = 0
    requests: int = 0
    live: int = 0
    max_live: int = 0
    shed: int = 0  # opportunistic arrivals rejected because max_live was reached


class TraceGenerator:
    """A lazy, seeded event stream: ``iter(gen)`` yields exactly ``n`` events.

    Times are integer microseconds (strictly increasing: a tie is pushed 1 µs
    later at emission), so all event times are distinct, which the reelay
    encoding relies on. Memory is O(live requests): each request's future
    events wait in one heap; the arrival process runs alongside it.
    """

    def __init__(self, n: int, contract: Contract, workload: Workload | None = None) -> None:
        self.n = n
        self.w = workload or Workload()
        self.stats = GeneratorStats()
        assured = contract.tenants["assured"]
        self.floor = int(assured.floor)
        self.deadline_us = round(assured.deadline * US)
        self.lower_us = round(contract.service.lower.base * US)
        self.window_us = round(contract.window * US)
        self.epoch_us = round(contract.epoch * US)
        self._rng = np.random.default_rng(self.w.seed)
        self._buf = self._rng.random(0)
        self._pos = 0

    # -- random draws (buffered: one numpy call per 64k draws) -------------
    def _u(self) -> float:
        if self._pos == len(self._buf):
            self._buf = self._rng.random(65536)
            self._pos = 0
        self._pos += 1
        return float(self._buf[self._pos - 1])

    def _uniform_us(self, lo: float, hi: float) -> int:
        return round((lo + (hi - lo) * self._u()) * US)

    def _exp_us(self, mean: float) -> int:
        return round(-mean * math.log(1.0 - self._u()) * US)

    # -- request fates: lists of (offset-free absolute µs, code, payload) --
    def _assured(self, ta: int, entitled: bool) -> list[tuple[int, int, Any]]:
        w = self.w
        admit = ta + self._uniform_us(*w.admit_delay)
        if not entitled:
            return [(admit, 2, "excess")]
        dl = ta + self.deadline_us
        u = self._u()
        if u < w.p_af_reject:
            return [(admit, 2, "guard bug")]
        u -= w.p_af_reject
        disp = admit + self._exp_us(w.assured_wait)
        if u < w.p_hang:
            return [(admit, 1, Basis.FLOOR), (disp, 3, None), (ta + round(w.timeout * US), 6, "timeout")]
        u -= w.p_hang
        if u < w.p_doomed_drop:  # t + L > D by at least 1 ms
            drop = dl - self.lower_us + 1000 + self._uniform_us(0.0, 0.2)
            return [(admit, 1, Basis.FLOOR), (drop, 5, "doomed")]
        u -= w.p_doomed_drop
        if u < w.p_backend_fail:
            return [
                (admit, 1, Basis.FLOOR),
                (disp, 3, None),
                (disp + self._uniform_us(0.01, 0.3), 6, "backend"),
            ]
        u -= w.p_backend_fail
        done = dl + self._uniform_us(0.001, 1.0) if u < w.p_late else disp + self._uniform_us(*w.service)
        done = max(done, disp + 1)
        if abs(done - dl) < 100:  # keep 100 µs from the deadline: no float ties at t = D
            done = max(dl + 100, disp + 1)
        return [(admit, 1, Basis.FLOOR), (disp, 3, None), (done, 4, None)]

    def _opportunistic(self, ta: int) -> list[tuple[int, int, Any]]:
        w = self.w
        admit = ta + self._uniform_us(*w.admit_delay)
        u = self._u()
        if u < w.p_opp_reject or self.stats.live > self.w.max_live:
            self.stats.shed += u >= w.p_opp_reject
            return [(admit, 2, "capacity")]
        u -= w.p_opp_reject
        disp = admit + self._exp_us(w.opportunistic_wait)
        if u < w.p_opp_hang:
            return [(admit, 1, Basis.SURPLUS), (disp, 3, None), (ta + round(w.timeout * US), 6, "timeout")]
        u -= w.p_opp_hang
        if u < w.p_opp_doomed_drop:
            drop = ta + self.deadline_us - self.lower_us + 1000 + self._uniform_us(0.0, 0.2)
            return [(admit, 1, Basis.SURPLUS), (drop, 5, "doomed")]
        u -= w.p_opp_doomed_drop
        if u < w.p_opp_bad_drop:
            return [(admit, 1, Basis.SURPLUS), (admit + self._uniform_us(0.1, 0.5), 5, "evicted")]
        return [(admit, 1, Basis.SURPLUS), (disp, 3, None), (disp + self._uniform_us(*w.service), 4, None)]

    def __iter__(self) -> Iterator[Event]:
        w, st = self.w, self.stats
        heap: list[tuple[int, int, int, str, Any]] = []
        seq = 0
        rate = w.assured_rate + w.opportunistic_rate
        p_assured = w.assured_rate / rate
        next_arrival = self._exp_us(1.0 / rate)
        last = -1
        window, count = -1, 0
        push, pop = heapq.heappush, heapq.heappop
        for _ in range(self.n):
            if heap and heap[0][0] <= next_arrival:
                us, _s, code, rid, payload = pop(heap)
                us = max(us, last + 1)
                last = us
                yield _event(code, us / US, rid, payload)
                if code >= 4 or code == 2:
                    st.live -= 1
                continue
            us = max(next_arrival, last + 1)
            last = us
            next_arrival = us + max(1, self._exp_us(1.0 / rate))
            rid = f"r{st.requests}"
            st.requests += 1
            st.live += 1
            st.max_live = max(st.max_live, st.live)
            if self._u() < p_assured:
                k = (us - self.epoch_us) // self.window_us
                count = count + 1 if k == window else 1
                window = k
                tenant, fate = "assured", self._assured(us, count <= self.floor)
            else:
                tenant, fate = "opportunistic", self._opportunistic(us)
            yield Arrive(t=us / US, rid=rid, tenant=tenant)
            prev = us
            for t_us, code, payload in fate:
                prev = max(t_us, prev + 1)
                seq += 1
                push(heap, (prev, seq, code, rid, payload))
        st.events = self.n


def _event(code: int, t: float, rid: str, payload: Any) -> Event:
    if code == 1:
        return Admit(t=t, rid=rid, basis=payload)
    if code == 3:
        return Dispatch(t=t, rid=rid)
    if code == 4:
        return Complete(t=t, rid=rid)
    if code == 2:
        return Reject(t=t, rid=rid, reason=payload)
    if code == 5:
        return Drop(t=t, rid=rid, reason=payload)
    return Fail(t=t, rid=rid, reason=payload)


# --------------------------------------------------------------------------
# The checkers
# --------------------------------------------------------------------------

SF = tuple[float, str]  # (violation time, rid)


class DisagreementError(AssertionError):
    """Two checkers gave different verdicts on the same trace."""


def _require(ok: bool, message: str) -> None:
    """An agreement check that ``python -O`` does not strip."""
    if not ok:
        raise DisagreementError(message)


def feed_monitor(monitor: Monitor, events: Iterable[Event]) -> None:
    """`Monitor.feed` on each event: the loop a deployment would run."""
    feed = monitor.feed
    for ev in events:
        feed(ev)


def sf_of(monitor: Monitor) -> list[SF]:
    """The monitor's SF violations as (time, rid)."""
    return [(v.t, v.rid) for v in monitor.violations() if v.property == "SF"]


def run_online(events: Iterable[Event], contract: Contract) -> list[SF]:
    """The rvguard online monitor, AF+SF+DR+WF; returns its SF violations."""
    monitor = Monitor(contract, PROPERTIES)
    feed_monitor(monitor, events)
    return sf_of(monitor)


def run_batch(events: list[Event], contract: Contract) -> list[SF]:
    """The same monitor fed in one batch (`Monitor.feed_all`: replay); returns its SF violations."""
    monitor = Monitor(contract, PROPERTIES)
    monitor.feed_all(events)
    return sf_of(monitor)


def run_offline(trace: ColumnarTrace, contract: Contract) -> list[SF]:
    """The rvguard offline checker over columns; returns its SF violations."""
    result = check_offline(trace, contract, PROPERTIES)
    _require(result.vectorised, "the synthetic trace is WF-clean: the vectorised path must run")
    return [(v.t, v.rid) for v in result.violations if v.property == "SF"]


class HandwrittenSF:
    """Baseline 1: a single-purpose SF checker, written plainly.

    Entitlement is counted per (tenant, window) in arrival order; an entitled
    request's deadline waits in ``entitled`` until its admit, then in
    ``pending`` and in a heap. A deadline strictly passed by the next event's
    time, or a drop/fail while pending, is a violation. Cost O(log n) per
    admitted entitled request, O(1) per other event; memory O(live).
    `feed_all` may be called again with the next events.
    """

    def __init__(self, contract: Contract) -> None:
        self.floors = {name: t.floor for name, t in contract.tenants.items()}
        self.rel = {name: t.deadline for name, t in contract.tenants.items()}
        self.epoch, self.width = contract.epoch, contract.window
        self.counts: dict[str, tuple[int, int]] = {}
        self.entitled: dict[str, float] = {}
        self.pending: dict[str, float] = {}
        self.heap: list[tuple[float, str]] = []
        self.late: list[SF] = []

    def feed_all(self, events: Iterable[Event]) -> None:
        floors, rel, epoch, width = self.floors, self.rel, self.epoch, self.width
        counts, entitled, pending, heap, late = self.counts, self.entitled, self.pending, self.heap, self.late
        for ev in events:
            t = ev.t
            while heap and heap[0][0] < t:
                d, rid = heapq.heappop(heap)
                if pending.get(rid) == d:
                    del pending[rid]
                    late.append((d, rid))
            code = ev.code
            if code == 0:
                tenant = ev.tenant  # type: ignore[union-attr]
                k = math.floor((t - epoch) / width)
                w, c = counts.get(tenant, (k, 0))
                c = c + 1 if w == k else 1
                counts[tenant] = (k, c)
                if c <= floors[tenant]:
                    entitled[ev.rid] = t + rel[tenant]
            elif code == 1:
                d = entitled.pop(ev.rid, None)
                if d is not None:
                    pending[ev.rid] = d
                    heapq.heappush(heap, (d, ev.rid))
            elif code == 2:
                entitled.pop(ev.rid, None)
            elif code >= 4 and pending.pop(ev.rid, None) is not None and code != 4:
                late.append((t, ev.rid))  # dropped or failed before its deadline


def handwritten_sf(events: Iterable[Event], contract: Contract) -> list[SF]:
    """Run `HandwrittenSF` over ``events``; its SF violations as (time, rid)."""
    checker = HandwrittenSF(contract)
    checker.feed_all(events)
    return checker.late


# reelay: "no entitled admitted request goes without a completion past its deadline,
# nor ends by drop/fail". Entitlement reaches reelay as the admit's basis (the
# generator admits exactly the entitled assured requests on the floor basis).
# Dense time makes a record hold until the next one, so the encoding adds a
# `tick` record 0.5 µs after each arrive/drop/fail: once[D:D]{arrive} is then a
# 0.5 µs pulse at the deadline, and each violation a distinct falling edge.
REELAY_SF = (
    "forall[r].(not ("
    "once{{event: admit, rid: *r, basis: floor}} and ("
    "(once[{d}:{d}]{{event: arrive, rid: *r}} and (not (once{{event: complete, rid: *r}})))"
    " or {{event: drop, rid: *r}} or {{event: fail, rid: *r}})))"
)
TICK = 0.5e-6


def reelay_records(events: Iterable[Event]) -> list[dict[str, Any]]:
    """Dict records for reelay, with the ticks that keep events instantaneous."""
    out: list[dict[str, Any]] = []
    for ev in events:
        rec: dict[str, Any] = {"time": ev.t, "event": KIND_NAMES[ev.code], "rid": ev.rid}
        if ev.code == 1:
            rec["basis"] = ev.basis.value  # type: ignore[union-attr]
        out.append(rec)
        if ev.code in (0, 5, 6):
            out.append({"time": ev.t + TICK, "event": "tick"})
    return out


def run_reelay(records: list[dict[str, Any]], contract: Contract) -> list[tuple[float, bool]]:
    """Baseline 2: reelay's dense-time monitor; returns its output edges (time, value)."""
    import reelay

    monitor = reelay.dense_timed_monitor(REELAY_SF.format(d=contract.tenants["assured"].deadline))
    update = monitor.update
    edges: list[tuple[float, bool]] = []
    for rec in records:
        for out in update(rec):
            edges.append((out["time"], out["value"]))
    last = records[-1]["time"] if records else 0.0
    for out in update({"time": last + 2 * TICK, "event": "tick"}):  # flush the last segment
        edges.append((out["time"], out["value"]))
    return edges


def reelay_late_rids(edges: list[tuple[float, bool]], events: list[Event], deadline: float) -> set[str]:
    """Map reelay's falling edges back to rids.

    An edge on the µs grid is a drop/fail record's own time; an edge off the
    grid is a deadline pulse, at arrival + D (D as reelay stores it: float32).
    """
    d32 = float(np.float32(deadline))
    by_us = {round(ev.t * US): ev for ev in events}
    rids: set[str] = set()
    for t, value in edges:
        if value:
            continue
        us = t * US
        ev = by_us.get(round(us)) if abs(us - round(us)) < 1e-3 else None
        if ev is None or ev.code not in (5, 6):
            ta = (t - d32) * US
            ev = by_us.get(round(ta))
            _require(ev is not None and ev.code == 0 and abs(ta - round(ta)) < 1e-3, f"unmapped edge {t!r}")
            assert ev is not None
        rids.add(ev.rid)
    return rids


# --------------------------------------------------------------------------
# Measurement
# --------------------------------------------------------------------------


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _median(fn: Callable[[], Any], repeats: int) -> tuple[float, list[float], Any]:
    runs, out = [], None
    for _ in range(repeats):
        dt, out = _timed(fn)
        runs.append(dt)
    return statistics.median(runs), runs, out


def _digest(sf: list[SF]) -> str:
    return hashlib.sha256(repr(sorted(sf)).encode()).hexdigest()[:16]


def _peak_rss_mb() -> float:
    """VmHWM of this process, in MB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")  # pragma: no cover - not Linux


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")  # pragma: no cover - not Linux


def measure_in_process(n: int, contract: Contract, repeats: int, reelay_repeats: int) -> dict[str, Any]:
    """One size, pre-materialised: median of ``repeats`` runs per checker.

    The materialised events and columns are moved out of the garbage
    collector's view (`gc.freeze`) while the checkers run: a deployed monitor
    does not hold the whole trace, and without the freeze every full
    collection would walk the benchmark's own n event objects.
    """
    gen = TraceGenerator(n, contract)
    t_gen, events = _timed(lambda: list(gen))
    t_col, trace = _timed(lambda: ColumnarTrace.from_events(events))
    gc.collect()
    gc.freeze()
    try:
        return _measure_materialised(n, contract, events, trace, gen.stats, repeats, reelay_repeats) | {
            "generate_s": t_gen,
            "columnar_build_s": t_col,
        }
    finally:
        gc.unfreeze()


def _measure_materialised(
    n: int,
    contract: Contract,
    events: list[Event],
    trace: ColumnarTrace,
    stats: GeneratorStats,
    repeats: int,
    reelay_repeats: int,
) -> dict[str, Any]:
    res: dict[str, Any] = {"n": n, "mode": "in-process", "repeats": repeats}
    res["max_live"] = stats.max_live
    res["requests"] = stats.requests
    res["shed"] = stats.shed
    t, runs, online = _median(lambda: run_online(events, contract), repeats)
    res["online"] = {"s": t, "runs": runs, "eps": n / t}
    t, runs, batch = _median(lambda: run_batch(events, contract), repeats)
    res["online_batch"] = {"s": t, "runs": runs, "eps": n / t}
    _require(batch == online, "feed_all and feed give different SF verdicts")
    t, runs, offline = _median(lambda: run_offline(trace, contract), repeats)
    res["offline"] = {"s": t, "runs": runs, "eps": n / t}
    t, runs, hand = _median(lambda: handwritten_sf(events, contract), repeats)
    res["handwritten"] = {"s": t, "runs": runs, "eps": n / t}
    _require(sorted(online) == sorted(offline), "online and offline SF verdicts differ")
    _require(sorted(online) == sorted(hand), "online and hand-written SF verdicts differ")
    res["sf_violations"] = len(online)
    res["sf_digest"] = _digest(online)
    res["agree_offline"] = res["agree_handwritten"] = True
    if reelay_repeats > 0:
        records = reelay_records(events)
        t, runs, edges = _median(lambda: run_reelay(records, contract), reelay_repeats)
        late = reelay_late_rids(edges, events, contract.tenants["assured"].deadline)
        mine = {rid for _, rid in online}
        res["reelay"] = {"s": t, "runs": runs, "eps": n / t, "records": len(records)}
        res["reelay_late"] = len(late)
        res["agree_reelay"] = late == mine
        _require(
            late == mine,
            f"reelay disagrees: only reelay {sorted(late - mine)[:5]}, "
            f"only rvguard {sorted(mine - late)[:5]}",
        )
    return res


def child_main(what: str, n: int) -> None:
    """Entry point of a child process: one streamed measurement, JSON on stdout."""
    contract = load_contract(CONTRACT_PATH)
    base_rss = _rss_mb()
    gen = TraceGenerator(n, contract)
    out: dict[str, Any] = {"what": what, "n": n}
    if what == "offline":  # materialise the columns (untimed), then time check_offline alone
        t_col, trace = _timed(lambda: ColumnarTrace.from_events(gen))
        out["columnar_build_s"] = t_col
        gc.collect()
        gc.freeze()
        t, runs, sf = _median(lambda: run_offline(trace, contract), OFFLINE_STREAMED_REPEATS)
        out["runs"] = runs  # runs[0] is the cold one: fresh memory, page faults
        t_gen = 0.0  # the columns were built (and the events generated) before the clock started
    else:  # stream in chunks: the clock runs only while the checker consumes a chunk
        t_gen, t, sf = _stream(what, iter(gen), contract)
    out.update(generate_s=t_gen, max_live=gen.stats.max_live, requests=gen.stats.requests)
    out.update(
        s=t,
        eps=n / t,
        sf_violations=len(sf),
        sf_digest=_digest(sf),
        base_rss_mb=base_rss,
        peak_rss_mb=_peak_rss_mb(),
    )
    print(json.dumps(out))


def _stream(what: str, events: Iterator[Event], contract: Contract) -> tuple[float, float, list[SF]]:
    """Generate CHUNK events (untimed), check them (timed), repeat; memory stays O(live + CHUNK)."""
    monitor = Monitor(contract, PROPERTIES) if what == "online" else None
    hand = HandwrittenSF(contract)
    t_gen = t_check = 0.0
    while True:
        t0 = time.perf_counter()
        chunk = list(itertools.islice(events, CHUNK))
        t1 = time.perf_counter()
        if not chunk:
            break
        if monitor is not None:
            feed_monitor(monitor, chunk)
        else:
            hand.feed_all(chunk)
        t_check += time.perf_counter() - t1
        t_gen += t1 - t0
    return t_gen, t_check, sf_of(monitor) if monitor is not None else hand.late


def measure_in_child(what: str, n: int) -> dict[str, Any]:
    """Run `child_main` in a fresh interpreter (its own RSS) and read its JSON line."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", what, "--sizes", str(n)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def measure_streamed(n: int) -> dict[str, Any]:
    """One size, streamed, 1 run per checker, each in its own child process."""
    online = measure_in_child("online", n)
    hand = measure_in_child("handwritten", n)
    offline = measure_in_child("offline", n)
    _require(online["sf_digest"] == hand["sf_digest"], "online and hand-written SF verdicts differ")
    _require(online["sf_digest"] == offline["sf_digest"], "online and offline SF verdicts differ")
    return {
        "n": n,
        "mode": "streamed",
        "repeats": 1,
        "generate_s": online["generate_s"],
        "columnar_build_s": offline["columnar_build_s"],
        "max_live": online["max_live"],
        "requests": online["requests"],
        "online": {"s": online["s"], "generate_s": online["generate_s"], "eps": online["eps"]},
        "offline": {
            "s": offline["s"],
            "runs": offline["runs"],
            "eps": offline["eps"],
            "cold_eps": n / offline["runs"][0],
            "build_s": offline["columnar_build_s"],
        },
        "handwritten": {"s": hand["s"], "generate_s": hand["generate_s"], "eps": hand["eps"]},
        "sf_violations": online["sf_violations"],
        "sf_digest": online["sf_digest"],
        "agree_offline": True,
        "agree_handwritten": True,
        "memory": {
            "online_peak_rss_mb": online["peak_rss_mb"],
            "online_base_rss_mb": online["base_rss_mb"],
            "handwritten_peak_rss_mb": hand["peak_rss_mb"],
            "offline_peak_rss_mb": offline["peak_rss_mb"],
        },
    }


def run(
    sizes: list[int], *, repeats: int = 3, reelay_repeats: int = 3, memory_size: int | None = None
) -> dict[str, Any]:
    """Measure every size; the streamed online child of the largest size gives the memory figure."""
    contract = load_contract(CONTRACT_PATH)
    results = []
    for n in sizes:
        if n >= STREAM_FROM:
            results.append(measure_streamed(n))
        else:
            rr = reelay_repeats if n <= REELAY_MAX else 0
            results.append(measure_in_process(n, contract, repeats, rr))
        _print_row(results[-1])
    mem_n = memory_size or max(sizes)
    streamed = [r for r in results if r["mode"] == "streamed" and r["n"] == mem_n]
    if streamed:
        memory = dict(streamed[0]["memory"], n=mem_n)
    else:
        child = measure_in_child("online", mem_n)
        memory = {
            "n": mem_n,
            "online_peak_rss_mb": child["peak_rss_mb"],
            "online_base_rss_mb": child["base_rss_mb"],
        }
    return {"results": results, "memory": memory, "python": sys.version.split()[0]}


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------


def _fmt(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def _print_row(r: dict[str, Any]) -> None:
    print(f"  measured n={r['n']:,} ({r['mode']}); SF violations {r['sf_violations']}", file=sys.stderr)


def table(report: dict[str, Any]) -> str:
    """The events/s table with the three ratios, and the memory line."""
    head = (
        "| events | online ev/s | offline ev/s | hand-written SF ev/s | reelay ev/s "
        "| online/hand | offline/online | online/reelay | SF viol. | agree |"
    )
    lines = [head, "|" + "---|" * 10]
    for r in report["results"]:
        on, off, hw = r["online"]["eps"], r["offline"]["eps"], r["handwritten"]["eps"]
        rl = r["reelay"]["eps"] if "reelay" in r else None
        agree = "hand, offline" + (", reelay" if r.get("agree_reelay") else "")
        lines.append(
            f"| {r['n']:,} | {_fmt(on)} | {_fmt(off)} | {_fmt(hw)} | {_fmt(rl)} "
            f"| {on / hw:.2f} | {off / on:.1f} | {_fmt(on / rl) if rl else '—'} "
            f"| {r['sf_violations']} | {agree} |"
        )
    for r in report["results"]:
        if "online_batch" in r:
            batch = r["online_batch"]["eps"]
            lines.append(
                f"\n{r['n']:,} events: online in one batch (`feed_all`, replay): {_fmt(batch)} ev/s, "
                f"{batch / r['handwritten']['eps']:.2f}× hand-written (target 0.5×)"
            )
    for r in report["results"]:
        cold = r["offline"].get("cold_eps")
        if cold is not None:
            lines.append(
                f"\n{r['n']:,} events: offline = median of {len(r['offline']['runs'])} runs on the same "
                f"columns; its first (cold) run alone: {_fmt(cold)} ev/s, "
                f"{cold / r['online']['eps']:.1f}× online"
            )
    m = report["memory"]
    lines.append("")
    lines.append(
        f"online peak RSS at {m['n']:,} events: {m['online_peak_rss_mb']:.0f} MB "
        f"(interpreter + imports before the run: {m['online_base_rss_mb']:.0f} MB; target < 200 MB)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1e5,1e6,1e7", help="comma-separated event counts (1e5 notation ok)")
    p.add_argument("--quick", action="store_true", help="10^4 and 10^5 only (< 30 s)")
    p.add_argument("--repeats", type=int, default=3, help="runs per in-process measurement (median)")
    p.add_argument("--json", type=Path, help="also write the raw results here")
    p.add_argument("--child", choices=("online", "offline", "handwritten"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    sizes = [10_000, 100_000] if args.quick else [int(float(s)) for s in args.sizes.split(",")]
    if args.child:
        child_main(args.child, sizes[0])
        return 0
    report = run(sizes, repeats=args.repeats, reelay_repeats=1 if args.quick else args.repeats)
    print(table(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
