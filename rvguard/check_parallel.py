"""`rvguard check DIR --workers N | --scheduler ADDRESS`: a partitioned trace judged on Dask.

Each partition is read and reduced on a Dask worker (`distributed`), in
parallel: its Parquet file into columns, then into a `PartitionSummary`
(`rvguard.monitors.partition`). The client folds the summaries in trace
order (`rvguard.monitors.fold`, whose docstring holds the argument that the
result is the single-process check's, floats included). A trace the fold
cannot show clean — a bad row, time going back, a protocol break, a rid
arriving twice, even a mere hash collision — is checked again by the
single-process streaming check, so an error is reported exactly as without
``--workers`` (at the cost of a sequential pass).

Memory: a worker holds one partition at a time (its Arrow table, columns and
the offline checker's arrays: a few hundred bytes an event, measured in
docs/performance.md); at most two summaries per worker wait for the fold;
the client holds the open requests' rows and 8 bytes per rid seen. A
``LocalCluster`` of N single-threaded worker processes on 127.0.0.1 is
started by default; ``--scheduler`` uses an existing cluster, whose workers
must have rvguard installed. Needs the ``rvguard[dask]`` extra.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

from .check import CheckReport, check_trace
from .contract import Contract
from .errors import MissingExtraError, SpecError, TraceError
from .events import Event, event_from_dict
from .io.dataset import PARTITION_SUFFIXES, is_dataset, partitions
from .monitors import DEFAULT_PROPERTIES
from .monitors.fold import Fold
from .monitors.monitor import resolve_properties
from .monitors.partition import PartitionSummary, summarise
from .progress import task

__all__ = ["check_partitioned", "summarise_file"]

AHEAD = 2  # summaries computed ahead of the fold, per worker: bounds what waits in memory


def _distributed() -> Any:
    """The ``distributed`` module, or `MissingExtraError` naming ``rvguard[dask]``."""
    try:
        import distributed
    except ImportError:
        raise MissingExtraError("distributed", "dask") from None
    return distributed


def summarise_file(path: str, index: int, contract: Contract, names: Sequence[str]) -> PartitionSummary:
    """Read one partition and reduce it (runs on a worker); a bad file is a ``problem``, not a raise."""
    from .io.parquet import open_parquet, record_from_row
    from .io.parquet_columns import table_columnar

    try:
        table = open_parquet(path).read()
        trace = table_columnar(table, path)
    except (TraceError, OSError) as err:
        return PartitionSummary(index, path, problem=str(err))

    def records(rows: Sequence[int]) -> list[Event]:
        return [event_from_dict(record_from_row(r)) for r in table.take(list(rows)).to_pylist()]

    return summarise(trace, contract, names, index=index, path=path, records=records)


@contextlib.contextmanager
def _client(workers: int | None, scheduler: str | None, *, processes: bool) -> Iterator[tuple[Any, int]]:
    """A Dask client and its number of workers: of a new LocalCluster, or of the given scheduler."""
    distributed = _distributed()
    if scheduler is not None:
        with distributed.Client(scheduler) as client:
            yield client, max(1, len(client.scheduler_info().get("workers", {})))
        return
    n = workers or 1
    with (
        distributed.LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=processes,
            host="127.0.0.1",
            protocol="tcp",
            dashboard_address="127.0.0.1:0",  # no fixed port (8787 may be taken)
            silence_logs=logging.ERROR,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client, n


def _fold(client: Any, parts: list[str], contract: Contract, names: list[str], ahead: int) -> Fold:
    """Summaries computed ``ahead`` at a time, folded in trace order as they come."""
    fold = Fold(contract, names)
    shared = client.scatter(contract, broadcast=True)
    queue: deque[Any] = deque()
    todo = iter(enumerate(parts))

    def submit() -> None:
        for index, path in todo:
            queue.append(client.submit(summarise_file, path, index, shared, names, pure=False))
            return

    for _ in range(ahead):
        submit()
    with task(f"checking {len(parts)} partitions", total=len(parts), unit="partition") as advance:
        while queue:
            future = queue.popleft()
            summary = future.result()
            future.release()
            advance(1)
            if not fold.add(summary):
                client.cancel(list(queue))
                break
            submit()
    return fold


def _parts(spec: str) -> list[str]:
    if is_dataset(spec):
        return partitions(spec)
    if not spec.lower().endswith(PARTITION_SUFFIXES):
        raise SpecError(
            f"--workers and --scheduler check Parquet: a .parquet file, a directory or a glob, not {spec!r}",
            field="trace",
            value=spec,
        )
    return [spec]


def check_partitioned(
    spec: str,
    contract: Contract,
    *,
    properties: Sequence[str] = DEFAULT_PROPERTIES,
    workers: int | None = None,
    scheduler: str | None = None,
    processes: bool = True,
) -> CheckReport:
    """Check a partitioned Parquet trace on Dask; the report is the single-process check's.

    Args:
        spec: a directory or glob of Parquet partitions (or one Parquet file).
        contract: the contract.
        properties: the properties to report (built-in names).
        workers: the LocalCluster's worker count (default 1); ignored with ``scheduler``.
        scheduler: the address of an existing Dask scheduler.
        processes: LocalCluster workers as processes (threads share one GIL: for tests).

    Raises:
        MissingExtraError: ``distributed`` is not installed.
        SpecError: bad properties, a worker count below 1, or a trace that is not Parquet.
        TraceError: the trace's first bad row (from the single-process check).
    """
    _distributed()
    started = time.monotonic()
    if workers is not None and workers < 1:
        raise SpecError(f"--workers wants at least 1, got {workers}", field="workers", value=workers)
    resolve_properties(contract, properties)
    parts = _parts(spec)
    names = [p for p in properties if p != "WF"]
    with _client(workers, scheduler, processes=processes) as (client, n):
        fold = _fold(client, parts, contract, names, AHEAD * n)
    if fold.unproven:
        return check_trace(spec, contract, properties=properties)
    violations, metrics = fold.result()
    faults, attributed, client_faults = _attribute(parts, contract, violations, fold.client_errors)
    return CheckReport(
        trace=spec,
        properties=tuple(properties),
        violations=faults,
        metrics=metrics,
        seconds=time.monotonic() - started,
        attributed=attributed,
        client_faults=client_faults,
    )


def _attribute(
    parts: list[str], contract: Contract, violations: list[Any], client_errors: int
) -> tuple[list[Any], list[Any], int]:
    """The single-process check's attribution of SF and AF violations (`rvguard.attribution`) and its
    count of client faults, by one streamed pass over the partitions in order in this process — made
    only when the fold found a violation to attribute or a ``fail`` blaming the client (counted even
    in a trace with no violation), so a clean corpus pays nothing for it."""
    if not client_errors and not any(v.property in ("SF", "AF") for v in violations):
        return violations, [], 0
    from .attribution import Attribution
    from .io import iter_records

    evidence = Attribution(contract)
    for part in parts:
        for path in partitions(part) if is_dataset(part) else [part]:
            for _, item in iter_records(path):
                if not isinstance(item, TraceError):
                    evidence.feed(item)
    faults, attributed = evidence.split(sorted(violations, key=lambda v: v.key))
    return faults, attributed, evidence.client_faults
