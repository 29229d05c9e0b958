"""The error tree: one root, builtin mixins, context kept, messages show where."""

from __future__ import annotations

import pytest

from rvguard import errors


@pytest.mark.parametrize(
    ("cls", "builtin"),
    [
        (errors.SpecError, ValueError),
        (errors.TraceFormatError, ValueError),
        (errors.TraceOrderError, ValueError),
        (errors.TraceProtocolError, ValueError),
        (errors.UnknownTenantError, ValueError),
        (errors.EnforcementError, RuntimeError),
        (errors.SinkError, RuntimeError),
        (errors.LifecycleError, RuntimeError),
        (errors.TelemetryUnavailableError, ConnectionError),
        (errors.TelemetryFormatError, ValueError),
    ],
)
def test_every_error_is_an_rvguard_error_and_its_builtin(cls: type, builtin: type) -> None:
    assert issubclass(cls, errors.RvguardError)
    assert issubclass(cls, builtin)


def test_trace_errors_locate_themselves() -> None:
    err = errors.TraceFormatError("must be finite", field="t")
    moved = err.located(path="a.jsonl", line=12)
    assert type(moved) is errors.TraceFormatError
    assert (moved.path, moved.line, moved.field) == ("a.jsonl", 12, "t")
    assert str(moved) == "a.jsonl:12: field 't' must be finite"


def test_missing_extra_names_the_extra() -> None:
    err = errors.MissingExtraError("z3-solver", "smt")
    assert isinstance(err, ImportError)
    assert "rvguard[smt]" in str(err)


def test_enforcement_errors_carry_a_status_hint() -> None:
    assert errors.EnforcementError("closed", status_hint=503).status_hint == 503


def test_sink_errors_are_enforcement_errors_with_context() -> None:
    err = errors.SinkError("trace full", outcome="o", event="e")
    assert isinstance(err, errors.EnforcementError)
    assert (err.status_hint, err.outcome, err.event) == (500, "o", "e")


def test_telemetry_errors_name_their_source_and_field() -> None:
    err = errors.TelemetryFormatError("must be a fraction in [0, 1], got 2", source="<sample>", field="value")
    assert isinstance(err, errors.TelemetryError)
    assert (err.source, err.field) == ("<sample>", "value")
    assert str(err) == "<sample>: 'value' must be a fraction in [0, 1], got 2"
