"""``rvguard init``: a starter contract that verifies, a keys file the gateway loads, no overwrite."""

from __future__ import annotations

from pathlib import Path

import pytest

from rvguard.cli import main
from rvguard.contract import load_contract
from rvguard.data import SPECS
from rvguard.gateway.config import load_keys


def test_the_starter_contract_verifies_and_the_keys_bind_its_tenants(tmp_path: Path) -> None:
    assert main(["init", str(tmp_path)]) == 0
    contract = load_contract(tmp_path / "contract.yaml")
    assert main(["verify", str(tmp_path / "contract.yaml")]) == 0
    assert main(["verify", str(tmp_path / "contract.yaml"), "--assume-backlog"]) == 0
    keys = load_keys(tmp_path / "keys.yaml")
    assert sorted(keys.keys.values()) == sorted(contract.tenants)
    assert keys.unauthenticated == "reject" and keys.claim_secret is not None
    keys.binder(contract)  # every key names a tenant of the contract


def test_each_init_draws_fresh_keys(tmp_path: Path) -> None:
    assert main(["init", str(tmp_path / "a")]) == main(["init", str(tmp_path / "b")]) == 0
    a, b = load_keys(tmp_path / "a" / "keys.yaml"), load_keys(tmp_path / "b" / "keys.yaml")
    assert not set(a.keys) & set(b.keys) and a.claim_secret != b.claim_secret


def test_nothing_is_overwritten_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "keys.yaml").write_text("mine\n")
    assert main(["init", str(tmp_path)]) == 2
    assert "keys.yaml: exists; --force overwrites" in capsys.readouterr().err
    assert not (tmp_path / "contract.yaml").exists() and (tmp_path / "keys.yaml").read_text() == "mine\n"
    assert main(["init", str(tmp_path), "--force"]) == 0
    assert (tmp_path / "keys.yaml").read_text() != "mine\n"


def test_examples_are_the_shipped_specs(tmp_path: Path) -> None:
    assert main(["init", str(tmp_path), "--examples"]) == 0
    for name in ("marquee.yaml", "two_tenants.yaml", "trace.schema.json"):
        assert (tmp_path / "specs" / name).read_bytes() == (SPECS / name).read_bytes()


def test_the_keys_file_is_private_and_the_others_readable(tmp_path: Path) -> None:
    assert main(["init", str(tmp_path)]) == 0
    assert (tmp_path / "keys.yaml").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "contract.yaml").stat().st_mode & 0o777 == 0o644
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_dangling_symlink_at_keys_is_refused_and_never_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere" / "stolen.yaml"
    elsewhere.parent.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "keys.yaml").symlink_to(elsewhere)
    assert main(["init", str(out)]) == 2
    assert not elsewhere.exists() and not (out / "contract.yaml").exists()
    assert main(["init", str(out), "--force"]) == 0  # --force replaces the link itself
    assert not elsewhere.exists() and not (out / "keys.yaml").is_symlink()
    assert (out / "keys.yaml").stat().st_mode & 0o777 == 0o600


def test_a_failure_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "keys.yaml").mkdir()  # cannot be replaced by a file, even with --force
    assert main(["init", str(tmp_path), "--force"]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keys.yaml"]
    assert (tmp_path / "keys.yaml").is_dir()


def test_the_written_files_name_only_pages_that_exist_and_no_internal_words(tmp_path: Path) -> None:
    """What `init` writes is user documentation too: it points at pages of docs/, not at the team's
    design sections or a README section that moved, and calls the home-made claim legacy."""
    import re

    assert main(["init", str(tmp_path)]) == 0
    root = Path(__file__).resolve().parents[2]
    for name in ("contract.yaml", "keys.yaml"):
        text = (tmp_path / name).read_text()
        assert not re.search(r"DESIGN|[Ii]ssue \d+|README \"", text), name
        for page in re.findall(r"docs/[\w-]+\.md", text):
            assert (root / page).is_file(), (name, page)
    assert "legacy" in (tmp_path / "keys.yaml").read_text()


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_a_symlinked_specs_directory_is_never_written_through(tmp_path: Path, force: list[str]) -> None:
    """Before: ``--examples`` wrote its three files where a planted ``specs`` link pointed."""
    elsewhere, out = tmp_path / "elsewhere", tmp_path / "out"
    elsewhere.mkdir()
    out.mkdir()
    (out / "specs").symlink_to(elsewhere)
    assert main(["init", str(out), "--examples", *force]) == 2
    assert list(elsewhere.iterdir()) == [] and sorted(p.name for p in out.iterdir()) == ["specs"]


def test_a_failure_removes_the_directories_it_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: a failure while staging the examples left ``DIR/`` and ``DIR/specs/`` behind."""
    monkeypatch.setattr("rvguard.data.SPECS", tmp_path / "no-such-specs")
    assert main(["init", str(tmp_path / "new" / "dir"), "--examples"]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == []
