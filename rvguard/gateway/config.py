"""Gateway configuration: the keys file, the learner import path, identity from HTTP headers.

The tenant is bound only from credentials the server can check (DESIGN §4):
``Authorization: Bearer <api key>`` looked up in the keys file, or a tenant
claim signed with the keys file's ``claim_secret`` in the ``X-Rvguard-Claim``
header (`rvguard.enforce.identity.sign_claim`). Every other header and every
body field (``user``, ``tenant``, ...) is ignored for identity.

Keys file (YAML or JSON)::

    keys:                      # API key -> tenant
      sk-assured-1: assured
      sk-opp-1: opportunistic
    claim_secret: "a long random string"   # optional; claims are refused without it
    unauthenticated: reject                # the default; lowest-tier serves anonymous traffic
                                           # as the lowest-tier unfloored tenant (warned at start-up)
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from ..contract import Contract
from ..enforce.identity import Identity, IdentityBinder, Unauthenticated
from ..enforce.learners import AdmitAll, Learner, RejectAll
from ..errors import SpecError

__all__ = ["CLAIM_HEADER", "KeysConfig", "identity_from_headers", "load_keys", "resolve_learner"]

CLAIM_HEADER = "x-rvguard-claim"
_BUILTIN_LEARNERS: Mapping[str, type[AdmitAll] | type[RejectAll]] = {
    "admit-all": AdmitAll,
    "reject-all": RejectAll,
}


@dataclass(frozen=True)
class KeysConfig:
    """API keys, the claim secret and the policy for requests without valid credentials."""

    keys: Mapping[str, str] = field(default_factory=dict)
    claim_secret: bytes | None = None
    unauthenticated: Unauthenticated = "reject"

    def binder(self, contract: Contract) -> IdentityBinder:
        """The identity binder these settings describe."""
        try:
            return IdentityBinder(
                contract, api_keys=self.keys, secret=self.claim_secret, unauthenticated=self.unauthenticated
            )
        except ValueError as err:
            raise SpecError(f"keys file: {err}", field="keys") from None


def _parse_keys(data: Any, source: str) -> KeysConfig:
    if not isinstance(data, Mapping):
        raise SpecError(f"{source}: a keys file holds a mapping", field="keys", value=data)
    unknown = sorted(set(data) - {"keys", "claim_secret", "unauthenticated"})
    if unknown:
        raise SpecError(f"{source}: unknown fields {unknown}", field=str(unknown[0]))
    keys = data.get("keys") or {}
    if not isinstance(keys, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in keys.items()
    ):
        raise SpecError(f"{source}: 'keys' maps API keys (strings) to tenant names", field="keys")
    secret = data.get("claim_secret")
    if secret is not None and (not isinstance(secret, str) or len(secret) < 16):
        raise SpecError(
            f"{source}: 'claim_secret' must be a string of at least 16 characters", field="claim_secret"
        )
    policy = data.get("unauthenticated", "reject")
    if policy not in ("reject", "lowest-tier"):
        raise SpecError(
            f"{source}: 'unauthenticated' is reject or lowest-tier", field="unauthenticated", value=policy
        )
    return KeysConfig(
        keys=dict(keys),
        claim_secret=None if secret is None else secret.encode(),
        unauthenticated=cast(Unauthenticated, policy),
    )


def load_keys(path: str | Path) -> KeysConfig:
    """Read a keys file (YAML or JSON; see module doc).

    Raises:
        SpecError: unreadable file, unknown field, bad key map or secret.
    """
    import yaml

    from ..bounds import MAX_SPEC_BYTES
    from ..untrusted import load_yaml, read_text

    try:  # a contract file's rules: bounded size, UTF-8, depth, aliases, no key twice
        data = load_yaml(read_text(Path(path), limit=MAX_SPEC_BYTES))
    except (OSError, ValueError, yaml.YAMLError) as err:
        raise SpecError(f"{path}: cannot read keys file: {err}", field="keys") from None
    return _parse_keys(data, str(path))


def identity_from_headers(headers: Mapping[str, str]) -> Identity:
    """The credentials a request presents: a Bearer key and/or a signed claim, nothing else."""
    auth = headers.get("authorization", "")
    scheme, _, token = auth.partition(" ")
    api_key = token.strip() if scheme.lower() == "bearer" and token.strip() else None
    claim = headers.get(CLAIM_HEADER) or None
    return Identity(api_key=api_key, claim=claim)


def resolve_learner(spec: str | None, contract: Contract) -> Learner:
    """The learner named by ``spec``: ``admit-all``, ``reject-all`` or ``package.module:Name``.

    ``Name`` may be an instance (used as is) or a class/factory, called with
    ``contract=`` when it takes that keyword, else with no arguments.

    Raises:
        SpecError: the import fails or the object has no ``propose``.
    """
    if spec is None or spec in _BUILTIN_LEARNERS:
        return _BUILTIN_LEARNERS[spec or "admit-all"]()
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise SpecError(f"learner must be 'module:Name', got {spec!r}", field="learner", value=spec)
    try:
        target: Any = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as err:
        raise SpecError(f"cannot import learner {spec!r}: {err}", field="learner", value=spec) from None
    if callable(target) and (not hasattr(target, "propose") or inspect.isclass(target)):
        try:
            takes_contract = "contract" in inspect.signature(target).parameters
            target = target(contract=contract) if takes_contract else target()
        except (TypeError, ValueError) as err:
            raise SpecError(f"cannot build learner {spec!r}: {err}", field="learner", value=spec) from None
    if not callable(getattr(target, "propose", None)):
        raise SpecError(f"learner {spec!r} has no propose(request, view)", field="learner", value=spec)
    return cast(Learner, target)
