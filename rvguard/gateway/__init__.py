"""The guarded OpenAI-compatible gateway (``rvguard serve``) and engine calibration (``rvguard calibrate``).

Needs the ``gateway`` extra (starlette, uvicorn, prometheus_client, httpx);
importing this package does not import them, its modules do.
"""

from __future__ import annotations

__all__: list[str] = []
