"""The Redis transport of the shared credit pool, and the checks made before pooling.

Theory of operation
-------------------
`RedisStore` runs the pool script (``pool.lua``) with redis-py's asyncio
client, never retrying (a retry could run the script twice for one arrival):
a failed call is an unknown outcome and the replica falls back instead.

The store's 50 ms bound is for calls on a warm connection. `RedisStore.warm`
opens a few connections, loads the script and reads what the pool's safety
assumes, with a longer bound (``connect_timeout``), before the replica says
it is ready; `SharedCredits` refuses to pool when an assumption fails:

* ``maxmemory-policy`` must be ``noeviction`` (any other policy may evict a
  window's hash and forget credit already spent);
* the replica's clock must lie within ``max_skew`` of the store's ``TIME``;
* no other live process may hold this replica's name: each replica renews a
  name lease (``PREFIX:name:NAME`` = a random id of this process, expiring
  after ``lease`` seconds) at every heartbeat. A starting process takes the
  name over (a restart need not wait for the old lease); the process it was
  taken from sees another id at its next heartbeat and stops spending floor
  credit for good, saying why.

Credentials never come from the URL shown in logs: `redact` strips them, and
the password may come from the environment or a file (`rvguard serve`).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from importlib import resources

from ..errors import MissingExtraError, StoreUnavailableError

__all__ = ["POOL_SCRIPT", "RedisStore", "StoreFacts", "redact"]

POOL_SCRIPT = resources.files(__package__).joinpath("pool.lua").read_text(encoding="utf-8")
VERDICTS = frozenset({"floor", "excess", "held", "joined", "fenced", "invalid"})
_CREDENTIALS = re.compile(r"^(?P<scheme>[a-z]+://)[^@/]*@")

# Claim or renew the name lease: KEYS[1] the name key; ARGV[1] this process's id, ARGV[2] ms,
# ARGV[3] '1' when this process never held the name (it may take it over). Returns this process's
# id when it renewed its lease; '+' and the ms the previous holder's lease had left (0: none) when
# it claimed the name; the holder's id when another process took the name from this one.
_LEASE = """
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return ARGV[1]
end
if cur and ARGV[3] ~= '1' then return cur end
local left = 0
if cur then left = math.max(redis.call('PTTL', KEYS[1]), 0) end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return '+' .. left
"""


def redact(url: str) -> str:
    """``url`` with any user and password replaced by ``***`` (for logs and errors)."""
    return _CREDENTIALS.sub(r"\g<scheme>***@", url)


@dataclass(frozen=True, slots=True)
class StoreFacts:
    """What `RedisStore.warm` read: the eviction policy and the store's clock (Unix seconds)."""

    policy: str
    time: float
    rtt: float


class RedisStore:
    """`CreditStore` over redis-py's asyncio client: no retries, every call bounded by ``timeout``.

    Args:
        url: ``redis://HOST:PORT/DB`` (credentials here are accepted but better given below).
        timeout: the bound of one call on a warm connection.
        username, password: for Redis ACLs (from the environment or a file, never the command line).
        connect_timeout: the bound of `warm` and `ping` (they may open connections).
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float,
        username: str | None = None,
        password: str | None = None,
        connect_timeout: float = 2.0,
    ) -> None:
        try:
            from redis.asyncio import Redis
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff
        except ImportError:
            raise MissingExtraError("redis", "fleet") from None
        self._timeout = timeout
        self._connect = max(connect_timeout, timeout)
        self._client = Redis.from_url(
            url,
            socket_timeout=self._connect,
            socket_connect_timeout=self._connect,
            retry=Retry(NoBackoff(), 0),
            decode_responses=True,
            username=username or None,
            password=password or None,
        )
        self._script = self._client.register_script(POOL_SCRIPT)
        self._lease = self._client.register_script(_LEASE)

    async def call(self, keys: Sequence[str], args: Sequence[str]) -> list[str]:
        """Run the pool script once."""
        reply = await self._bounded(self._script(keys=list(keys), args=list(args)), self._timeout)
        if not (isinstance(reply, list) and len(reply) == 4 and reply[0] in VERDICTS):
            raise StoreUnavailableError(f"the pool script answered {reply!r}")
        return [str(x) for x in reply]

    async def ping(self) -> None:
        """One PING (no side effect, so a lost answer costs nothing), then the script loaded again."""
        await self._bounded(self._client.ping(), self._connect)
        await self._bounded(self._client.script_load(POOL_SCRIPT), self._connect)

    async def warm(self, connections: int = 4) -> StoreFacts:
        """Open ``connections`` connections, load the scripts, read the eviction policy and TIME."""
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(self.ping() for _ in range(connections)))
        await self._bounded(self._client.script_load(_LEASE), self._connect)
        try:
            conf = await self._bounded(self._client.config_get("maxmemory-policy"), self._connect)
            policy = str(dict(conf).get("maxmemory-policy", "?"))  # type: ignore[call-overload]
        except StoreUnavailableError as err:
            policy = f"unreadable ({err}; grant the pool's user +config|get)"
        t0 = loop.time()
        now = await self.time()
        return StoreFacts(policy=policy, time=now, rtt=loop.time() - t0)

    async def time(self) -> float:
        """The store's clock (Unix seconds)."""
        reply = await self._bounded(self._client.time(), self._connect)
        if not (isinstance(reply, tuple | list) and len(reply) == 2):
            raise StoreUnavailableError(f"TIME answered {reply!r}")
        return float(reply[0]) + float(reply[1]) / 1e6

    async def lease(self, key: str, holder: str, ms: int, *, claim: bool) -> str:
        """Claim (``claim``: never held) or renew the name lease ``key``: see ``_LEASE`` for the answer."""
        args = [holder, str(ms), "1" if claim else "0"]
        reply = await self._bounded(self._lease(keys=[key], args=args), self._timeout)
        return str(reply)

    async def aclose(self) -> None:
        """Close the client and its pool."""
        await self._client.aclose()

    async def _bounded(self, op: Awaitable[object], bound: float) -> object:
        from redis.exceptions import RedisError

        try:
            async with asyncio.timeout(bound):
                return await op
        except (RedisError, OSError, TimeoutError) as err:
            raise StoreUnavailableError(f"{type(err).__name__}: {err}", maybe_run=not _refused(err)) from err


def _refused(err: BaseException) -> bool:
    """True when the connection was refused: the command never left this process."""
    seen: BaseException | None = err
    for _ in range(4):
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
