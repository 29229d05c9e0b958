"""Lazy pyarrow import: Parquet is an optional extra (``rvguard[parquet]``)."""

from __future__ import annotations

from typing import Any

from ..errors import MissingExtraError

__all__ = ["pyarrow", "pyarrow_compute", "pyarrow_parquet"]


def pyarrow() -> Any:
    """The ``pyarrow`` module, or `MissingExtraError` naming the extra."""
    try:
        import pyarrow as pa
    except ImportError:
        raise MissingExtraError("pyarrow", "parquet") from None
    return pa


def pyarrow_parquet() -> Any:
    """``pyarrow.parquet``."""
    pyarrow()
    import pyarrow.parquet as pq

    return pq


def pyarrow_compute() -> Any:
    """``pyarrow.compute``."""
    pyarrow()
    import pyarrow.compute as pc

    return pc
