"""``rvguard init [DIR] [--examples] [--force]``: a commented starter contract and keys file.

The starter contract is inside the proven region (``rvguard verify`` holds, with and without
the backlog assumption), so a first run shows what holding looks like; the keys file carries
fresh random API keys and claim secret (``secrets``), and refuses anonymous traffic.
``--examples`` also copies the example contracts rvguard ships (``specs/``), so the README's
commands run in any directory. Nothing is overwritten without ``--force``.
"""

from __future__ import annotations

import argparse
import os
import secrets
import tempfile
from pathlib import Path

from ..errors import SpecError

__all__ = ["CONTRACT", "KEYS", "add_arguments", "run"]

CONTRACT = """\
# An assured-SLO contract (rvguard; its fields: docs/contract.md).
# Check it with `rvguard verify contract.yaml`; its JSON Schema is `rvguard schema`.
# Start: one floored tenant (2 requests a second are always admitted, each served within
# 2 s when the envelope below holds) and one opportunistic tenant for the rest.
# A4 stability 2·0.66 ≤ 4·1; deadline: a request can queue behind the floors of the 3
# windows that its 2 s reach (6 requests): 0.66 + ⌈6/4⌉·0.66 = 1.98 ≤ 2.0.
epoch: 0.0            # t0: windows are [t0 + kW, t0 + (k+1)W), seconds
window: 1.0           # W, seconds
slots: 4              # C: sequences the backend runs at once (vLLM --max-num-seqs)
output_cap: 48        # max output tokens forced on every request
excess: reject        # an assured arrival beyond its floor: reject | demote (opportunistic rank)
credit: count         # count (a request is one credit) | tokens (weighted tokens)
service:              # the service envelope, seconds (measure it: `rvguard calibrate`)
  s_max: 0.66         # ceiling of an assured request's service
  s_max_opp: 0.66     # ceiling of an opportunistic one's
  lower: 0.236        # L, never above the true service: a number or {base: 0.183, per_token: 0.0149}
  upper: null         # U, optional, same forms (for the no-doomed-dispatch property ND)
tenants:              # name: floor B per window (0 = none), relative deadline D (s), tier (0 first)
  assured:       {floor: 2, deadline: 2.0, tier: 0}
  opportunistic: {floor: 0, deadline: 4.0, tier: 1}
"""

KEYS = """\
# API keys of `rvguard serve --keys keys.yaml` (keep this file secret).
# A request's tenant comes only from here: `Authorization: Bearer <key>`, or a JWT of your
# identity provider (add a `jwt:` block: docs/gateway.md). claim_secret signs the legacy
# X-Rvguard-Claim header, which no identity provider issues. Fresh random values: replace freely.
keys:                           # API key -> tenant (a tenant of the contract)
  {assured}: assured
  {opportunistic}: opportunistic
claim_secret: "{secret}"
unauthenticated: reject         # a request without a valid key: reject | lowest-tier
"""

EXAMPLES = ("marquee.yaml", "two_tenants.yaml", "trace.schema.json")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``rvguard init``."""
    p.add_argument("dir", nargs="?", default=".", help="where to write (default: here)")
    p.add_argument("--examples", action="store_true", help="also copy the example contracts to DIR/specs/")
    p.add_argument("--force", action="store_true", help="overwrite files that exist")


def _keys() -> str:
    token = secrets.token_urlsafe
    return KEYS.format(assured=f"sk-{token(18)}", opportunistic=f"sk-{token(18)}", secret=token(32))


def run(args: argparse.Namespace) -> bool:
    """Write the files all or none: each to a temporary file beside it, then renamed into place.

    An existing path stops everything unless ``--force`` (a dangling symlink counts: ``lexists``),
    and a rename replaces a symlink itself, never the file it points to; a ``specs`` that is a
    symlink stops everything, ``--force`` too (its files would land where it points). ``keys.yaml``
    holds the secrets, so it is created 0600 from its first byte. A failure removes the temporary
    files and the directories made for them.
    """
    from ..data import SPECS

    root = Path(args.dir)
    plan: dict[Path, str | Path] = {root / "contract.yaml": CONTRACT, root / "keys.yaml": _keys()}
    if args.examples:
        plan |= {root / "specs" / name: SPECS / name for name in EXAMPLES}
    for d in {p.parent for p in plan}:
        if d != root and d.is_symlink():  # specs/: a link is never written through, even with --force
            why = f"{d}: is a symbolic link; init never writes through one"
            raise SpecError(why, field="dir", value=str(d))
    existing = [p for p in plan if os.path.lexists(p)]
    if existing and not args.force:
        names = ", ".join(map(str, existing))
        raise SpecError(f"{names}: exists; --force overwrites", field="dir", value=str(existing[0]))
    for p in existing:
        if p.is_dir() and not p.is_symlink():
            raise SpecError(f"{p}: is a directory; init writes files only", field="dir", value=str(p))
    staged = _stage(plan, secret={root / "keys.yaml"})
    _commit(staged)
    for target in plan:
        print(f"wrote {target}")
    print(f"next: rvguard verify {root / 'contract.yaml'}")
    return True


def _stage(plan: dict[Path, str | Path], secret: set[Path]) -> list[tuple[Path, Path]]:
    """Each file's content in a fresh temporary file in its target's directory (same filesystem)."""
    staged: list[tuple[Path, Path]] = []
    made: list[Path] = []  # directories this call created, outermost first
    try:
        for target, source in plan.items():
            made += _mkdirs(target.parent)
            fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
            staged.append((Path(name), target))
            os.fchmod(fd, 0o600 if target in secret else 0o644)
            data = source.read_bytes() if isinstance(source, Path) else source.encode("utf-8")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
    except BaseException:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        for d in reversed(made):
            d.rmdir()
        raise
    return staged


def _mkdirs(d: Path) -> list[Path]:
    """Create ``d`` and its missing parents; the ones created, outermost first."""
    missing = [p for p in (d, *d.parents) if not os.path.lexists(p)][::-1]
    d.mkdir(parents=True, exist_ok=True)
    return missing


def _commit(staged: list[tuple[Path, Path]]) -> None:
    """Rename every staged file into place; a failed rename removes the temporaries left."""
    try:
        for tmp, target in staged:
            os.replace(tmp, target)
    finally:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
