"""The gateway's log: one line per event, as text or JSON, through the standard `logging` module.

Every line the gateway writes goes to the ``rvguard.gateway`` logger with its
fields in ``extra`` (``event`` names what happened; ``request_id``, ``tenant``
and ``rid`` tie it to a request, its trace events and the upstream's logs).
Events: ``startup`` (the configuration), ``refused`` (a request answered with
an error before or by the Guard: 400/401/404/408/413/429/503), ``upstream_failed``
(502/504, a client error the upstream refused, an error mid-stream),
``sink_error``/``sink_recovered`` (the trace file), ``upstream_down``/``upstream_up``
(the readiness probe), ``upstream_ejected``/``upstream_still_ejected``/``upstream_restored``
(failed requests in a row, `rvguard.gateway.outlier`), ``keys_reloaded``, and ``access``: one line
per HTTP exchange
(`rvguard.gateway.access`: request id, tenant, rid, status, latency, outcome and reason;
probes and scrapes at DEBUG). `configure` installs one handler on the root logger
(uvicorn's own lines come through it too) and keeps the HTTP client libraries' lines
(httpx, httpcore: one per upstream call and probe) below WARNING out, unless the level is
``debug``; in either format:

* ``text``: ``2025-01-31T12:00:00.123Z WARNING rvguard.gateway upstream failed event=upstream_failed
  request_id=req-… tenant=assured status=502``;
* ``json``: one object a line, ``{"ts", "level", "logger", "message", <fields>}``.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, Literal

__all__ = ["JsonFormatter", "TextFormatter", "configure", "fields_of"]

LogFormat = Literal["text", "json"]
#: libraries that log every HTTP call at INFO
_CHATTY = ("httpx", "httpcore", "httpx_sse")
#: record attributes that are not a call's fields (uvicorn adds ``color_message``, a copy of the message)
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
    "color_message",
}


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    """The fields a call passed in ``extra`` (everything that is not a standard record attribute)."""
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD and not k.startswith("_")}


def _timestamp(record: logging.LogRecord) -> str:
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{whole}.{int(record.msecs):03d}Z"


def _plain(value: Any) -> str:
    text = str(value)
    if text and all(c.isprintable() and c not in ' ="' for c in text):
        return text
    return json.dumps(text, ensure_ascii=True)


class TextFormatter(logging.Formatter):
    """``<UTC time> <LEVEL> <logger> <message> key=value ...`` on one line (control characters escaped)."""

    def format(self, record: logging.LogRecord) -> str:
        """One line."""
        message = json.dumps(record.getMessage(), ensure_ascii=True)[1:-1]
        parts = [_timestamp(record), record.levelname, record.name, message]
        parts += [f"{k}={_plain(v)}" for k, v in fields_of(record).items()]
        if record.exc_info:
            parts.append("exc=" + json.dumps(self.formatException(record.exc_info)))
        return " ".join(parts)


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``ts``, ``level``, ``logger``, ``message`` and the record's fields."""

    def format(self, record: logging.LogRecord) -> str:
        """One line."""
        out: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        out.update((k, v) for k, v in fields_of(record).items() if k not in out)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to the ``sys.stderr`` of the moment (a redirected or captured stream included)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def configure(fmt: LogFormat = "text", level: str = "info") -> None:
    """Send every log line to stderr, one a line, in ``fmt``.

    Installs one handler on the root logger (replacing the one an earlier call
    installed; other handlers stay) and sets the root level.
    """
    handler = _Stderr()
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Stderr)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for chatty in _CHATTY:  # a line per upstream call and per probe: noise at INFO
        logging.getLogger(chatty).setLevel(logging.DEBUG if level.lower() == "debug" else logging.WARNING)
