"""Disk full (issue 12, item 3): one line saying what could not be written and where, "free space and run again",
exit 1; nothing half-written; the resumed run ends where an uninterrupted run ends.

Faults are injected where real writes happen (`saddler.run.faults`: `OSError(ENOSPC)` and SQLite's
`database or disk is full`); SQLite's own SQLITE_FULL is produced for real with `PRAGMA max_page_count`; and, where
user namespaces allow it, a whole run goes on a real tmpfs that fills up."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_output import said

from evodag.errors import StoreFullError
from evodag.store import EvoDAG
from saddler.errors import DiskFullError
from saddler.harness.gitcmd import git as saddler_git

FAULTS = (
    "rollout:9:sqlite_full",
    "rollout:4:enospc",
    "write:1:sqlite_full",
    "commit:2:enospc",
    "reflect:1:sqlite_full",
    "finish:1:enospc",
)


def _saddler_run(run_dir: Path, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SADDLER_FAULT"}
    if fault:
        env["SADDLER_FAULT"] = fault
    return subprocess.run(
        [sys.executable, "-m", "saddler", "run", str(run_dir), "--quiet"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _assert_one_line_disk_full(proc: subprocess.CompletedProcess[str], context: str) -> None:
    assert proc.returncode == 1, f"{context}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
    lines = said(proc.stderr)
    assert len(lines) == 1, f"{context}: not one line:\n{proc.stderr[-3000:]}"
    assert lines[0].startswith("error: disk full: ") and "free space and run again" in proc.stderr, proc.stderr


@pytest.mark.slow
def test_disk_full_at_each_write_is_one_line_and_the_run_resumes_to_the_same_result(
    tmp_path: Path,
    dag_signature: Callable[[Path], dict[str, Any]],
    run_git: Callable[..., Any],
    make_run: Callable[..., Path],
) -> None:
    reference = make_run(tmp_path / "reference")
    assert _saddler_run(reference).returncode == 0
    faulted = make_run(tmp_path / "faulted")
    for fault in FAULTS:
        _assert_one_line_disk_full(_saddler_run(faulted, fault), fault)
        with sqlite3.connect(faulted / "evodag.sqlite") as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert _saddler_run(faulted).returncode == 0
    assert dag_signature(faulted) == dag_signature(reference)
    assert run_git(faulted, "fsck", "--no-progress").returncode == 0
    assert sorted(p.name for p in (faulted / "best").iterdir()) == sorted(
        p.name for p in (reference / "best").iterdir()
    )


def test_sqlite_full_rolls_back_the_whole_transaction_with_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "evodag.sqlite"
    with EvoDAG(path) as store:
        run = store.create_run({}, 0).id
        base = store.add_node(run, "a" * 40, None, 0, "baseline", "baseline", "baseline", status="baseline").id
        pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
        store.conn.execute(f"PRAGMA max_page_count = {pages + 2}")  # a real SQLITE_FULL, a few pages from now
        events = len(store.events())
        with (
            pytest.raises(StoreFullError, match=r"disk full: the EvoDAG .* could not be written") as exc,
            store.transaction(),
        ):
            node = store.add_node(run, "b" * 40, base, 1, "capability", "capability", "patch")
            store.add_edge(run, base, node.id, "patch", "x" * 50_000, ["f"], 1, 0)  # does not fit
        assert exc.value.exit_code == 1 and "free space and run again" in str(exc.value)
        assert [n.id for n in store.nodes()] == [base] and len(store.events()) == events  # nothing half-written
        store.conn.execute("PRAGMA max_page_count = 1073741823")
        store.add_node(run, "b" * 40, base, 1, "capability", "capability", "patch")  # space again: it works
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_git_failing_for_lack_of_space_is_a_disk_full_fault_even_when_failure_is_data(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "git").write_text("#!/bin/sh\necho 'fatal: write error: No space left on device' >&2\nexit 128\n")
    (fake / "git").chmod(0o755)
    old = os.environ["PATH"]
    os.environ["PATH"] = f"{fake}{os.pathsep}{old}"
    try:
        with pytest.raises(DiskFullError, match=r"disk full: git apply could not write to .*free space"):
            saddler_git(["apply", "--3way", "-"], tmp_path, check=False, input="diff")
    finally:
        os.environ["PATH"] = old


def _userns_tmpfs_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"],
        capture_output=True,
    )
    return probe.returncode == 0


REAL_FS_SCRIPT = """
set -u
mount -t tmpfs -o size={size} tmpfs {mnt}
cp -a {src} {mnt}/run
{python} -m saddler run {mnt}/run --quiet 2> {out}/first.err; echo $? > {out}/first.rc
df -k {mnt} | tail -1 > {out}/df.txt
mount -o remount,size=256m {mnt}
{python} -m saddler run {mnt}/run --quiet > /dev/null 2> {out}/second.err; echo $? > {out}/second.rc
cp -a {mnt}/run {out}/run
"""


@pytest.mark.slow
@pytest.mark.skipif(not _userns_tmpfs_works(), reason="needs unshare with user and mount namespaces")
def test_a_real_run_on_a_tiny_filesystem_stops_cleanly_and_resumes(
    tmp_path: Path, dag_signature: Callable[[Path], dict[str, Any]], make_run: Callable[..., Path]
) -> None:
    reference = make_run(tmp_path / "reference")
    assert _saddler_run(reference).returncode == 0
    fresh = make_run(tmp_path / "fresh")
    mnt, out = tmp_path / "mnt", tmp_path / "out"
    mnt.mkdir()
    out.mkdir()
    script = REAL_FS_SCRIPT.format(size="1200k", mnt=mnt, src=fresh, python=sys.executable, out=out)
    subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script], check=True, timeout=900)
    first = (out / "first.err").read_text()
    assert (out / "first.rc").read_text().strip() == "1", first[-3000:]
    assert len(said(first)) == 1 and said(first)[0].startswith("error: disk full: "), first[-3000:]
    assert "free space and run again" in first
    assert (out / "second.rc").read_text().strip() == "0", (out / "second.err").read_text()[-3000:]
    assert dag_signature(out / "run") == dag_signature(reference)
