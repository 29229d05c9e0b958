"""Identity binding: the true tenant is fixed from authenticated identity, before any learner.

The floor is keyed on the tenant, so the tenant must come from something the
client cannot forge: an API key from a server-side map, or an HMAC-signed
tenant claim with an expiry. A missing, unknown, forged, tampered or
expired credential never yields a floored tenant: it is either rejected or
bound to the contract's lowest-tier *unfloored* tenant (``unauthenticated``
policy). A learner's ``objective`` never reaches this layer.

A bearer that is no known key may be a JWT from an identity provider: the
binder hands it to its ``token_verifier`` (`rvguard.gateway.keysfile.JwtVerifier`,
PyJWT against a JWKS), which returns the tenant it names or raises.

Legacy claim format (rvguard's own, kept for deployments that use it):
``base64url(json {"tenant", "exp"}) "." base64url(HMAC-SHA256)``,
compared with `hmac.compare_digest`. ``exp`` is Unix time (seconds since
1970), checked against the binder's wall clock (`rvguard.clock.WallClock`,
injectable), never against the guard's scheduling clock: that one starts at
the contract's epoch on every start-up, so a claim expired an hour ago (or
refused before a restart) would pass against it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from ..clock import Clock, WallClock
from ..contract import Contract
from ..errors import EnforcementError

__all__ = ["Binding", "Identity", "IdentityBinder", "sign_claim", "verify_claim"]

Unauthenticated = Literal["reject", "lowest-tier"]


@dataclass(frozen=True, slots=True)
class Identity:
    """What a client presented: an API key and/or a signed tenant claim."""

    api_key: str | None = None
    claim: str | None = None


@dataclass(frozen=True, slots=True)
class Binding:
    """The outcome of binding: the true tenant (``None``: reject) and why."""

    tenant: str | None
    authenticated: bool
    reason: str


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(secret: bytes, body: str) -> str:
    return _b64(hmac.new(secret, body.encode("ascii"), hashlib.sha256).digest())


def sign_claim(tenant: str, expires: float, secret: bytes) -> str:
    """A signed claim that the bearer is ``tenant`` until ``expires`` (Unix time: ``time.time() + 3600``)."""
    body = _b64(json.dumps({"tenant": tenant, "exp": expires}, separators=(",", ":")).encode())
    return f"{body}.{_mac(secret, body)}"


def verify_claim(token: str, secret: bytes, now: float) -> str:
    """The tenant a claim names, if its signature is valid and it has not expired at ``now`` (Unix time).

    Raises:
        EnforcementError: malformed, forged/tampered or expired (``status_hint`` 401).
    """
    body, sep, sig = token.partition(".")
    if not sep or not body or not sig or not token.isascii():
        raise EnforcementError("malformed tenant claim", status_hint=401)
    if not hmac.compare_digest(_mac(secret, body), sig):
        raise EnforcementError("tenant claim signature does not match", status_hint=401)
    try:
        payload = json.loads(_unb64(body))
    except (ValueError, binascii.Error):
        raise EnforcementError("malformed tenant claim payload", status_hint=401) from None
    tenant, exp = payload.get("tenant"), payload.get("exp")
    if not isinstance(tenant, str) or isinstance(exp, bool) or not isinstance(exp, int | float):
        raise EnforcementError("tenant claim lacks tenant or exp", status_hint=401)
    if not now < exp:
        raise EnforcementError(f"tenant claim expired at {exp!r} (now {now!r})", status_hint=401)
    return tenant


class IdentityBinder:
    """Binds a presented `Identity` to a contract tenant.

    Args:
        contract: the tenants that exist.
        api_keys: server-side map API key → tenant.
        secret: HMAC key for signed claims (``None``: claims are not accepted).
        unauthenticated: ``reject``, or ``lowest-tier`` (the lowest-tier unfloored
            tenant; if every tenant is floored, rejection).
        wall_clock: Unix time for claim expiry (default `WallClock`; a
            `ManualClock` in tests).
        token_verifier: verifies a bearer that is no known key and looks like a JWT (three
            dot-separated parts); returns the tenant it names, raises `EnforcementError`.
    """

    def __init__(
        self,
        contract: Contract,
        *,
        api_keys: Mapping[str, str] | None = None,
        secret: bytes | None = None,
        unauthenticated: Unauthenticated = "lowest-tier",
        wall_clock: Clock | None = None,
        token_verifier: Callable[[str], str] | None = None,
    ) -> None:
        if unauthenticated not in ("reject", "lowest-tier"):
            raise ValueError(f"unauthenticated must be 'reject' or 'lowest-tier', got {unauthenticated!r}")
        keys = dict(api_keys or {})
        unknown = sorted(set(keys.values()) - set(contract.tenants))
        if unknown:
            raise ValueError(f"api_keys map to tenants the contract lacks: {unknown}")
        self._contract = contract
        self._keys = keys
        self._secret = secret
        self._token = token_verifier
        self._wall: Clock = wall_clock if wall_clock is not None else WallClock()
        fallback = contract.lowest_tier_tenant
        floored = contract.tenants[fallback].floored
        self._fallback = None if unauthenticated == "reject" or floored else fallback

    def bind(self, identity: Identity | None) -> Binding:
        """The true tenant for ``identity`` now (never floored unless authenticated).

        A claim's expiry is checked against the wall clock, whatever clock the
        caller schedules by.
        """
        reasons: list[str] = []
        if identity is not None and identity.claim is not None:
            tenant, why = self._from_claim(identity.claim, self._wall.now())
            if tenant is not None:
                return Binding(tenant, True, "claim")
            reasons.append(why)
        if identity is not None and identity.api_key is not None:
            tenant = self._lookup(identity.api_key)
            if tenant is not None:
                return Binding(tenant, True, "api-key")
            if self._token is not None and identity.api_key.count(".") == 2:
                tenant, why = self._from_token(identity.api_key)
                if tenant is not None:
                    return Binding(tenant, True, "jwt")
                reasons.append(why)
            else:
                reasons.append("unknown api key")
        return Binding(self._fallback, False, "; ".join(reasons) or "no credential")

    def _from_claim(self, claim: str, now: float) -> tuple[str | None, str]:
        if self._secret is None:
            return None, "signed claims are not accepted"
        try:
            tenant = verify_claim(claim, self._secret, now)
        except EnforcementError as err:
            return None, str(err)
        if tenant not in self._contract.tenants:
            return None, f"claim names unknown tenant {tenant!r}"
        return tenant, ""

    def _from_token(self, token: str) -> tuple[str | None, str]:
        assert self._token is not None
        try:
            tenant = self._token(token)
        except EnforcementError as err:
            return None, str(err)
        if tenant not in self._contract.tenants:
            return None, f"the token names unknown tenant {tenant!r}"
        return tenant, ""

    def _lookup(self, key: str) -> str | None:
        found = None
        for known, tenant in self._keys.items():  # constant-time compare over every key
            if hmac.compare_digest(known.encode(), key.encode()):
                found = tenant
        return found
