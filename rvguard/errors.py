"""The error tree: every exception rvguard raises derives from `RvguardError`.

Violations of a property are *values* (`rvguard.verdict.Violation`), never
exceptions. Exceptions mean misuse: a bad contract, a bad trace record, time
going backwards, a missing optional dependency.

    RvguardError
    ├── SpecError (ValueError)            a contract field is wrong: .field, .value (.errors: all)
    ├── TraceError (ValueError)           a trace record is wrong: .path, .line, .field
    │   ├── TraceFormatError              malformed JSON/CSV, missing or mistyped field
    │   │   └── LineTooLongError          a line over MAX_LINE_BYTES: the rest of the file is unreadable
    │   ├── TraceOrderError               a timestamp earlier than the one before
    │   ├── TraceProtocolError            the record breaks the WF protocol (strict reading)
    │   └── UnknownTenantError            an event names a tenant the contract lacks
    ├── MissingExtraError (ImportError)   an optional dependency is not installed
    ├── LifecycleError (RuntimeError)     the lifecycle table, or a consumer derived from it, disagrees
    ├── StoreUnavailableError (ConnectionError)  the shared credit store did not answer in time
    ├── TelemetryError                    engine telemetry cannot be read: .source, .field
    │   ├── TelemetryUnavailableError (ConnectionError)  the metrics endpoint did not answer (well)
    │   └── TelemetryFormatError (ValueError)            the payload or a sample is malformed
    └── EnforcementError (RuntimeError)   the guard cannot act: .status_hint for HTTP edges
        ├── SinkError                     an event sink raised; the guard acted anyway: .outcome, .event
        └── DispatchError                 the backend failed a request: .status_hint, .error, .reason
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "DispatchError",
    "EnforcementError",
    "LifecycleError",
    "LineTooLongError",
    "MissingExtraError",
    "RvguardError",
    "SinkError",
    "SpecError",
    "StoreUnavailableError",
    "TelemetryError",
    "TelemetryFormatError",
    "TelemetryUnavailableError",
    "TraceError",
    "TraceFormatError",
    "TraceOrderError",
    "TraceProtocolError",
    "UnknownTenantError",
]


class RvguardError(Exception):
    """Root of every error rvguard raises."""


class SpecError(RvguardError, ValueError):
    """A contract (or other spec) field has a bad value.

    Attributes:
        field: dotted path of the offending field, e.g. ``tenants.assured.floor``.
        value: the offending value (``None`` when the field is missing).
        errors: every problem found at once, each a `SpecError` naming one field (a
            contract with three bad fields reports all three); ``(self,)`` for one.
            ``field`` and ``value`` are the first's.
    """

    def __init__(
        self, message: str, *, field: str = "", value: Any = None, errors: Sequence[SpecError] = ()
    ) -> None:
        self.field = field
        self.value = value
        self.errors: tuple[SpecError, ...] = tuple(errors) or (self,)
        super().__init__(message)


class TraceError(RvguardError, ValueError):
    """A trace record cannot be accepted.

    Attributes:
        path: the file (``"<memory>"`` for in-process events).
        line: 1-based line (or row) number, 0 when unknown.
        field: the offending field, ``""`` when the whole record is at fault.
    """

    def __init__(self, message: str, *, path: str = "<memory>", line: int = 0, field: str = "") -> None:
        self.path = path
        self.line = line
        self.field = field
        self.reason = message
        where = f"{path}:{line}" if line else path
        what = f" field {field!r}" if field else ""  # repr: a field name read from a file may hold escapes
        super().__init__(f"{where}:{what} {message}")

    def located(self, *, path: str, line: int) -> TraceError:
        """Return a copy of this error pinned to a file and line."""
        return type(self)(self.reason, path=path, line=line, field=self.field)


class TraceFormatError(TraceError):
    """Malformed record: bad JSON, a missing or mistyped field, a non-finite time."""


class LineTooLongError(TraceFormatError):
    """A line longer than `rvguard.bounds.MAX_LINE_BYTES`: readers raise it even when lenient,
    since what follows a line with no end cannot be read (``rvguard.io._lines``)."""


class TraceOrderError(TraceError):
    """A timestamp earlier than the previous event's: monitors learn time from events."""


class TraceProtocolError(TraceError):
    """The record breaks the well-formedness protocol (duplicate arrive, unknown rid, ...)."""


class UnknownTenantError(TraceError):
    """An event names a tenant that the contract does not declare."""


class MissingExtraError(RvguardError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, package: str, extra: str) -> None:
        self.package = package
        self.extra = extra
        super().__init__(f"{package} is not installed: pip install 'rvguard[{extra}]'")


class LifecycleError(RvguardError, RuntimeError):
    """The request lifecycle table, or a table derived from it, is inconsistent.

    Raised at import (a programming error, never a user's): the message names
    the stages, kinds or edges that disagree.
    """


class StoreUnavailableError(RvguardError, ConnectionError):
    """The shared credit store (Redis) did not answer, or not in time, or answered nonsense.

    `rvguard.fleet.credits` catches it and falls back to the replica's static
    share, saying so in its statistics and its log; it never reaches a caller.

    Attributes:
        maybe_run: ``False`` only when the call surely never reached the store
            (the connection was refused); otherwise it may have taken effect.
    """

    def __init__(self, message: str, *, maybe_run: bool = True) -> None:
        self.maybe_run = maybe_run
        super().__init__(message)


class TelemetryError(RvguardError):
    """Engine telemetry (a headroom sample, a ``/metrics`` scrape) cannot be used.

    Attributes:
        source: where it came from (a URL, ``"<callable>"``, ``"<sample>"``).
        field: the offending metric or sample field, ``""`` when the whole read failed.
    """

    def __init__(self, message: str, *, source: str = "", field: str = "") -> None:
        self.source = source
        self.field = field
        where = f"{source}: " if source else ""
        what = f"{field!r} " if field else ""
        super().__init__(f"{where}{what}{message}")


class TelemetryUnavailableError(TelemetryError, ConnectionError):
    """The metrics endpoint refused, timed out or answered with an HTTP error status."""


class TelemetryFormatError(TelemetryError, ValueError):
    """The exposition text does not parse, a metric is missing, or a sample is out of range."""


class EnforcementError(RvguardError, RuntimeError):
    """The guard cannot act on a request.

    Attributes:
        status_hint: the HTTP status an edge adapter should answer with.
    """

    def __init__(self, message: str, *, status_hint: int = 500) -> None:
        self.status_hint = status_hint
        super().__init__(message)


class SinkError(EnforcementError):
    """An event sink (trace writer, monitor, metrics) raised on an event.

    The guard applies every decision whatever its sinks do (a slot is never
    leaked, a caller never left waiting), feeds the event to the other sinks,
    and then raises this to the caller of the request the event belongs to:
    the trace may now lack that event, which must not pass unnoticed.

    Attributes:
        outcome: the request's outcome, applied regardless (``None`` when the
            failure is not tied to one request, e.g. closing a sink).
        event: the event the sink failed on (``None`` likewise).
        status_hint: 500.
    """

    def __init__(self, message: str, *, outcome: Any = None, event: Any = None) -> None:
        self.outcome = outcome
        self.event = event
        super().__init__(message, status_hint=500)


class DispatchError(EnforcementError):
    """The backend failed the request.

    Attributes:
        status_hint: the backend's HTTP status (502/504 for transport failures).
        error: the backend's own error object (OpenAI's ``message``, ``type``, ``param``,
            ``code``), kept so an edge can relay it as it came; ``None`` when it sent none.
        reason: the ``fail`` reason the Guard records; ``""`` for the default
            ``DispatchError: <message>`` (see `rvguard.enforce.dispatchers.failure_reason`).
    """

    def __init__(self, message: str, *, status_hint: int = 502, error: Any = None, reason: str = "") -> None:
        self.error = error
        self.reason = reason
        super().__init__(message, status_hint=status_hint)
