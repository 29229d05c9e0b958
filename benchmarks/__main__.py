"""`python -m benchmarks` (`make bench`): every benchmark, one after the other.

Each script measures its baseline in the same run and prints the ratios; this
runner only sequences them (quick sizes by default, ``--full`` for the sizes
quoted in docs/performance.md). Machines here are shared and noisy: compare
within one run, quote medians. The compiled build (docs/performance.md, "Compiled hot paths") is
measured by putting it first: ``PYTHONPATH=build/compiled python -m benchmarks``.
"""

from __future__ import annotations

import argparse
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


#: says which build of the hot paths the benchmarks measure (`rvguard._compiled`)
_BUILD = (
    "import rvguard.enforce.core, rvguard.monitors.monitor, rvguard.sim.engine;"
    "from rvguard._compiled import compiled_modules as c;"
    "print('rvguard build:', f'compiled ({len(c())} modules)' if c() else 'pure Python')"
)


def main() -> int:
    """Run every benchmark; exit non-zero if any of them failed to run."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--full", action="store_true", help="the documented sizes (minutes, not seconds)")
    args = parser.parse_args()
    subprocess.run([sys.executable, "-c", _BUILD], check=False)
    failed = []
    for script, *rest in commands(args.full):
        print(f"\n=== {script} {' '.join(rest)}", flush=True)
        code = subprocess.run([sys.executable, str(HERE / script), *rest], check=False).returncode
        if code != 0:
            failed.append(script)
    if failed:
        print(f"\nfailed to run: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
