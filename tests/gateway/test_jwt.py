"""Identity from an identity provider: JWTs verified against a JWKS the test makes, reloaded on SIGHUP."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
import yaml
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from rvguard.errors import SpecError
from rvguard.gateway.config import identity_from_headers, load_keys
from rvguard.gateway.fake import FakeUpstream

from ._support import auth, contract, gateway, read_trace, serve_process, settings

ISSUER, AUDIENCE = "https://idp.test/", "rvguard"


class Idp:
    """A test identity provider: RSA and EC keys, its JWKS, tokens it signs."""

    def __init__(self) -> None:
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec = ec.generate_private_key(ec.SECP256R1())

    def jwks(self, *kids: str) -> dict[str, Any]:
        keys = []
        for kid in kids:
            if kid.startswith("ec"):
                k = json.loads(ECAlgorithm.to_jwk(self.ec.public_key()))
                k |= {"alg": "ES256"}
            else:
                k = json.loads(RSAAlgorithm.to_jwk(self.rsa.public_key()))
                k |= {"alg": "RS256"}
            keys.append(k | {"kid": kid, "use": "sig"})
        return {"keys": keys}

    def token(self, kid: str = "rsa1", **over: Any) -> str:
        claims = {"iss": ISSUER, "aud": AUDIENCE, "exp": time.time() + 600, "tenant": "assured", **over}
        claims = {k: v for k, v in claims.items() if v is not None}
        key, alg = (self.ec, "ES256") if kid.startswith("ec") else (self.rsa, "RS256")
        return jwt.encode(claims, key, algorithm=alg, headers={"kid": kid})


@pytest.fixture(scope="module")
def idp() -> Idp:
    return Idp()


def keys_file(tmp: Path, idp: Idp, *kids: str, **jwt_over: Any) -> Path:
    (tmp / "jwks.json").write_text(json.dumps(idp.jwks(*kids)))
    block = {"jwks": "jwks.json", "issuer": ISSUER, "audience": AUDIENCE, "algorithms": ["RS256", "ES256"]}
    data = {"keys": {"sk-opp": "opportunistic"}, "jwt": {**block, **jwt_over}}
    path = tmp / "keys.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def bind(path: Path, token: str) -> tuple[str | None, str]:
    b = load_keys(path).binder(contract()).bind(identity_from_headers(auth(token)))
    return b.tenant, b.reason


def test_a_token_from_the_jwks_binds_its_tenant(tmp_path: Path, idp: Idp) -> None:
    path = keys_file(tmp_path, idp, "rsa1", "ec1")
    assert bind(path, idp.token("rsa1")) == ("assured", "jwt")
    assert bind(path, idp.token("ec1", tenant="opportunistic")) == ("opportunistic", "jwt")
    assert bind(path, "sk-opp") == ("opportunistic", "api-key")  # keys still work beside tokens


@pytest.mark.parametrize(
    ("over", "why"),
    [
        ({"iss": "https://evil.test/"}, "issuer"),
        ({"aud": "someone-else"}, "Audience"),
        ({"exp": time.time() - 3600}, "expired"),
        ({"exp": None}, "exp"),
        ({"tenant": None}, "'tenant' claim"),
        ({"tenant": "nobody"}, "unknown tenant"),
    ],
)
def test_a_token_that_does_not_verify_binds_nobody(
    tmp_path: Path, idp: Idp, over: dict[str, Any], why: str
) -> None:
    path = keys_file(tmp_path, idp, "rsa1")
    tenant, reason = bind(path, idp.token("rsa1", **over))
    assert tenant is None and why in reason


def test_forged_tokens_bind_nobody(tmp_path: Path, idp: Idp) -> None:
    path = keys_file(tmp_path, idp, "rsa1", algorithms=["RS256"])
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    claims = {"iss": ISSUER, "aud": AUDIENCE, "exp": time.time() + 600, "tenant": "assured"}
    forged = jwt.encode(claims, other, algorithm="RS256", headers={"kid": "rsa1"})
    unsigned = jwt.encode(claims, None, algorithm="none", headers={"kid": "rsa1"})
    unknown_kid = idp.token("rsa9")
    not_pinned = idp.token("ec1")  # ES256 is not among the pinned algorithms (and not in the JWKS)
    for token in (forged, unsigned, unknown_kid, not_pinned, idp.token("rsa1")[:-4] + "AAAA"):
        assert bind(path, token)[0] is None, token


@pytest.mark.parametrize(
    ("block", "field"),
    [
        ({"issuer": ISSUER, "audience": AUDIENCE}, "jwt.jwks"),
        ({"jwks": "jwks.json", "audience": AUDIENCE}, "jwt.issuer"),
        (
            {"jwks": "jwks.json", "issuer": ISSUER, "audience": AUDIENCE, "algorithms": ["HS256"]},
            "jwt.algorithms.0",
        ),
        (
            {"jwks": "jwks.json", "issuer": ISSUER, "audience": AUDIENCE, "algorithms": ["none"]},
            "jwt.algorithms.0",
        ),
        ({"jwks": "missing.json", "issuer": ISSUER, "audience": AUDIENCE}, "jwt.jwks"),
    ],
)
def test_a_bad_jwt_block_names_file_and_field(
    tmp_path: Path, idp: Idp, block: dict[str, Any], field: str
) -> None:
    (tmp_path / "jwks.json").write_text(json.dumps(idp.jwks("rsa1")))
    path = tmp_path / "keys.yaml"
    path.write_text(yaml.safe_dump({"jwt": block}))
    with pytest.raises(SpecError) as err:
        load_keys(path)
    assert err.value.field == field
    assert str(err.value).startswith(f"{path}: {field}")


async def test_the_gateway_serves_a_token_and_authenticates_every_route(tmp_path: Path, idp: Idp) -> None:
    """Before: /v1/models answered an unknown key 200; /metrics could not be closed."""
    keys = load_keys(keys_file(tmp_path, idp, "rsa1"))
    trace = tmp_path / "t.jsonl"
    async with (
        FakeUpstream() as up,
        gateway(contract(), settings(up.url, trace, keys=keys, metrics_auth=True)) as (_gw, url),
        httpx.AsyncClient() as client,
    ):
        body = {"prompt": "x", "max_tokens": 2}
        ok = await client.post(url + "/v1/completions", json=body, headers=auth(idp.token()))
        models_no = await client.get(url + "/v1/models", headers=auth("sk-unknown"))
        models_ok = await client.get(url + "/v1/models", headers=auth(idp.token()))
        metrics_no = await client.get(url + "/metrics")
        metrics_ok = await client.get(url + "/metrics", headers=auth("sk-opp"))
        probes = [(await client.get(url + p)).status_code for p in ("/healthz", "/readyz")]
    assert ok.status_code == 200, ok.text
    assert [e["tenant"] for e in read_trace(trace) if e["kind"] == "arrive"] == ["assured"]
    assert models_no.status_code == 401 and models_no.json()["error"]["code"] == "invalid_api_key"
    assert models_ok.status_code == 200
    assert metrics_no.status_code == 401 and metrics_ok.status_code == 200
    assert probes == [200, 200]


async def test_a_reload_takes_a_rotated_key_and_keeps_the_keys_when_the_file_breaks(
    tmp_path: Path, idp: Idp
) -> None:
    path = keys_file(tmp_path, idp, "rsa1")
    async with (
        FakeUpstream() as up,
        gateway(contract(), settings(up.url, None, keys=load_keys(path))) as (gw, url),
        httpx.AsyncClient() as client,
    ):
        body = {"prompt": "x", "max_tokens": 2}
        before = await client.post(url + "/v1/completions", json=body, headers=auth(idp.token("ec1")))
        keys_file(tmp_path, idp, "ec1")  # the provider rotated: rsa1 out, ec1 in
        await gw.reload_keys()
        after = await client.post(url + "/v1/completions", json=body, headers=auth(idp.token("ec1")))
        old = await client.post(url + "/v1/completions", json=body, headers=auth(idp.token("rsa1")))
        path.write_text("jwt: {issuer: 1}\n")  # broken: the keys in use stay
        await gw.reload_keys()
        kept = await client.post(url + "/v1/completions", json=body, headers=auth(idp.token("ec1")))
    assert (before.status_code, after.status_code, old.status_code, kept.status_code) == (401, 200, 401, 200)


async def test_sighup_reloads_a_rotated_key_with_no_request_dropped(tmp_path: Path, idp: Idp) -> None:
    (tmp_path / "jwks.json").write_text(json.dumps(idp.jwks("rsa1")))
    block = {"jwks": "jwks.json", "issuer": ISSUER, "audience": AUDIENCE, "algorithms": ["RS256", "ES256"]}
    procs: list[subprocess.Popen[bytes]] = []
    statuses: list[int] = []
    stop = asyncio.Event()
    body = {"prompt": "x", "max_tokens": 2}
    async with FakeUpstream(token_delay=0.001) as up, httpx.AsyncClient(timeout=30) as client:
        with serve_process(contract(), up.url, tmp_path, keys={"jwt": block}, procs=procs) as (url, _):

            async def load() -> None:  # requests with the old key all along, across the reload
                while not stop.is_set():
                    old = auth(idp.token("rsa1", tenant="opportunistic"))
                    statuses.append(
                        (await client.post(url + "/v1/completions", json=body, headers=old)).status_code
                    )

            workers = [asyncio.ensure_future(load()) for _ in range(3)]
            await asyncio.sleep(0.5)
            new = auth(idp.token("ec1"))
            refused = await client.post(url + "/v1/completions", json=body, headers=new)
            (tmp_path / "jwks.json").write_text(json.dumps(idp.jwks("rsa1", "ec1")))  # ec1 added
            os.kill(procs[0].pid, signal.SIGHUP)
            for _ in range(100):
                accepted = await client.post(url + "/v1/completions", json=body, headers=new)
                if accepted.status_code == 200:
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.3)
            stop.set()
            await asyncio.gather(*workers)
            alive = procs[0].poll() is None
    assert refused.status_code == 401 and accepted.status_code == 200
    assert alive  # SIGHUP's default would have ended the process
    assert len(statuses) > 3 and set(statuses) == {200}, statuses  # none dropped across the reload


async def test_metrics_can_hide_tenant_names() -> None:
    async with (
        FakeUpstream() as up,
        gateway(contract(), settings(up.url, None, metrics_tenant_names=False)) as (_gw, url),
        httpx.AsyncClient() as client,
    ):
        await client.post(
            url + "/v1/completions", json={"prompt": "x", "max_tokens": 1}, headers=auth("sk-assured")
        )
        text = (await client.get(url + "/metrics")).text
    assert 'tenant="assured"' not in text and 'tenant="opportunistic"' not in text
    assert 'rvguard_admitted_total{basis="floor",tenant="tenant0"} 1.0' in text


def test_a_jwks_url_is_fetched(tmp_path: Path, idp: Idp) -> None:
    import http.server
    import threading

    body = json.dumps(idp.jwks("rsa1")).encode()

    class Jwks(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Jwks)
    # serve_forever polls for shutdown every 0.5 s by default, so shutdown() waited up to that long
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        path = keys_file(tmp_path, idp, "rsa1", jwks=f"http://127.0.0.1:{server.server_port}/jwks.json")
        assert bind(path, idp.token("rsa1")) == ("assured", "jwt")
    finally:
        server.shutdown()
        server.server_close()


def test_a_verified_token_is_remembered_only_until_it_expires(tmp_path: Path, idp: Idp) -> None:
    binder = load_keys(keys_file(tmp_path, idp, "rsa1", leeway=0)).binder(contract())
    token = identity_from_headers(auth(idp.token("rsa1", exp=time.time() + 1.0)))
    assert binder.bind(token).tenant == "assured"
    assert binder.bind(token).tenant == "assured"  # remembered
    time.sleep(1.2)
    late = binder.bind(token)
    assert late.tenant is None and "expired" in late.reason
