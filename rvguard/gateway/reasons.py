"""Why a request was not completed, as one typed value, and the one table that answers each.

The Guard ends a request with a status and a free-text reason (the trace's words, which stay as
they are); the gateway must turn that into an HTTP status, an OpenAI error type and code, retry
headers, and a log line. `classify` reads an `Outcome` once into a `Reason`, and `ANSWERS` says,
for each, everything the answer and the log need: `rvguard.gateway.answers` renders from it and
`rvguard.gateway.app` logs from it, so no module matches reason strings of its own.

=================  ======  ============================  ==================  ==============
reason             status  OpenAI type                   code                retry headers
=================  ======  ============================  ==================  ==============
unauthenticated    401     authentication_error          invalid_api_key     www-authenticate
rejected           429     rate_limit_error              the reason          to the next window
preempted          503     service_unavailable_error     preempted           the Guard's hint, retry
dropped            503     service_unavailable_error     the reason          x-should-retry: false
timeout            504     upstream_error                timeout             —
upstream-client    its own  the upstream's (or invalid_request_error)  —     x-should-retry: false
upstream-auth      502     upstream_error                upstream_auth       —
upstream-busy      503     the upstream's (or upstream_error)  upstream_failed  —
upstream-timeout   504     the upstream's (or upstream_error)  timeout           —
upstream-failed    502     the upstream's (or upstream_error)  upstream_failed  —
held               503     service_unavailable_error     the reason          1 s, retry
stopped            503     service_unavailable_error     cancelled/shutdown  1 s
unavailable        503     service_unavailable_error     unavailable         1 s
failed             502     upstream_error                upstream_failed     —
=================  ======  ============================  ==================  ==============

(``held``: the redline held it past its hold limit on a stale sample, or rationed relief past its
hold bound; ``stopped``: cancelled or shut down; ``unavailable``: the Guard refused it, closed.)
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal

from ..enforce.demotion import REDLINE_STALE
from ..enforce.outcome import Outcome
from ..enforce.stream import client_fault
from ..errors import DispatchError, EnforcementError
from ..events import HOLD_BOUND

__all__ = ["ANSWERS", "AnswerSpec", "Reason", "classify"]


class Reason(enum.Enum):
    """Why a request the Guard decided was not completed (see the module's table)."""

    UNAUTHENTICATED = "unauthenticated"
    REJECTED = "rejected"
    PREEMPTED = "preempted"
    DROPPED = "dropped"
    TIMEOUT = "timeout"
    UPSTREAM_CLIENT = "upstream-client"
    UPSTREAM_AUTH = "upstream-auth"
    UPSTREAM_BUSY = "upstream-busy"
    UPSTREAM_TIMEOUT = "upstream-timeout"
    UPSTREAM_FAILED = "upstream-failed"
    HELD = "held"
    STOPPED = "stopped"
    UNAVAILABLE = "unavailable"
    FAILED = "failed"


#: how an answer's retry headers are made: none; to the next window start; the Guard's retry hint
#: (``x-should-retry: true``); 1 s and ``x-should-retry: true``; 1 s alone; ``x-should-retry: false``;
#: ``www-authenticate: Bearer``
Retry = Literal["none", "window", "hint", "soon", "later", "never", "authenticate"]
#: which log line the gateway writes: a refusal (INFO), a preemption (INFO), the client's own mistake
#: as the upstream judged it (INFO), an upstream failure (WARNING)
LogAs = Literal["refused", "preempted", "client_error", "upstream_failed"]


@dataclass(frozen=True, slots=True)
class AnswerSpec:
    """One row of the table: ``status`` (``None``: the upstream's own), the OpenAI error ``type_``
    and ``code`` (with ``by_reason``: the outcome's reason, ``code`` when it has none), ``relay``
    (the upstream's own error object when it sent one), the ``retry`` headers and the log line."""

    status: int | None
    type_: str
    code: str | None
    retry: Retry
    log: LogAs
    by_reason: bool = False
    relay: bool = False

    def code_of(self, outcome: Outcome) -> str | None:
        """The error code an answer to ``outcome`` carries."""
        return (outcome.reason or self.code) if self.by_reason else self.code


_BUSY: Final = "service_unavailable_error"
_UP: Final = "upstream_error"
_FAILED: Final = "upstream_failed"
ANSWERS: Mapping[Reason, AnswerSpec] = MappingProxyType(
    {
        Reason.UNAUTHENTICATED: AnswerSpec(
            401, "authentication_error", "invalid_api_key", "authenticate", "refused"
        ),
        Reason.REJECTED: AnswerSpec(429, "rate_limit_error", "rejected", "window", "refused", by_reason=True),
        Reason.PREEMPTED: AnswerSpec(503, _BUSY, "preempted", "hint", "preempted"),
        Reason.DROPPED: AnswerSpec(503, _BUSY, "dropped", "never", "refused", by_reason=True),
        Reason.TIMEOUT: AnswerSpec(504, _UP, "timeout", "none", _FAILED),
        Reason.UPSTREAM_CLIENT: AnswerSpec(
            None, "invalid_request_error", None, "never", "client_error", relay=True
        ),
        Reason.UPSTREAM_AUTH: AnswerSpec(502, _UP, "upstream_auth", "none", _FAILED),
        Reason.UPSTREAM_BUSY: AnswerSpec(503, _UP, _FAILED, "none", _FAILED, relay=True),
        Reason.UPSTREAM_TIMEOUT: AnswerSpec(504, _UP, "timeout", "none", _FAILED, relay=True),
        Reason.UPSTREAM_FAILED: AnswerSpec(502, _UP, _FAILED, "none", _FAILED, relay=True),
        Reason.HELD: AnswerSpec(503, _BUSY, "held", "soon", _FAILED, by_reason=True),
        Reason.STOPPED: AnswerSpec(503, _BUSY, "unavailable", "later", _FAILED, by_reason=True),
        Reason.UNAVAILABLE: AnswerSpec(503, _BUSY, "unavailable", "later", _FAILED),
        Reason.FAILED: AnswerSpec(502, _UP, _FAILED, "none", _FAILED),
    }
)

_STATUS_REASON = {"preempted": Reason.PREEMPTED, "dropped": Reason.DROPPED}
_HELD = frozenset({REDLINE_STALE, HOLD_BOUND})  # held too long: the node may have room by now
_STOPPED = frozenset({"cancelled", "shutdown"})


def classify(outcome: Outcome) -> Reason:
    """The `Reason` of an outcome that is not a completion (the first rule that holds, in order)."""
    if outcome.status == "rejected":
        return Reason.UNAUTHENTICATED if outcome.reason == "unauthenticated" else Reason.REJECTED
    if outcome.status in _STATUS_REASON:
        return _STATUS_REASON[outcome.status]
    err = outcome.error
    if isinstance(err, TimeoutError) or outcome.reason == "timeout":
        return Reason.TIMEOUT
    if isinstance(err, DispatchError):
        return _upstream(err.status_hint)
    if outcome.reason in _HELD:
        return Reason.HELD
    if outcome.reason in _STOPPED:
        return Reason.STOPPED
    return Reason.UNAVAILABLE if isinstance(err, EnforcementError) else Reason.FAILED


def _upstream(hint: int) -> Reason:
    """An upstream failure by its HTTP status: the client's fault, the gateway's credentials refused,
    the engine's capacity (408, 429, 503), its time-out (504), or its failure."""
    if client_fault(hint):
        return Reason.UPSTREAM_CLIENT
    if hint in (401, 403, 407):
        return Reason.UPSTREAM_AUTH
    if hint in (408, 429, 503):
        return Reason.UPSTREAM_BUSY
    return Reason.UPSTREAM_TIMEOUT if hint == 504 else Reason.UPSTREAM_FAILED
