"""Gateway configuration: the learner import path, identity from HTTP headers (the keys file:
`rvguard.gateway.keysfile`, re-exported here).

The tenant is bound only from credentials the server can check (DESIGN §4):
``Authorization: Bearer <api key or JWT>``, the key looked up in the keys file,
the JWT verified against the identity provider's JWKS; or (legacy) a tenant
claim signed with the keys file's ``claim_secret`` in the ``X-Rvguard-Claim``
header (`rvguard.enforce.identity.sign_claim`). Every other header and every
body field (``user``, ``tenant``, ...) is ignored for identity.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from typing import Any, cast

from ..contract import Contract
from ..enforce.identity import Identity
from ..enforce.learners import AdmitAll, Learner, RejectAll
from ..errors import SpecError
from .keysfile import KeysConfig, load_keys

__all__ = ["CLAIM_HEADER", "KeysConfig", "identity_from_headers", "load_keys", "resolve_learner"]

CLAIM_HEADER = "x-rvguard-claim"
_BUILTIN_LEARNERS: Mapping[str, type[AdmitAll] | type[RejectAll]] = {
    "admit-all": AdmitAll,
    "reject-all": RejectAll,
}


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
