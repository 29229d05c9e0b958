"""Keys file, identity from headers, learner import paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from rvguard.enforce.learners import AdmitAll, RejectAll
from rvguard.errors import SpecError
from rvguard.gateway.config import identity_from_headers, load_keys, resolve_learner

from ._support import RejectAssured, contract


def test_keys_file_round_trip(tmp_path: Path) -> None:
    p = tmp_path / "keys.yaml"
    p.write_text(
        "keys: {k1: assured, k2: opportunistic}\nclaim_secret: 0123456789abcdefXYZ\nunauthenticated: reject\n"
    )
    cfg = load_keys(p)
    assert cfg.keys == {"k1": "assured", "k2": "opportunistic"}
    assert cfg.claim_secret == b"0123456789abcdefXYZ" and cfg.unauthenticated == "reject"
    binder = cfg.binder(contract())
    assert binder.bind(identity_from_headers({"authorization": "Bearer k1"})).tenant == "assured"
    assert binder.bind(identity_from_headers({})).tenant is None


@pytest.mark.parametrize(
    "text",
    [
        "[1, 2]",
        "keys: {k1: assured}\nextra: 1\n",
        "keys: {k1: 3}\n",
        "claim_secret: short\n",
        "unauthenticated: maybe\n",
        "keys: {k1: nobody}\n",
        "keys: [unclosed\n",
        "keys: " + "[" * 50_000 + "]" * 50_000 + "\n",  # issue 10 item 6: was a RecursionError
        "keys: {k1: assured}\nkeys: {k2: assured}\n",  # a key twice: refused, not the last kept
        b"\xff\xfe binary",  # was a UnicodeDecodeError
    ],
)
def test_bad_keys_files_are_spec_errors(tmp_path: Path, text: str | bytes) -> None:
    p = tmp_path / "keys.yaml"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(SpecError):
        load_keys(p).binder(contract())


def test_missing_keys_file() -> None:
    with pytest.raises(SpecError, match="cannot read"):
        load_keys("/nonexistent/keys.yaml")


@pytest.mark.parametrize(
    ("headers", "key", "claim"),
    [
        ({"authorization": "Bearer abc"}, "abc", None),
        ({"authorization": "bearer   abc  "}, "abc", None),
        ({"authorization": "Basic abc"}, None, None),
        ({"authorization": "Bearer "}, None, None),
        ({"x-rvguard-claim": "c.s", "x-tenant": "assured"}, None, "c.s"),
    ],
)
def test_identity_only_from_bearer_and_claim(
    headers: dict[str, str], key: str | None, claim: str | None
) -> None:
    ident = identity_from_headers(headers)
    assert (ident.api_key, ident.claim) == (key, claim)


def test_resolve_learner_builtins_and_import_paths() -> None:
    c = contract()
    assert isinstance(resolve_learner(None, c), AdmitAll)
    assert isinstance(resolve_learner("reject-all", c), RejectAll)
    assert isinstance(resolve_learner("rvguard.enforce.learners:AdmitAll", c), AdmitAll)
    learner = resolve_learner("tests.gateway._support:RejectAssured", c)  # takes contract=
    assert isinstance(learner, RejectAssured)


@pytest.mark.parametrize("spec", ["nocolon", "rvguard.nope:X", "rvguard.enforce.learners:Nope", "json:dumps"])
def test_resolve_learner_errors(spec: str) -> None:
    with pytest.raises(SpecError):
        resolve_learner(spec, contract())
