"""`python -m benchmarks` (`make bench`): every benchmark, one after the other.

Each script measures its baseline in the same run and prints the ratios; this
runner only sequences them (quick sizes by default, ``--full`` for the sizes
quoted in docs/performance.md). Machines here are shared and noisy: compare
within one run, quote medians. The compiled build (docs/performance.md, "Compiled hot paths") is
measured by putting it first: ``PYTHONPATH=build/compiled python -m benchmarks``.

Which build: every script, and every process a script starts (``rvguard serve`` replicas, child
measurements), runs from ``benchmarks/`` with ``PYTHONPATH`` made absolute, so that the
``rvguard`` they import is the one the first line names — never the checkout's sources because the
command was typed at the repository's root (``python -m`` and ``-c`` put the working directory
first on ``sys.path``, ahead of ``PYTHONPATH``: that is how the compiled tree went unmeasured).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def commands(full: bool) -> list[list[str]]:
    """The benchmark scripts and their arguments."""
    monitors = ["--sizes", "1e5,1e6,1e7"] if full else ["--quick"]
    gateway = ["--requests", "300"] if full else ["--requests", "100"]
    path = ["--requests", "300"] if full else ["--requests", "60", "--rounds", "3"]
    return [
        ["bench_verify.py"],
        ["bench_cli.py", *([] if full else ["--reps", "7"])],
        ["bench_enforce.py"],
        ["bench_redline.py", *([] if full else ["--samples", "20000", "--guard-requests", "5000"])],
        ["bench_sim.py"],
        ["bench_monitors.py", *monitors],
        ["bench_rid_memory.py", *([] if full else ["--requests", "50000"])],
        ["bench_gateway.py", *gateway],
        ["bench_gateway_path.py", *path],
        ["bench_fleet.py", *([] if full else ["--arrivals", "2000"])],
        ["bench_dask.py", *(["--events", "2e6", "--partitions", "16"] if full else ["--repeats", "1"])],
    ]


#: which build of the hot paths a process launched as the benchmarks are imports (`rvguard._compiled`)
_BUILD = (
    "import os, rvguard, rvguard.enforce.core, rvguard.monitors.monitor, rvguard.sim.engine;"
    "from rvguard._compiled import build;"
    "print(f'rvguard build: {build()}, from {os.path.dirname(os.path.dirname(rvguard.__file__))}')"
)


def environment() -> dict[str, str]:
    """The environment of every benchmark process: ``PYTHONPATH`` with each entry made absolute (the
    processes run from ``benchmarks/``, where a relative entry would point elsewhere)."""
    env = dict(os.environ)
    entries = [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if entries:
        env["PYTHONPATH"] = os.pathsep.join(entries)
    return env


def run(argv: list[str]) -> int:
    """Run ``argv`` (a benchmark or the build probe) as every benchmark runs: from ``benchmarks/``,
    where no ``rvguard`` package shadows the one ``PYTHONPATH`` or the installation provides."""
    return subprocess.run(argv, check=False, cwd=HERE, env=environment()).returncode


def main() -> int:
    """Run every benchmark (or those named); exit non-zero if any of them failed to run."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--full", action="store_true", help="the documented sizes (minutes, not seconds)")
    parser.add_argument("--build", action="store_true", help="only say which build would be measured")
    parser.add_argument("--only", action="append", default=[], help="run this script only (repeatable)")
    args = parser.parse_args()
    run([sys.executable, "-c", _BUILD])
    if args.build:
        return 0
    failed = []
    for script, *rest in commands(args.full):
        if args.only and script not in args.only and script.removesuffix(".py") not in args.only:
            continue
        print(f"\n=== {script} {' '.join(rest)}", flush=True)
        if run([sys.executable, str(HERE / script), *rest]) != 0:
            failed.append(script)
    if failed:
        print(f"\nfailed to run: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
