"""Every user-facing command ends an environment fault with one line and an exit code (issue 12): disk full
(the OS's ENOSPC, SQLite's SQLITE_FULL), permission denied, read-only file system, other SQLite errors; a genuine
bug keeps its traceback."""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_output import said
from typer.testing import CliRunner

from evodag.cli import app as evodag_app
from saddler.cli.app import app
from saddler.errors import AccessError, DiskFullError, RunStateError, SaddlerError, as_user_error

runner = CliRunner()


def test_environment_faults_become_one_line_errors(tmp_path: Path) -> None:
    full = as_user_error(OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "report.md")))
    assert isinstance(full, DiskFullError) and full.exit_code == 1
    assert str(full).startswith(f"disk full: saddler could not write to {tmp_path / 'report.md'} (no space left")
    assert str(full).endswith("free space and run again (`saddler run` resumes where it stopped)")
    quota = as_user_error(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert isinstance(quota, DiskFullError) and str(quota).startswith("disk full: saddler could not write (no space")
    for code, what in ((errno.EACCES, "permission denied"), (errno.EROFS, "read-only file system")):
        denied = as_user_error(OSError(code, "x", "/srv/run/report.md"))
        assert isinstance(denied, AccessError) and denied.exit_code == 2
        assert str(denied).startswith(f"{what}: /srv/run/report.md cannot be written")
    sql_full = sqlite3.OperationalError("database or disk is full")
    assert isinstance(as_user_error(sql_full), DiskFullError)
    assert isinstance(as_user_error(sqlite3.OperationalError("database is locked")), RunStateError)
    other = as_user_error(sqlite3.DatabaseError("disk I/O error"))
    assert type(other) is SaddlerError and "SQLite failed: disk I/O error" in str(other)
    assert as_user_error(OSError(errno.ENOENT, "gone")) is None  # not an environment fault: a bug to see


def test_a_command_hitting_a_permission_fault_prints_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    assert runner.invoke(app, ["init", str(run), "--template", "opsdesk"]).exit_code == 0

    def denied(*_args: object, **_kwargs: object) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", str(run / "PAUSE"))

    monkeypatch.setattr(Path, "write_text", denied)  # root ignores file modes: the kernel's answer, simulated
    result = runner.invoke(app, ["pause", str(run)])
    assert (result.exit_code, result.output) == (
        2,
        f"error: permission denied: {run / 'PAUSE'} cannot be written; make the folder writable by this user or "
        "choose another one\n",
    )


def test_a_genuine_bug_keeps_its_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    assert runner.invoke(app, ["init", str(run), "--template", "opsdesk"]).exit_code == 0

    def bug(*_args: object, **_kwargs: object) -> None:
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", "/nowhere")

    monkeypatch.setattr(Path, "write_text", bug)
    result = runner.invoke(app, ["pause", str(run)])
    assert result.exit_code == 1 and isinstance(result.exception, FileNotFoundError)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_evo_dag_writing_to_a_full_device_is_one_line(
    tmp_path: Path, fixture_dag: Callable[[Path], dict[str, int]]
) -> None:
    db = tmp_path / "evodag.sqlite"
    fixture_dag(db)
    result = runner.invoke(evodag_app, ["export", "--db", str(db), "--out", "/dev/full"])
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == "evo-dag: cannot write /dev/full: No space left on device\n"


def test_a_full_disk_while_traces_land_names_the_run_folder_not_the_private_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil
    from types import SimpleNamespace

    from saddler.benchmark import RolloutResult
    from saddler.executor.workspace import RolloutFolder

    private = RolloutFolder(tmp_path / "shm" / "saddler-rollout-1")
    private.trace.mkdir(parents=True)
    (private.trace / "trace.json").write_text("{}")
    dest = tmp_path / "run" / "traces" / "n1" / "train" / "t1-r0-s7"

    def full(src: str, dst: str, **_kw: object) -> None:  # what shutil's sendfile copy raises on a full disk
        raise OSError(errno.ENOSPC, "No space left on device", str(src), None, str(dst))

    monkeypatch.setattr(shutil, "copyfile", full)
    job = SimpleNamespace(trace_dir=str(dest), harness_dir=str(tmp_path / "snapshot"))
    with pytest.raises(DiskFullError) as exc:
        private.land(RolloutResult("t1", 0.0, False, "task_failure"), job)  # type: ignore[arg-type]
    assert str(dest) in str(exc.value) and "shm" not in str(exc.value)
    copied = as_user_error(OSError(errno.ENOSPC, "No space left on device", "/dev/shm/x", None, str(dest)))
    assert copied is not None and str(dest) in str(copied) and "/dev/shm" not in str(copied)


@pytest.mark.slow
def test_ctrl_c_prints_one_line_saying_how_to_resume(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from interrupts import sigint_default

    run = tmp_path / "run"
    assert runner.invoke(app, ["init", str(run), "--template", "opsdesk"]).exit_code == 0
    env = {**os.environ, "SADDLER_FAULT": "rollout:30:int"}  # SIGINT, as Ctrl-C sends it, mid-evaluation
    proc = subprocess.run([sys.executable, "-m", "saddler", "run", str(run), "--quiet"], env=env, capture_output=True,
                          text=True, timeout=600, preexec_fn=sigint_default)  # fmt: skip
    assert proc.returncode == 130
    assert said(proc.stderr) == [f"interrupted; `saddler run {run}` resumes where it stopped"]
