"""The keys file (`KeysFile`, a pydantic model) and JWTs from an identity provider (`JwtVerifier`).

Keys file (YAML or JSON)::

    keys:                      # API key -> tenant
      sk-assured-1: assured
    jwt:                       # optional: tokens an identity provider (OIDC) signs
      jwks: https://idp.example/.well-known/jwks.json   # or a file: jwks.json (beside the keys file)
      issuer: https://idp.example/
      audience: rvguard
      algorithms: [RS256]      # pinned: asymmetric only (never none, never HS*)
      tenant_claim: tenant     # the claim naming the contract's tenant
      leeway: 30               # seconds of clock skew allowed on exp/nbf/iat
    unauthenticated: reject    # the default; lowest-tier serves anonymous traffic
    claim_secret: "..."        # legacy: rvguard's own HMAC claims (X-Rvguard-Claim)

A JWT arrives as ``Authorization: Bearer <token>`` like an API key: a bearer
that is no known key and has a JWT's three parts is verified with PyJWT
against the JWKS (the key named by the token's ``kid``): signature, ``exp``,
``iss`` and ``aud`` required, the algorithm one of those pinned; the tenant is
the named claim, which must be a tenant of the contract. Errors name the file
and the field (``jwt.issuer``). `load_keys` reads the file and the JWKS (a URL
is fetched once per load); the gateway loads them again on SIGHUP.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..clock import Clock, WallClock
from ..contract import Contract
from ..enforce.identity import IdentityBinder, Unauthenticated
from ..errors import EnforcementError, SpecError

if TYPE_CHECKING:
    import jwt

__all__ = ["JwtConfig", "JwtVerifier", "KeysConfig", "KeysFile", "load_jwks", "load_keys"]

Algorithm = Literal["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
#: tokens remembered as verified (the oldest forgotten first)
_VERIFIED_MAX = 4096
#: the largest JWKS accepted (a file or a URL's answer)
MAX_JWKS_BYTES = 1 << 20


class JwtConfig(BaseModel):
    """The ``jwt`` block: where the identity provider's keys are, and what a token must say."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    jwks: str = Field(min_length=1, description="JWKS file (relative to the keys file) or http(s) URL")
    issuer: str = Field(min_length=1)
    audience: str | list[str] = Field(min_length=1)
    algorithms: list[Algorithm] = Field(default=["RS256"], min_length=1)
    tenant_claim: str = Field(default="tenant", min_length=1)
    leeway: float = Field(default=30.0, ge=0, le=300)


class KeysFile(BaseModel):
    """The keys file, as written (see module doc)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    keys: dict[str, str] = Field(default_factory=dict)
    jwt: JwtConfig | None = None
    unauthenticated: Literal["reject", "lowest-tier"] = "reject"
    claim_secret: str | None = Field(default=None, min_length=16)


class JwtVerifier:
    """Verifies a bearer JWT against a JWKS; ``__call__`` returns the tenant claim's value."""

    def __init__(self, config: JwtConfig, jwks: jwt.PyJWKSet, *, wall_clock: Clock | None = None) -> None:
        self.config = config
        self._keys = {k.key_id: k for k in jwks.keys}
        self._wall: Clock = wall_clock if wall_clock is not None else WallClock()
        self._verified: dict[str, tuple[str, float]] = {}  # token -> (tenant, exp): the last ones verified

    def __call__(self, token: str) -> str:
        """The tenant the token names (a token verified before is not verified again until its
        ``exp``: the gateway and its Guard both bind each request, and a signature check costs
        about half a millisecond).

        Raises:
            EnforcementError: a token that does not verify (``status_hint`` 401), with why.
        """
        known = self._verified.get(token)
        if known is not None and self._wall.now() < known[1]:
            return known[0]
        tenant, exp = self._verify(token)
        if len(self._verified) >= _VERIFIED_MAX:
            del self._verified[next(iter(self._verified))]  # the oldest
        self._verified[token] = (tenant, exp)
        return tenant

    def _verify(self, token: str) -> tuple[str, float]:
        import jwt

        c = self.config
        try:
            kid = jwt.get_unverified_header(token).get("kid")
            key = self._keys.get(kid) if kid is not None else None
            if key is None and kid is None and len(self._keys) == 1:
                key = next(iter(self._keys.values()))
            if key is None:
                raise EnforcementError(f"no key {kid!r} in the JWKS", status_hint=401)
            claims = jwt.decode(
                token,
                key,
                algorithms=list(c.algorithms),
                audience=c.audience,
                issuer=c.issuer,
                leeway=c.leeway,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as err:
            raise EnforcementError(f"invalid token: {err}", status_hint=401) from None
        tenant = claims.get(c.tenant_claim)
        if not isinstance(tenant, str) or not tenant:
            raise EnforcementError(f"the token has no {c.tenant_claim!r} claim", status_hint=401)
        return tenant, float(claims["exp"])


@dataclass(frozen=True)
class KeysConfig:
    """API keys, the JWT verifier, the legacy claim secret and the policy for requests without valid
    credentials; ``source`` is the keys file they came from (reloaded on SIGHUP)."""

    keys: Mapping[str, str] = field(default_factory=dict)
    claim_secret: bytes | None = None
    unauthenticated: Unauthenticated = "reject"
    jwt: JwtVerifier | None = None
    source: Path | None = None

    def binder(self, contract: Contract) -> IdentityBinder:
        """The identity binder these settings describe."""
        try:
            return IdentityBinder(
                contract,
                api_keys=self.keys,
                secret=self.claim_secret,
                unauthenticated=self.unauthenticated,
                token_verifier=self.jwt,
            )
        except ValueError as err:
            raise SpecError(f"keys file: {err}", field="keys") from None


def _validated(data: Any, source: str) -> KeysFile:
    if not isinstance(data, Mapping):
        raise SpecError(f"{source}: a keys file holds a mapping", field="keys", value=data)
    try:
        return KeysFile.model_validate(dict(data))
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise SpecError(f"{source}: {where}: {first['msg']}", field=where or "keys") from None


def load_jwks(where: str, keys_file: Path) -> jwt.PyJWKSet:
    """The JWKS at a URL (fetched now) or in a file (relative to the keys file's directory).

    Raises:
        SpecError: unreachable, unreadable, too large, or not a JWKS.
    """
    import jwt

    try:
        if where.startswith(("https://", "http://")):
            import httpx

            answer = httpx.get(where, timeout=5.0, follow_redirects=False)
            answer.raise_for_status()
            raw = answer.content
        else:
            raw = (keys_file.parent / where).read_bytes()
        if len(raw) > MAX_JWKS_BYTES:
            raise ValueError(f"larger than {MAX_JWKS_BYTES} bytes")
        return jwt.PyJWKSet.from_dict(json.loads(raw))
    except Exception as err:  # noqa: BLE001 - I/O, HTTP, JSON and PyJWT's own errors alike: one SpecError
        raise SpecError(f"{keys_file}: jwt.jwks: cannot load {where}: {err}", field="jwt.jwks") from None


def load_keys(path: str | Path) -> KeysConfig:
    """Read a keys file (YAML or JSON; see module doc) and the JWKS it names.

    Raises:
        SpecError: unreadable file, unknown field, bad key map, secret or jwt block, or JWKS.
    """
    import yaml

    from ..bounds import MAX_SPEC_BYTES
    from ..untrusted import load_yaml, read_text

    path = Path(path)
    try:  # a contract file's rules: bounded size, UTF-8, depth, aliases, no key twice
        data = load_yaml(read_text(path, limit=MAX_SPEC_BYTES))
    except (OSError, ValueError, yaml.YAMLError) as err:
        raise SpecError(f"{path}: cannot read keys file: {err}", field="keys") from None
    model = _validated(data, str(path))
    verifier = None
    if model.jwt is not None:
        verifier = JwtVerifier(model.jwt, load_jwks(model.jwt.jwks, path))
    return KeysConfig(
        keys=dict(model.keys),
        claim_secret=None if model.claim_secret is None else model.claim_secret.encode(),
        unauthenticated=model.unauthenticated,
        jwt=verifier,
        source=path,
    )
