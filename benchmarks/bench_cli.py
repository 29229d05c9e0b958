"""Wall and CPU time of ``rvguard verify SPEC`` against bare interpreter starts, in the same run.

Run: python benchmarks/bench_cli.py [--reps N]   (aim: ``rvguard verify`` ≤ 150 ms wall, median, issue 30)

The floor no CLI can go under is starting Python and importing what ``verify`` must use:
pydantic (the contract) and z3 (the proof). Each command runs ``--reps`` times, the commands
interleaved round-robin so that load from other processes falls on all of them alike; the
table shows medians of wall time and of the child's own CPU time (user + sys, from wait4),
which the machine's other work disturbs less. The children run with the .pyc files written
(``PYTHONDONTWRITEBYTECODE`` removed from their environment), as an installed wheel runs: with
it set, every run compiles each module it imports from source (≈ 15 ms more for ``verify``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = str(ROOT / "specs" / "marquee.yaml")
TARGET_MS = 150.0


def _rvguard() -> list[str]:
    script = Path(sys.executable).parent / "rvguard"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "rvguard.cli"]


def commands() -> dict[str, list[str]]:
    """The measured commands: two baselines, then the CLI."""
    py = sys.executable
    return {
        "python -c pass": [py, "-c", "pass"],
        "python -c 'import pydantic, z3'": [py, "-c", "import pydantic, z3"],
        # `import pydantic` is lazy: a model needs pydantic's machinery, which this loads
        "... + from pydantic import BaseModel": [py, "-c", "import z3; from pydantic import BaseModel"],
        # what the contract module itself must import: the validators' machinery and YAML
        "... + Field, validators, yaml": [
            py,
            "-c",
            "import z3, yaml; from pydantic import BaseModel, Field, field_validator, model_validator",
        ],
        # building any model's validator imports pydantic's plugin loader (importlib.metadata);
        # plugins off, as the program runs: the floor of a command that validates one model
        "... + one model validated": [
            py,
            "-c",
            "import os; os.environ['PYDANTIC_DISABLE_PLUGINS'] = '__all__'\n"
            "import z3, yaml; from pydantic import BaseModel, Field, field_validator, model_validator\n"
            "class M(BaseModel, frozen=True):\n    x: int = Field(ge=0)\nM(x=1)",
        ],
        "... + import rvguard.contract": [py, "-c", "import z3, rvguard.contract"],
        "rvguard --help": [*_rvguard(), "--help"],
        "rvguard verify marquee.yaml": [*_rvguard(), "verify", SPEC],
    }


def once(argv: list[str]) -> tuple[float, float]:
    """(wall s, child CPU s) of one run; output discarded."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{argv} exited {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def measure(reps: int) -> dict[str, tuple[float, float]]:
    """Median (wall ms, CPU ms) per command, runs interleaved."""
    cmds = commands()
    for argv in cmds.values():  # warm the page cache and the .pyc files
        once(argv)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in cmds}
    for _ in range(reps):
        for name, argv in cmds.items():
            samples[name].append(once(argv))
    return {
        name: (1000 * statistics.median(w for w, _ in s), 1000 * statistics.median(c for _, c in s))
        for name, s in samples.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args()
    result = measure(args.reps)
    floor_wall, floor_cpu = result["python -c 'import pydantic, z3'"]
    print(f"{'command':34} {'wall ms':>8} {'cpu ms':>8} {'wall / floor':>13}   (medians of {args.reps})")
    for name, (wall, cpu) in result.items():
        print(f"{name:34} {wall:8.0f} {cpu:8.0f} {wall / floor_wall:12.2f}×")
    wall, cpu = result["rvguard verify marquee.yaml"]
    print(
        f"verify: {wall:.0f} ms wall ({'met' if wall <= TARGET_MS else 'missed'} ≤ {TARGET_MS:.0f} ms), "
        f"{cpu:.0f} ms CPU ({'met' if cpu <= TARGET_MS else 'missed'}; one thread that never waits: "
        f"its wall time on an idle machine); {wall - floor_wall:+.0f} ms wall, "
        f"{cpu - floor_cpu:+.0f} ms CPU over the floor"
    )


if __name__ == "__main__":
    main()
