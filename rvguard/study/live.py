"""``rvguard experiment NAME --backend URL``: an experiment's arms run open loop through the gateway.

Why: the simulator is a model; the claim that the floor holds is about a
real engine. This runner takes the same arms (`rvguard.sim.runner.Arm`) and
the same paired arrivals, and instead of simulating them it serves each
arm's contract with the real gateway (`rvguard.gateway.app.Gateway`, in
process) in front of an OpenAI-compatible engine and fires the requests at
their times with the load generator (`rvguard.gateway.loadgen.replay`, open
loop: a request is sent at its time whatever happened to the others). The
gateway's own trace is then judged by the monitors, like a simulated one.

Scale (`live_runner`): a contract calibrated for the study's V100 does not fit a CPU
engine. Two factors carry an experiment over. Output length: the tiny CPU
model decodes a token in about a millisecond, so at the study's 16 tokens a
request is mostly fixed per-request cost and the scaled offer (≈ 110
req/s) saturates the machine's Python (client, gateway, the engine's API
server) rather than the engine; each request asks for ``tokens / 16`` times
its length instead (`LIVE_TOKENS` = 128 for 16: decode then dominates the
service, as on the study's GPU). Time: k = the path's saturated service
C/μ_sat (`path_capacity`: sustained completions through the gateway, every
slot busy) over the study's at 16 tokens; every time in the contract and in
the arrivals is multiplied by k, so the load keeps the study's proportions
(offered rate × service / C). The k a ``rvguard calibrate`` run alone gives
(`rvguard.sim.profiles.time_scale`, batches in isolation) is reported
beside it: on this shared 2-core machine it was a quarter to a half of the
measured one, because the relay of 128 streamed tokens through the gateway
and the engine's API server costs CPU the isolated batches do not load,
and a contract scaled from it overloaded the engine (ρ_eff 1.2–1.5 at the
marquee's floor).

Modes, as the gateway can run them:

* ``guarded`` — the gateway with the arm's contract (tier → vLLM priority);
* ``gated-fifo`` — the same contract, the core dispatching in arrival order
  (``GatewaySettings.dispatch_policy = "fifo"``), no vLLM priority;
* ``unguarded`` — the learner alone: every tenant unfloored, one tier, C
  raised so the gateway dispatches at once and the engine queues FCFS;
* ``server-priority`` — as unguarded, but each request carries its true
  tier as vLLM's ``priority`` (the engine runs ``--scheduling-policy priority``).

The LSQ learner is fitted as in the simulator, on 132 closed-loop (load,
latency) samples — measured on the engine itself (`profile_engine`).
Other modes (GAIE, rate limits) have no gateway form and are refused.
The CPU is shared with the client and the gateway: runs are noisier than
the simulator's, and the report says so.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import math
import re
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..clock import MonotonicClock
from ..contract import Contract
from ..enforce.learners import AdmitAll, Learner, LSQLearner, RejectAll, fit_least_squares
from ..enforce.request import Request
from ..enforce.watch import DEFAULT_WATCH
from ..errors import SpecError
from ..events import Admit, Arrive, Basis, Complete, Event
from ..io import read_events
from ..sim.profiling import PER_LOAD, WARMUP_ROUNDS
from ..sim.record import Condition, record_run
from ..sim.run import judge
from ..sim.runner import Arm, Arrivals, default_arrivals

__all__ = [
    "LIVE_MODES",
    "LiveRunner",
    "entitled_sides",
    "keep_trace",
    "live_runner",
    "profile_engine",
    "scale_from_capacity",
    "slug",
]

LIVE_MODES = ("guarded", "gated-fifo", "unguarded", "server-priority")
LIVE_TOKENS = 128  # output tokens a 16-token request of the study asks of the engine
UNBOUNDED_SLOTS = 10_000
PROMPT = "Tell me about the admission floor."


async def _closed_loop(client: Any, url: str, body: dict[str, Any], load: int, count: int) -> list[float]:
    """``count`` latencies at ``load`` requests kept outstanding (each completion sends the next)."""
    clock = MonotonicClock()
    out: list[float] = []
    skip = WARMUP_ROUNDS * load

    async def worker() -> None:
        nonlocal skip
        while len(out) < count:
            t0 = clock.now()
            resp = await client.post(url, json=body)
            latency = clock.now() - t0
            if resp.status_code != 200:
                raise SpecError(f"profiling: upstream http {resp.status_code}", field="backend")
            if skip:
                skip -= 1
            else:
                out.append(latency)

    await asyncio.gather(*(worker() for _ in range(load)))
    return out[:count]


async def profile_engine(
    upstream: str, model: str, *, slots: int, tokens: int = 16
) -> list[tuple[float, float]]:
    """(load, latency) at loads 1 … 3C, `PER_LOAD` each, measured closed loop on the engine."""
    import httpx

    body = {"model": model, "prompt": PROMPT, "max_tokens": tokens, "ignore_eos": True}
    url = upstream.rstrip("/") + "/v1/completions"
    samples: list[tuple[float, float]] = []
    async with httpx.AsyncClient(timeout=120.0) as client:
        for n in range(1, 3 * slots + 1):
            samples += [(float(n), x) for x in await _closed_loop(client, url, body, n, PER_LOAD)]
    return samples


def _gateway_contract(mode: str, contract: Contract) -> Contract:
    """The contract the gateway serves for ``mode`` (module doc); the trace is judged on the arm's own."""
    if mode in ("guarded", "gated-fifo"):
        return contract
    one_tier = mode == "unguarded"
    tenants = {
        n: t.model_copy(update={"floor": 0, "tier": 0 if one_tier else t.tier})
        for n, t in contract.tenants.items()
    }
    return contract.model_copy(update={"tenants": tenants, "slots": UNBOUNDED_SLOTS})


class LiveRunner:
    """Runs arms against a real engine (module doc); a drop-in for `rvguard.sim.runner.run_arms`.

    Args:
        upstream: the engine's base URL.
        model: its model name (None: the first it lists).
        scale: k, the engine's time scale relative to the study's profile.
        tokens: output tokens asked for a 16-token request (others in proportion).
        timeout: seconds one request may take.
        traces: a directory that keeps each run's gateway trace (gzip JSON Lines) beside the
            scaled contract it is judged against, so anyone can re-judge it with ``rvguard check``
            (None: traces are judged and dropped).
    """

    def __init__(
        self,
        upstream: str,
        *,
        model: str,
        scale: float,
        tokens: int = LIVE_TOKENS,
        timeout: float = 120.0,
        calibrated_scale: float | None = None,
        capacity: float | None = None,
        traces: Path | None = None,
    ) -> None:
        if not scale > 0:
            raise SpecError(f"time scale must be > 0, got {scale!r}", field="scale")
        self.upstream = upstream.rstrip("/")
        self.model = model
        self.scale = scale
        self.tokens = tokens
        self.info = {"backend": self.upstream, "time_scale": scale, "tokens": tokens}
        self.info.update({"calibrate_time_scale": calibrated_scale, "path_capacity": capacity})
        self.timeout = timeout
        self.traces = traces
        self._samples: list[tuple[float, float]] | None = None

    def __call__(
        self, arms: Sequence[Arm], *, reps: int, seed: int, arrivals: Arrivals | None = None
    ) -> list[Condition]:
        """Every arm over ``reps`` paired reps, on the engine (`arun` in a fresh event loop)."""
        return asyncio.run(self.arun(arms, reps=reps, seed=seed, arrivals=arrivals))

    async def arun(
        self, arms: Sequence[Arm], *, reps: int, seed: int, arrivals: Arrivals | None = None
    ) -> list[Condition]:
        """As `__call__`, in the running event loop.

        Raises:
            SpecError: an arm's mode has no gateway form.
        """
        for arm in arms:
            mode = str(arm.run.get("mode", "guarded"))
            if mode not in LIVE_MODES:
                raise SpecError(
                    f"--backend: mode {mode!r} has no gateway form (only {', '.join(LIVE_MODES)})",
                    field="--backend",
                )
        draw = arrivals or default_arrivals
        records: list[list[Any]] = [[] for _ in arms]
        sides: list[list[dict[str, Any]]] = [[] for _ in arms]
        for rep in range(reps):
            cache: dict[str, list[Request]] = {}
            for arm, acc, side in zip(arms, records, sides, strict=True):
                key = repr(sorted(arm.load.items()))
                if key not in cache:
                    cache[key] = draw(arm, seed, rep)
                record, seen = await self._one(arm, cache[key], rep)
                acc.append(record)
                side.append(seen)
        k = self.scale
        return [
            Condition(
                arm.params,
                tuple(runs),
                {
                    "slots": arm.contract.slots,
                    "backend": self.upstream,
                    "time_scale": k,
                    "tokens": self.tokens,
                    **pool_sides(side),
                },
            )
            for arm, runs, side in zip(arms, records, sides, strict=True)
        ]

    async def _learner(self, arm: Arm, contract: Contract) -> Learner:
        name = str(arm.run.get("learner", "admit-all"))
        if name == "admit-all":
            return AdmitAll()
        if name == "reject-all":
            return RejectAll()
        if name in ("lsq", "lsq-agnostic"):
            if self._samples is None:
                self._samples = await profile_engine(
                    self.upstream, self.model, slots=contract.slots, tokens=self.tokens
                )
                a, b, r2 = fit_least_squares(self._samples)
                self.info["learner_fit"] = {
                    "samples": len(self._samples),
                    "intercept": a,
                    "slope": b,
                    "r2": r2,
                }
            beta = float(arm.run.get("beta", 1.0))
            if name == "lsq-agnostic":
                return LSQLearner.from_contract(contract, self._samples, beta=beta, mode="class-agnostic")
            return LSQLearner.from_contract(contract, self._samples, beta=beta)
        raise SpecError(f"--backend: learner {name!r} is not available live", field="--backend")

    async def _one(self, arm: Arm, arrivals: list[Request], rep: int = 0) -> tuple[Any, dict[str, Any]]:
        from ..gateway.app import Gateway, GatewaySettings, serving
        from ..gateway.config import KeysConfig
        from ..gateway.loadgen import Shot, replay
        from ..sim.profiles import scale_contract

        k, factor = self.scale, self.tokens / 16
        contract = scale_contract(arm.contract, k)
        contract = contract.model_copy(update={"output_cap": math.ceil(contract.output_cap * factor)})
        mode = str(arm.run.get("mode", "guarded"))
        keys = {f"sk-{n}": n for n in contract.tenants}
        with tempfile.TemporaryDirectory(prefix="rvguard-live-") as tmp:
            trace = Path(tmp) / "trace.jsonl"
            settings = GatewaySettings(
                upstream=self.upstream,
                keys=KeysConfig(keys=keys),
                learner=await self._learner(arm, contract),
                trace=trace,
                timeout=self.timeout,
                deferred_drop=bool(arm.run.get("deferred_drop", False)),
                watch=arm.run.get("watch", DEFAULT_WATCH),  # the watch is on in every arm
                send_priority=mode in ("guarded", "server-priority"),
                dispatch_policy="fifo" if mode == "gated-fifo" else "priority",
            )
            gw = Gateway(_gateway_contract(mode, contract), settings)
            shots = [
                Shot(
                    t=r.t * k,
                    tenant=r.tenant,
                    max_tokens=max(1, round((r.max_tokens or 16) * factor)),
                    prompt=PROMPT,
                )
                for r in arrivals
            ]
            async with serving(gw.app) as url:
                results = await replay(
                    url,
                    shots,
                    model=self.model,
                    keys={n: key for key, n in keys.items()},
                    timeout=self.timeout,
                )
            events = [ev for _, ev in read_events(trace)]
            if self.traces is not None:
                keep_trace(trace, contract, self.traces / f"{slug(arm.params)}-rep{rep}")
        metrics, violations = judge(contract, events)
        client = {r.rid: (r.status, r.latency) for r in results if r.rid}
        return record_run(contract, events, metrics, violations), entitled_sides(contract, events, client)


def slug(params: dict[str, Any]) -> str:
    """A file-name stem for an arm's parameters (``beta=0.5 guard=True`` → ``beta0.5-guardTrue``)."""
    text = "-".join(f"{k}{v}" for k, v in params.items())
    return re.sub(r"[^A-Za-z0-9._+-]", "_", text) or "arm"


def keep_trace(trace: Path, contract: Contract, stem: Path) -> None:
    """``stem.jsonl.gz`` (the trace) and ``stem.contract.json`` (what it is judged against).

    Re-judge with ``gunzip -c stem.jsonl.gz | rvguard check - --contract stem.contract.json``.
    """
    stem.parent.mkdir(parents=True, exist_ok=True)
    with trace.open("rb") as src, gzip.GzipFile(f"{stem}.jsonl.gz", "wb", mtime=0) as dst:
        dst.write(src.read())
    doc = contract.model_dump(mode="json", exclude_none=True)
    Path(f"{stem}.contract.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def entitled_sides(
    contract: Contract, events: Sequence[Event], client: dict[str, tuple[int, float]]
) -> dict[str, Any]:
    """The floor-admitted requests' miss on the trace's clock and on the client's, side by side.

    Why both: the trace stamps an arrival when the gateway first read its bytes; the client's clock
    also holds its own send and receive, so its miss may exceed the trace's (DESIGN §12). A request
    the client saw fail (not 200) counts as a client miss.
    """
    arrive: dict[str, Arrive] = {}
    floor: list[str] = []
    done: dict[str, float] = {}
    for ev in events:
        if isinstance(ev, Arrive):
            arrive[ev.rid] = ev
        elif isinstance(ev, Admit) and ev.basis is Basis.FLOOR:
            floor.append(ev.rid)
        elif isinstance(ev, Complete):
            done[ev.rid] = ev.t
    trace_late = client_late = 0
    gaps = [float(a.extra.get("arrival_gap", 0.0)) for a in arrive.values()]
    for rid in floor:
        a = arrive[rid]
        relative = contract.tenants[a.tenant].deadline
        due = a.deadline if a.deadline is not None else a.t + relative
        trace_late += done.get(rid, math.inf) > due
        status, latency = client.get(rid, (0, math.inf))
        client_late += status != 200 or latency > relative
    return {"entitled": len(floor), "trace_late": trace_late, "client_late": client_late,
            "arrival_gap_max": max(gaps, default=0.0)}  # fmt: skip


def pool_sides(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """`entitled_sides` over a condition's runs: the two miss fractions and the largest stamping gap."""
    n = sum(r["entitled"] for r in runs)
    trace_late = sum(r["trace_late"] for r in runs)
    client_late = sum(r["client_late"] for r in runs)
    return {
        "entitled_trace_miss": trace_late / n if n else None,
        "entitled_client_miss": client_late / n if n else None,
        "arrival_gap_max": max((r["arrival_gap_max"] for r in runs), default=None),
    }


async def path_capacity(
    upstream: str, model: str, *, slots: int, tokens: int, seconds: float = 20.0
) -> float:
    """Sustained requests/s through the gateway with every slot busy (closed loop, 2C clients).

    Why not calibrate's batches: on a small shared machine the gateway's
    relay and the engine's API server cost CPU per token streamed, which a
    calibrate run (batches in isolation) does not load; the study defines its
    load against a *measured* sustainable capacity (μ_sat), so this is what
    the time scale is set from.
    """
    import httpx

    from ..contract import contract_from_mapping
    from ..gateway.app import Gateway, GatewaySettings, serving
    from ..gateway.config import KeysConfig

    contract = contract_from_mapping(
        {
            "window": 1.0,
            "slots": slots,
            "output_cap": tokens,
            "service": {"s_max": 60.0},
            "tenants": {"probe": {"floor": 0, "deadline": 600.0}},
        }
    )
    settings = GatewaySettings(
        upstream=upstream, keys=KeysConfig(keys={"sk-probe": "probe"}), send_priority=False
    )
    gw = Gateway(contract, settings)
    body = {"model": model, "prompt": PROMPT, "max_tokens": tokens, "ignore_eos": True}
    auth = {"authorization": "Bearer sk-probe"}
    done: list[float] = []
    async with serving(gw.app) as url, httpx.AsyncClient(timeout=120.0) as client:
        clock = MonotonicClock()

        async def worker() -> None:
            while clock.now() < seconds:
                resp = await client.post(url + "/v1/completions", json=body, headers=auth)
                if resp.status_code != 200:
                    raise SpecError(f"capacity probe: http {resp.status_code}", field="--backend")
                done.append(clock.now())

        await asyncio.gather(*(worker() for _ in range(2 * slots)))
    warm = seconds / 4
    counted = [t for t in done if warm <= t <= seconds]
    return len(counted) / (seconds - warm)


def scale_from_capacity(mu: float) -> float:
    """k: the path's saturated service C/μ (``mu`` requests/s through the gateway, every slot busy)
    over the study's at 16 tokens (module doc)."""
    from ..sim.profiles import STUDY

    return STUDY.slots / mu / STUDY.mean_base(16, STUDY.slots)


async def _model_name(upstream: str) -> str:
    import httpx

    async with httpx.AsyncClient(timeout=10.0) as client:
        resp = await client.get(upstream.rstrip("/") + "/v1/models")
    data = resp.json().get("data") or [] if resp.status_code == 200 else []
    if not data:
        raise SpecError(f"--backend {upstream}: lists no model (http {resp.status_code})", field="--backend")
    return str(data[0]["id"])


def live_runner(upstream: str, calibration: str | None, *, progress: Callable[[str], None]) -> LiveRunner:
    """A `LiveRunner` for ``upstream``; its time scale from ``calibration`` (calibrate --json) or measured.

    Raises:
        SpecError: the engine cannot be reached, or the calibration file is not one.
    """

    import httpx

    from ..enforce.dispatchers import DispatchError
    from ..gateway.calibrate import calibrate
    from ..sim.profiles import STUDY, profile_from_calibration, time_scale

    try:
        model = asyncio.run(_model_name(upstream))
        if calibration is None:
            progress(f"calibrating {upstream} (rvguard calibrate: batch 1 and C, ℓ up to {LIVE_TOKENS}) …")
            lengths = (1, LIVE_TOKENS // 2, LIVE_TOKENS)
            doc = asyncio.run(calibrate(upstream, lengths=lengths, reps=10, output_cap=LIVE_TOKENS)).to_dict()
        else:
            doc = json.loads(Path(calibration).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise SpecError(f"--calibration {calibration}: {err}", field="--calibration") from err
    except DispatchError as err:
        raise SpecError(f"--backend {upstream}: {err}", field="--backend") from err
    except httpx.HTTPError as err:  # an unreachable engine is bad input, named
        raise SpecError(f"--backend {upstream}: {type(err).__name__}: {err}", field="--backend") from err
    k_cal = time_scale(profile_from_calibration(doc), tokens=LIVE_TOKENS)
    progress(f"measuring the sustained capacity through the gateway ({LIVE_TOKENS} tokens a request) …")
    mu = asyncio.run(path_capacity(upstream, model, slots=STUDY.slots, tokens=LIVE_TOKENS))
    k = scale_from_capacity(mu)
    progress(
        f"engine {upstream} model {model!r}: μ_sat {mu:.2f}/s through the gateway → time scale k = {k:.3f} "
        f"(calibrate alone would give {k_cal:.3f}); contract and arrivals × k"
    )
    return LiveRunner(upstream, model=model, scale=k, calibrated_scale=k_cal, capacity=mu)
