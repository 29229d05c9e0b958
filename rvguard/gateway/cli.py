"""``rvguard serve`` and ``rvguard calibrate``: thin drivers over `Gateway` and `calibrate`.

Declared in `rvguard.gateway.commands`; `Serve` and `Calibrate` follow the CLI's plugin
protocol. Bad input (a bad contract or keys file, a port that cannot be served, an
unreachable upstream for ``calibrate``) is raised and mapped to exit 2 by `rvguard.cli`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..contract import Contract

__all__ = ["UPSTREAM_KEY_ENV", "Calibrate", "Serve", "run_calibrate", "run_serve"]

#: where ``serve`` reads the upstream's API key by default (a key never goes on the command line)
UPSTREAM_KEY_ENV = "RVGUARD_UPSTREAM_API_KEY"
REDIS_PASSWORD_ENV = "RVGUARD_REDIS_PASSWORD"
REDIS_USERNAME_ENV = "RVGUARD_REDIS_USERNAME"
_LEVELS = ["critical", "error", "warning", "info", "debug"]


def _add_serve(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="contract file (.yaml or .json)")
    p.add_argument(
        "--upstream",
        required=True,
        action="append",
        metavar="[NAME=]URL",
        help="OpenAI-compatible server, e.g. http://127.0.0.1:8000; repeat for several engines "
        "(routed by power-of-two-choices on headroom)",
    )
    _add_fleet(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port to listen on (default 8080)")
    _add_trace(p)
    _add_identity(p)
    p.add_argument("--learner", help="admit-all | reject-all | package.module:Name (default admit-all)")
    p.add_argument(
        "--learner-timeout",
        type=float,
        default=0.1,
        help="seconds the learner may take to answer (default 0.1); late: the surplus is rejected",
    )
    p.add_argument("--timeout", type=float, default=120.0, help="seconds one upstream call may take")
    p.add_argument("--read-timeout", type=float, default=60.0, help="seconds the upstream may stay silent")
    p.add_argument("--deferred-drop", action="store_true", help="drop doomed requests at dispatch (503)")
    p.add_argument(
        "--no-priority",
        action="store_true",
        help="send no vLLM priority (an engine without --scheduling-policy priority refuses any); "
        "the gateway still dispatches by tier, at most C at a time",
    )
    p.add_argument("--max-body", type=int, default=4 << 20, help="largest request body in bytes (413 above)")
    p.add_argument("--header-timeout", type=float, default=10.0, help="seconds a request's headers may take")
    p.add_argument("--body-timeout", type=float, default=30.0, help="seconds a request's body may take (408)")
    _add_upstream_health(p)
    p.add_argument(
        "--upstream-key-env",
        metavar="VAR",
        help=f"environment variable holding the upstream's API key (default {UPSTREAM_KEY_ENV}, if set)",
    )
    _add_headroom(p)
    p.add_argument("--log-format", choices=["text", "json"], default="text", help="one line per event")
    p.add_argument("--log-level", choices=_LEVELS, default="info", help="log level (default info)")
    _add_watch(p)


def _add_upstream_health(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--upstream-health",
        metavar="PATH",
        default="/v1/models",
        help="path each probe GETs (200: healthy) before the model list: /health for vLLM, whose "
        "/v1/models answers while its engine is dead (default /v1/models: nothing more; not /health "
        "for a LiteLLM proxy, which then calls every model)",
    )
    p.add_argument(
        "--eject-after",
        type=int,
        default=3,
        metavar="N",
        help="failed requests (5xx, transport) in a row that take an upstream out (default 3; 0: never)",
    )
    p.add_argument(
        "--eject-for",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="seconds an ejected upstream stays out before it is tried again (default 10; "
        "doubled after each failed try)",
    )


def _upstream_health(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "upstream_health": args.upstream_health,
        "eject_after": args.eject_after,
        "eject_for": args.eject_for,
    }


def _add_headroom(p: argparse.ArgumentParser) -> None:
    """The redline's and rationed relief's options of ``rvguard serve``."""
    p.add_argument(
        "--headroom",
        nargs="?",
        const="",
        metavar="URL",
        help="run the physical redline (the contract's headroom block) on the engine's /metrics "
        "(default URL: the upstream's /metrics)",
    )
    p.add_argument(
        "--headroom-interval", type=float, default=1.0, help="seconds between two scrapes (default 1)"
    )
    p.add_argument(
        "--relief-capacity",
        type=int,
        metavar="TOKENS",
        help="ration relief (needs --headroom): the KV cache's size in tokens; past the hard floor only "
        "the fewest surplus requests are preempted, held ones come back as the headroom allows "
        "(default: the size vLLM states in vllm:cache_config_info, when it does)",
    )
    p.add_argument(
        "--hold-bound",
        type=float,
        default=10.0,
        help="with --relief-capacity: seconds a request may stay held",
    )
    p.add_argument(
        "--bare-preemption",
        action="store_true",
        help="never ration (needs --headroom): past the hard floor preempt every running surplus "
        "request and restore every held one at once, even when the engine states its cache's size",
    )


def _add_watch(p: argparse.ArgumentParser) -> None:
    """The assumption watch's options of ``rvguard serve`` (the watch itself always runs)."""
    p.add_argument(
        "--alert-log",
        metavar="PATH",
        help="also append the assumption watch's alerts to PATH as JSON lines (`rvguard review TRACE "
        "PATH`); the watch always runs and writes its alerts to the trace and the log",
    )
    p.add_argument(
        "--degrade",
        type=float,
        metavar="F",
        help="while the watch fires, lower every floor to F × B (0 ≤ F ≤ 1; default: the contract's "
        "'degrade', else never lowered); the lowering is recorded in the trace",
    )
    p.add_argument(
        "--property",
        action="append",
        metavar="FILE",
        help="your property tables, enforced live: an admission one would break is refused (429, "
        "'property: NAME'), a dispatch kept queued; repeatable",
    )
    p.add_argument(
        "--shadow",
        action="store_true",
        help="run the --property tables in shadow only: alerts, never refusals",
    )


def _add_identity(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--keys",
        help="keys file: API keys → tenants, an identity provider's JWKS (YAML or JSON); reloaded on SIGHUP",
    )
    p.add_argument(
        "--metrics-auth", action="store_true", help="/metrics asks for a key or token as the API does"
    )
    p.add_argument(
        "--metrics-hide-tenants",
        action="store_true",
        help="label /metrics series tenant0, tenant1, ... (the contract's order), not by tenant name",
    )


def _add_trace(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--trace",
        help="write the Guard's events to this JSONL file (on a restart: its next segment, NAME.1.jsonl, …)",
    )
    p.add_argument(
        "--trace-max-bytes",
        type=int,
        metavar="N",
        help="go on in the trace's next segment once a file holds N bytes (default: never)",
    )


def _watch(args: argparse.Namespace, contract: Contract) -> Any:
    """The assumption watch (always on): ``--degrade`` (else the contract's), ``--alert-log``."""
    from ..enforce.alertlog import AlertLog
    from ..enforce.watch import WatchConfig
    from ..errors import SpecError

    degrade = getattr(args, "degrade", None)
    degrade = contract.degrade if degrade is None else degrade
    if degrade is not None and not 0.0 <= degrade <= 1.0:
        raise SpecError(f"--degrade must be in [0, 1], got {degrade}", field="degrade", value=degrade)
    log = getattr(args, "alert_log", None)
    return WatchConfig(on_alert=AlertLog(log) if log else None, degrade=degrade)


def _properties(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--property`` tables (enforced, or in shadow with ``--shadow``), or nothing."""
    from ..properties.commands import load_tables

    if not getattr(args, "property", None):
        return {}
    return {"properties": tuple(load_tables(args.property)), "shadow": bool(getattr(args, "shadow", False))}


def _headroom(args: argparse.Namespace, contract: Contract) -> dict[str, Any]:
    """The redline settings from ``--headroom`` and the contract's headroom block."""
    from ..enforce.eviction import eviction_config
    from ..enforce.redline import redline_config
    from ..errors import SpecError

    if args.headroom is None:
        if getattr(args, "relief_capacity", None) is not None or getattr(args, "bare_preemption", False):
            raise SpecError("--relief-capacity or --bare-preemption needs --headroom", field="relief")
        return {}
    block = contract.headroom
    if block is None:
        raise SpecError("--headroom needs a headroom block in the contract (its limits)", field="headroom")
    upstreams = [args.upstream] if isinstance(args.upstream, str) else list(args.upstream)
    if not args.headroom and len(upstreams) != 1:
        raise SpecError("--headroom guards one engine: give its /metrics URL", field="headroom")
    url = args.headroom or upstreams[0].split("=", 1)[-1].rstrip("/") + "/metrics"
    return {
        "redline": redline_config(block),
        "headroom_url": url,
        "headroom_interval": args.headroom_interval,
        "eviction": eviction_config(contract.eviction),
        "relief": _relief(args),
        "bare_preemption": bool(getattr(args, "bare_preemption", False)),
    }


def _relief(args: argparse.Namespace) -> Any:
    """``--relief-capacity`` and ``--hold-bound`` as a `ReliefConfig` (``None`` without the first)."""
    from ..enforce.rationing import ReliefConfig

    capacity = getattr(args, "relief_capacity", None)
    return None if capacity is None else ReliefConfig(capacity, hold_bound=args.hold_bound)


def _add_fleet(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--engine-slots",
        action="append",
        default=[],
        metavar="NAME=N",
        help="C_e of one engine (default: the contract's fleet block's, else its C); NAME is the "
        "engine's (its host:port unless given as NAME=URL)",
    )
    p.add_argument(
        "--staleness",
        type=float,
        help="seconds an engine's view may age (siloed after; default: the contract's fleet block's, else 2)",
    )
    p.add_argument("--telemetry-interval", type=float, default=0.5, help="seconds between /metrics scrapes")
    p.add_argument("--route-seed", type=int, help="seed of the router's random choices (reproducible runs)")
    p.add_argument("--relocations", type=int, default=2, help="k: requests relocated at once (0: none)")
    p.add_argument(
        "--credits", metavar="redis://HOST:PORT/DB", help="share floor credits with other replicas"
    )
    p.add_argument(
        "--replica", metavar="NAME", help="this replica's id (namespaces rids; needed with --credits)"
    )
    p.add_argument(
        "--share",
        action="append",
        default=[],
        metavar="F|NAME=F",
        help="static shares of each floor while Redis is away: F for this replica (the others "
        "then hold at most 1-F together), or NAME=F for every replica; they sum to at most 1",
    )
    p.add_argument(
        "--credit-timeout", type=float, default=0.25, help="seconds a Redis call may take (default 0.25)"
    )
    p.add_argument(
        "--credits-password-file",
        metavar="PATH",
        help=f"file holding the Redis password (else ${REDIS_PASSWORD_ENV}; never in the URL)",
    )


def _pairs(items: list[str], option: str) -> dict[str, str]:
    from ..errors import SpecError

    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.rpartition("=")
        if not sep or not name:
            raise SpecError(f"{option} wants NAME=VALUE, got {item!r}", field=option.lstrip("-"))
        out[name] = value
    return out


def _number(text: str, option: str, kind: type[int] | type[float]) -> float:
    from ..errors import SpecError

    try:
        return kind(text)
    except ValueError:
        raise SpecError(f"{option}: not a number: {text!r}", field=option.lstrip("-"), value=text) from None


def _engine_slots(args: argparse.Namespace) -> dict[str, int]:
    return {
        k: int(_number(v, "--engine-slots", int))
        for k, v in _pairs(args.engine_slots, "--engine-slots").items()
    }


def _fleet_slots(contract: Any, args: argparse.Namespace) -> dict[str, int]:
    """C_e per engine: the contract's fleet block for the engines served, ``--engine-slots`` over it."""
    from .settings import engine_names

    block = contract.fleet.engines if contract.fleet else {}
    served = {name for name, _ in engine_names(tuple(args.upstream))}
    others = sorted(set(block) - served)
    if others:  # a contract may describe the whole fleet; a typo must not pass unseen either
        logging.getLogger("rvguard.gateway").warning(
            "the contract's fleet.engines names engines this gateway does not serve: %s (serving: %s)",
            ", ".join(others),
            ", ".join(sorted(served)),
            extra={"event": "fleet_engines_unserved", "engines": others},
        )
    return {**{k: n for k, n in block.items() if k in served}, **_engine_slots(args)}


def _staleness(contract: Any, args: argparse.Namespace) -> float:
    """``--staleness``, else the contract's fleet block's, else 2 s."""
    if args.staleness is not None:
        return float(args.staleness)
    return float(contract.fleet.staleness) if contract.fleet else 2.0


def _credits(args: argparse.Namespace) -> Any:
    """The pool's configuration from ``--credits``, ``--replica`` and ``--share``, or None."""
    from pydantic import ValidationError

    from ..errors import SpecError
    from ..fleet.credits import CreditsConfig

    if args.credits is None:
        if args.share:
            raise SpecError("--share needs --credits", field="share")
        return None
    if not args.replica:
        raise SpecError("--credits needs --replica NAME (it namespaces this replica's rids)", field="replica")
    bare = [s for s in args.share if "=" not in s]
    shares = {
        k: _number(v, "--share", float)
        for k, v in _pairs([s for s in args.share if "=" in s], "--share").items()
    }
    if len(bare) > 1 or (bare and args.replica in shares):
        raise SpecError("--share: give this replica's share once", field="share")
    if bare:
        own = _number(bare[0], "--share", float)
        shares[args.replica] = own
        if len(shares) == 1:  # the others hold the rest: the pool keeps all of it aside until they join
            shares["_rest"] = max(1.0 - own, 0.0)
    try:
        username, password = _redis_secrets(args.credits, args)
        return CreditsConfig(
            url=args.credits,
            replica=args.replica,
            shares=shares,
            timeout=args.credit_timeout,
            username=username,
            password=password,
        )
    except ValidationError as err:
        raise SpecError(f"--credits/--share: {err.errors()[0]['msg']}", field="credits") from None


def _redis_secrets(url: str, args: argparse.Namespace) -> tuple[str | None, str | None]:
    """The Redis user and password: from the environment or a file, never from the command line."""
    import os
    from pathlib import Path
    from urllib.parse import urlsplit

    from ..errors import SpecError

    parts = urlsplit(url)
    if parts.password:
        raise SpecError(
            f"--credits: a password in the URL shows in `ps` and in logs; put it in ${REDIS_PASSWORD_ENV} "
            "or a file named by --credits-password-file",
            field="credits",
        )
    password = os.environ.get(REDIS_PASSWORD_ENV) or None
    if args.credits_password_file:
        try:
            password = Path(args.credits_password_file).read_text(encoding="utf-8").strip() or None
        except OSError as err:
            raise SpecError(
                f"--credits-password-file: {err.strerror}", field="credits_password_file"
            ) from None
    return parts.username or os.environ.get(REDIS_USERNAME_ENV) or None, password


def _upstream_key(var: str | None) -> str | None:
    """The upstream API key from the environment; a variable named with ``--upstream-key-env`` must be set."""
    import os

    from ..errors import SpecError

    if var is None:
        return os.environ.get(UPSTREAM_KEY_ENV) or None
    if not os.environ.get(var):
        raise SpecError(
            f"--upstream-key-env: the environment variable {var} is not set", field="upstream_key_env"
        )
    return os.environ[var]


def _add_calibrate(c: argparse.ArgumentParser) -> None:
    c.add_argument("--upstream", required=True, help="OpenAI-compatible server, e.g. http://127.0.0.1:8000")
    c.add_argument("--model", help="model name (default: the first the upstream lists)")
    c.add_argument("--slots", type=int, default=4, help="C: the batch size to measure besides 1")
    c.add_argument("--lengths", default="1,8,16,32", help="output lengths ℓ to measure (comma-separated)")
    c.add_argument("--reps", type=int, default=5, help="batches per (batch size, length)")
    c.add_argument("--output-cap", type=int, default=48, help="ℓ at which to state s_max")
    c.add_argument("--prompt", default="Calibrate the service envelope.", help="prompt text")
    c.add_argument("--out", help="write the suggestion as YAML here")
    c.add_argument("--json", action="store_true", help="print the full result as JSON")


def _records(args: argparse.Namespace) -> dict[str, Any]:
    """What the gateway records and shows: the trace (and its rotation), /metrics' access and labels."""
    return {
        "trace": args.trace,
        "trace_max_bytes": args.trace_max_bytes,
        "metrics_auth": args.metrics_auth,
        "metrics_tenant_names": not args.metrics_hide_tenants,
    }


def run_serve(args: argparse.Namespace) -> bool:
    """Serve until interrupted; True on a clean stop."""
    from ..contract import load_contract
    from ..errors import SpecError
    from .app import Gateway, GatewaySettings
    from .config import KeysConfig, load_keys, resolve_learner
    from .logs import configure
    from .server import uvicorn_config

    configure(args.log_format, args.log_level)
    contract = load_contract(args.spec)
    if not 0 <= args.port <= 65535:
        raise SpecError(f"--port must be in 0..65535, got {args.port}", field="port", value=args.port)
    settings = GatewaySettings(
        upstream=tuple(args.upstream),
        engine_slots=_fleet_slots(contract, args),
        staleness=_staleness(contract, args),
        telemetry_interval=args.telemetry_interval,
        route_seed=args.route_seed,
        relocations=args.relocations,
        credits=_credits(args),
        replica=args.replica,
        keys=load_keys(args.keys) if args.keys else KeysConfig(),
        learner=resolve_learner(args.learner, contract),
        learner_timeout=args.learner_timeout,
        **_records(args),
        timeout=args.timeout,
        read_timeout=args.read_timeout,
        deferred_drop=args.deferred_drop,
        send_priority=not args.no_priority,
        upstream_api_key=_upstream_key(args.upstream_key_env),
        max_body=args.max_body,
        header_timeout=args.header_timeout,
        body_timeout=args.body_timeout,
        watch=_watch(args, contract),
        **_headroom(args, contract) | _properties(args) | _upstream_health(args),
    )
    gateway = Gateway(contract, settings)
    engines = ", ".join(url for _, url in settings.engines)
    print(f"rvguard serve: http://{args.host}:{args.port} → {engines}", file=sys.stderr)
    config = uvicorn_config(
        gateway.app,
        host=args.host,
        port=args.port,
        header_timeout=args.header_timeout,
        log_level=args.log_level,
    )
    return _run_uvicorn(config, args)


def _run_uvicorn(config: Any, args: argparse.Namespace) -> bool:
    """Serve until a signal; uvicorn's own start failure (it has logged why) is exit 2."""
    import uvicorn

    from ..errors import SpecError
    from .server import stop_signals

    with stop_signals() as received:
        try:
            uvicorn.Server(config).run()
        except SystemExit as stop:  # uvicorn exits 3 when it cannot start (e.g. port in use)
            if stop.code not in (0, None):
                raise SpecError(
                    f"could not serve on {args.host}:{args.port} (see above)", field="port", value=args.port
                ) from None
    if received:
        print(f"rvguard serve: stopped ({received[0]})", file=sys.stderr)
    return True


def run_calibrate(args: argparse.Namespace) -> bool:
    """Measure, print the suggestion (or JSON), optionally write it as YAML; True once done."""
    from ..errors import SpecError
    from .calibrate import calibrate

    try:
        lengths = sorted({int(x) for x in args.lengths.split(",") if x.strip()})
    except ValueError:
        raise SpecError(
            f"--lengths must be integers, got {args.lengths!r}", field="lengths", value=args.lengths
        ) from None
    result = asyncio.run(
        calibrate(
            args.upstream,
            model=args.model,
            slots=args.slots,
            lengths=lengths,
            reps=args.reps,
            output_cap=args.output_cap,
            prompt=args.prompt,
            api_key=_upstream_key(None),
        )
    )
    text = result.to_yaml()
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    print(json.dumps(result.to_dict(), indent=2) if args.json else text)
    return True


class Serve:
    """``rvguard serve``: the guarded gateway until interrupted."""

    add_arguments = staticmethod(_add_serve)
    run = staticmethod(run_serve)


class Calibrate:
    """``rvguard calibrate``: measure an upstream and suggest a service envelope."""

    add_arguments = staticmethod(_add_calibrate)
    run = staticmethod(run_calibrate)
