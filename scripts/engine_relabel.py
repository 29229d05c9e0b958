"""Label the engine documents' conditions again from their kept traces: ``preconditions`` held or broken.

    .venv/bin/python scripts/engine_relabel.py docs/engine [--check]

Why: a condition's label is what `rvguard.attribution` finds in its runs' traces (the watch's
alerts, the breaks recomputed from the requests, the contract's own preconditions); when that
judgement changes, the runs need not be redone, only judged again. For each ``NAME.json`` with a
``protocol`` block, each condition's runs are read from ``traces/NAME/STEM-repN.jsonl.gz`` beside
``STEM-repN.contract.json``, and ``preconditions``, ``precondition_breaks`` and
``runs_preconditions_broken`` are rewritten, with ``relabelled`` naming this script. ``--check``
changes nothing and exits 1 when a label would change.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rvguard.attribution import Attribution  # noqa: E402
from rvguard.contract import load_contract  # noqa: E402
from rvguard.io import read_events  # noqa: E402
from rvguard.sim.record import breaks_seen  # noqa: E402
from rvguard.study.live import slug  # noqa: E402


def run_breaks(stem: Path) -> dict[str, int]:
    """The breaks of one kept run (its trace judged against its scaled contract)."""
    contract = load_contract(f"{stem}.contract.json")
    evidence = Attribution(contract)
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.jsonl"
        trace.write_bytes(gzip.decompress(Path(f"{stem}.jsonl.gz").read_bytes()))
        for _, ev in read_events(str(trace)):
            if isinstance(ev, Exception):
                raise ev
            evidence.feed(ev)
    return breaks_seen(evidence)


def label(cond: dict[str, Any], traces: Path) -> dict[str, Any]:
    """The condition's label fields from its runs' traces."""
    runs = [run_breaks(traces / f"{slug(cond['params'])}-rep{rep}") for rep in range(cond["reps"])]
    total: dict[str, int] = {}
    for breaks in runs:
        for condition, n in breaks.items():
            total[condition] = total.get(condition, 0) + n
    broken = sum(1 for b in runs if b)
    return {
        "preconditions": "broken" if broken else "held",
        "precondition_breaks": dict(sorted(total.items())),
        "runs_preconditions_broken": broken,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", help="the engine documents' folder (e.g. docs/engine)")
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 when a label would change")
    args = p.parse_args()
    changed = 0
    for path in sorted(Path(args.dir).glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        if "protocol" not in doc:
            continue
        for cond in doc["conditions"]:
            new = label(cond, Path(args.dir) / "traces" / doc["experiment"])
            old = {k: cond.get(k) for k in new}
            if old != new:
                changed += 1
                print(
                    f"{path.name} {cond['params']}: {old['preconditions']} -> {new['preconditions']} "
                    f"{new['precondition_breaks']}"
                )
            cond.update(new)
        if not args.check:
            doc["relabelled"] = "scripts/engine_relabel.py"
            path.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    print(f"{changed} conditions relabelled")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
