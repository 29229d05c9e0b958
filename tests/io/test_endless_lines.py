"""Every line reader has a line-length cap and every id a length bound (exit 2, bounded memory).

Before: ``rvguard check`` or ``rvguard review`` on a link to /dev/zero grew without bound (24 GB in
74 s, then the kernel's kill; under a memory cap a `MemoryError` traceback and exit 1, which scripts
read as "violation"), and a 200 MB rid on one line was accepted.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rvguard.bounds import MAX_ID_CHARS, MAX_LINE_BYTES
from rvguard.cli import main
from rvguard.errors import LineTooLongError, TraceFormatError
from rvguard.events import event_from_dict
from rvguard.io import iter_records
from rvguard.io.public import detect_public_format
from rvguard.review.alerts import count_alerts

from ..conftest import SPECS

MARQUEE = str(SPECS / "marquee.yaml")
TOO_LONG = f"line longer than {MAX_LINE_BYTES:,}"


def _endless(tmp_path: Path, name: str) -> Path:
    link = tmp_path / name
    link.symlink_to("/dev/zero")
    return link


def _cap_memory() -> None:  # the old code would eat the machine: a cap makes it fail instead
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


@pytest.mark.parametrize("name", ["z.jsonl", "z.csv", "z.ndjson"])
@pytest.mark.parametrize("command", [["check", "--contract", MARQUEE], ["review", "--contract", MARQUEE]])
def test_an_endless_line_is_exit_2_at_once_in_bounded_memory(
    tmp_path: Path, name: str, command: list[str]
) -> None:
    path = _endless(tmp_path, name)
    cmd = [sys.executable, "-m", "rvguard.cli", command[0], str(path), *command[1:]]
    start = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, preexec_fn=_cap_memory)
    took = time.monotonic() - start
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"{path}:1: {TOO_LONG}" in done.stderr and "Traceback" not in done.stderr
    assert took < 10.0  # the process, imports included; the reading itself below


@pytest.mark.parametrize("name", ["z.jsonl", "z.csv"])
@pytest.mark.parametrize("lenient", [False, True])
def test_the_cap_is_fast_and_holds_in_lenient_mode(
    tmp_path: Path, name: str, lenient: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _endless(tmp_path, name)
    start = time.monotonic()
    assert main(["check", str(path), "--contract", MARQUEE, *(["--lenient"] if lenient else [])]) == 2
    assert time.monotonic() - start < 1.0
    assert f"{path}:1: {TOO_LONG}" in capsys.readouterr().err


def test_a_long_line_after_good_ones_is_located(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    good = json.dumps({"t": 0, "kind": "arrive", "rid": "a", "tenant": "assured"})
    path.write_text(good + "\n" + good.replace('"a"', '"b"') + "\n" + "x" * (MAX_LINE_BYTES + 1) + "\n")
    with pytest.raises(LineTooLongError, match=f"t.jsonl:3: {TOO_LONG}"):
        list(iter_records(path))
    path.write_text(good + "\n" + "x" * (MAX_LINE_BYTES - 1) + "\n")  # at the cap: an ordinary bad line
    errors = [item for _, item in iter_records(path) if isinstance(item, TraceFormatError)]
    assert len(errors) == 1 and not isinstance(errors[0], LineTooLongError)


def test_public_traces_and_alert_logs_are_capped_too(tmp_path: Path) -> None:
    with pytest.raises(LineTooLongError, match=TOO_LONG):
        detect_public_format(_endless(tmp_path, "p.csv"))
    with pytest.raises(LineTooLongError, match=TOO_LONG):
        count_alerts(_endless(tmp_path, "alerts.jsonl"))


@pytest.mark.parametrize("field", ["rid", "tenant"])
def test_ids_have_a_length_bound(field: str) -> None:
    record = {"t": 0, "kind": "arrive", "rid": "a", "tenant": "assured"}
    assert event_from_dict({**record, field: "x" * MAX_ID_CHARS})
    with pytest.raises(TraceFormatError, match=f"longer than {MAX_ID_CHARS} characters") as err:
        event_from_dict({**record, field: "x" * (MAX_ID_CHARS + 1)})
    assert err.value.field == field


#: the child's own peak (VmHWM, kB): ru_maxrss would carry the forking parent's peak across exec
_PEAK = (
    "import sys; from rvguard.cli import main; code = main(sys.argv[1:]); "
    "hwm = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0]; "
    "print('peak', hwm, file=sys.stderr); sys.exit(code)"
)


def test_a_huge_rid_is_exit_2_in_bounded_memory(tmp_path: Path) -> None:
    """Before: a 200 MB rid was accepted (867 MB RSS); 50 MB here."""
    path = tmp_path / "t.jsonl"
    path.write_text(
        json.dumps({"t": 0, "kind": "arrive", "rid": "r" * (50 << 20), "tenant": "assured"}) + "\n"
    )
    cmd = [sys.executable, "-c", _PEAK, "check", str(path), "--contract", MARQUEE]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, preexec_fn=_cap_memory)
    assert done.returncode == 2 and TOO_LONG in done.stderr, done.stderr[-2000:]
    peak_kib = int(done.stderr.rsplit("peak ", 1)[1].split()[0])
    assert peak_kib < 200 << 10  # 200 MB: the interpreter and its imports, one capped line
