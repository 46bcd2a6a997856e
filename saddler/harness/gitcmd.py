"""The one way saddler calls git (the CLI in a subprocess: no prompts, C locale, optional fixed dates),
plus the run repository's set-up and worktree bookkeeping that must survive a crash.

`git(...)` raises `HarnessError` (with the command and git's stderr) when `check` is true and git fails;
with `check=False` the caller reads `returncode` itself (a conflict is data, not an exception). A git that fails
for lack of space raises `DiskFullError` either way.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

from saddler.errors import DiskFullError, HarnessError

Clock = Callable[[], float]

COMMIT_EPOCH = 946684800
"""2000-01-01 00:00 UTC: saddler's commits are dated logically from here, never by the wall clock."""


def logical_commit_time(iteration: int, attempt: int = 0) -> int:
    """The date of the commits of `iteration` (its `attempt`-th try): one minute per iteration, one second per try
    after `COMMIT_EPOCH`, so the same seed and config give the same commits."""
    return COMMIT_EPOCH + iteration * 60 + attempt


# Every git saddler runs runs no code an agent could have planted: no hooks, no fsmonitor, no pager, editor,
# askpass, ssh or external diff, and no system or user config (an unconfined agent may write ~/.gitconfig).
# The run's clone holds only the config saddler wrote; `unsafe_config` finds keys there that would run code.
SAFE_CONFIG = (
    "core.hooksPath=/dev/null", "core.fsmonitor=false", "core.untrackedCache=false", "core.pager=cat",
    "core.editor=false", "core.askPass=", "core.sshCommand=false", "credential.helper=",
    "core.gitProxy=",
)  # fmt: skip
SAFE_PREFIX = tuple(word for pair in SAFE_CONFIG for word in ("-c", pair))
_CODE_KEYS = re.compile(
    r"^(core\.(fsmonitor|hookspath|sshcommand|pager|editor|askpass|gitproxy|worktree|alternaterefscommand)|"
    r"filter\..*|diff\..*\.(command|textconv)|diff\.external|merge\..*\.driver|gpg\..*program|credential\..*|"
    r"include(if)?\..*|sequence\.editor|uploadpack\..*|remote\..*\.(uploadpack|receivepack|proxy)|"
    r"url\..*|http\..*|core\.attributesfile|extensions\.worktreeconfig)$",
    re.IGNORECASE,
)


def unsafe_config(git_dir: Path) -> list[str]:
    """The keys of `git_dir`'s own config file (and worktree config files) that would make git run a program or
    read config or attributes from elsewhere; [] for a config only saddler wrote. Read as text: no git runs."""
    found = []
    for path in [Path(git_dir) / "config", *sorted((Path(git_dir) / "worktrees").glob("*/config.worktree"))]:
        proc = subprocess.run(
            ["git", "config", "--file", str(path), "--name-only", "--list"],
            capture_output=True, text=True, env=git_env(), check=False,
        )  # fmt: skip
        found += [key for key in proc.stdout.split() if _CODE_KEYS.match(key)]
    return sorted(set(found))


def user_identity() -> list[str]:
    """`-c user.name=… -c user.email=…` from the user's own git config, for a commit saddler makes in the user's
    repository on the user's behalf (the only place their config is read: reading config runs no program)."""
    env = {k: v for k, v in git_env().items() if k not in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM")}
    out: list[str] = []
    for key in ("user.name", "user.email"):
        proc = subprocess.run(["git", "config", "--get", key], capture_output=True, text=True, env=env, check=False)
        if proc.returncode == 0 and proc.stdout.strip():
            out += ["-c", f"{key}={proc.stdout.strip()}"]
    return out


def git_env(clock: Clock | None = None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for git: never prompt, stable messages, no system or user config; commit dates from `clock`
    when given; then `extra` (e.g. `GIT_INDEX_FILE` for a private index), which the caller chooses deliberately."""
    env = dict(os.environ)
    env.update({"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "LANG": "C", "GIT_OPTIONAL_LOCKS": "0"})
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_ATTR_NOSYSTEM": "1"})
    for key in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_CONFIG", "GIT_CONFIG_COUNT",
                "GIT_EXTERNAL_DIFF", "GIT_PAGER", "GIT_EDITOR", "GIT_ASKPASS", "GIT_SSH", "GIT_SSH_COMMAND",
                "GIT_EXEC_PATH", "GIT_TEMPLATE_DIR", "GIT_CONFIG_PARAMETERS", "GIT_PROXY_COMMAND"):  # fmt: skip
        env.pop(key, None)
    if clock is not None:
        stamp = f"{int(clock())} +0000"
        env["GIT_AUTHOR_DATE"] = stamp
        env["GIT_COMMITTER_DATE"] = stamp
    if extra:
        env.update(extra)
    return env


def git(
    args: Sequence[str],
    cwd: Path,
    *,
    check: bool = True,
    input: str | None = None,
    clock: Clock | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `git <args>` in `cwd` and return the completed process, stdout/stderr decoded as UTF-8.
    `env` adds variables (such as `GIT_INDEX_FILE`) to git's scrubbed environment.

    Bytes are decoded without newline translation (a lone `\\r` or a CRLF in a diff survives the round trip
    through `input`), undecodable bytes as surrogate escapes."""
    try:
        raw = subprocess.run(
            ["git", *SAFE_PREFIX, *args],
            cwd=cwd,
            capture_output=True,
            input=None if input is None else input.encode("utf-8", "surrogateescape"),
            env=git_env(clock, env),
            check=False,
        )
    except FileNotFoundError as exc:
        raise HarnessError(f"cannot run git in {cwd}: {exc}; install git and check the folder exists") from exc
    proc = subprocess.CompletedProcess(
        raw.args,
        raw.returncode,
        raw.stdout.decode("utf-8", "surrogateescape"),
        raw.stderr.decode("utf-8", "surrogateescape"),
    )
    if proc.returncode != 0:
        raise_if_disk_full(proc.stderr, args, cwd)
        if check:
            raise HarnessError(f"git {' '.join(args)} failed in {cwd} (exit {proc.returncode}): {_tail(proc.stderr)}")
    return proc


_DISK_FULL = ("No space left on device", "Disk quota exceeded")
_WRITE_FAILED = re.compile(r"unable to (write|create)|write error|could not (write|reset index)|short write", re.I)
NEARLY_FULL_BYTES = 1 << 20


def raise_if_disk_full(stderr: str, args: Sequence[str], cwd: Path) -> None:
    """A full disk is a fault even where a failing git is data (a conflict): it must not become an invalid node.
    git does not always say why a write failed ("unable to write file x"), so a failed write on a file system
    with less than 1 MiB left counts as a full disk too."""
    hard = any(marker in stderr for marker in _DISK_FULL)
    if hard or (_WRITE_FAILED.search(stderr) and _free_bytes(cwd) < NEARLY_FULL_BYTES):
        raise DiskFullError(f"git {args[0]}", cwd)


def _free_bytes(path: Path) -> int:
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return NEARLY_FULL_BYTES


def git_all(
    calls: Sequence[tuple[Sequence[str], Path]], env: Mapping[str, str] | None = None
) -> list[subprocess.CompletedProcess[str]]:
    """`git(args, cwd, env=env)` of every call at once, each waited on by its own thread (for independent reads: the
    machine runs them side by side); the results in the order of `calls`, the first failure raised."""
    if len(calls) <= 1:
        return [git(args, cwd, env=env) for args, cwd in calls]
    results: list[subprocess.CompletedProcess[str] | BaseException | None] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            results[i] = git(*calls[i], env=env)
        except BaseException as exc:  # handed to the caller below
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,), name="saddler-git") for i in range(1, len(calls))]
    for thread in threads:
        thread.start()
    run(0)
    for thread in threads:
        thread.join()
    done: list[subprocess.CompletedProcess[str]] = []
    for result in results:
        if isinstance(result, BaseException):
            raise result
        assert result is not None
        done.append(result)
    return done


def git_pipe(args: Sequence[str], cwd: Path, stderr: IO[bytes]) -> subprocess.Popen[bytes]:
    """Start a long-lived `git <args>` (a `--stdin` / `--batch` mode) with binary pipes on stdin and stdout and its
    stderr into the caller's file `stderr` (a pipe nobody reads could block it), in git's environment; see
    `saddler.harness.gitbatch`."""
    try:
        return subprocess.Popen(
            ["git", *SAFE_PREFIX, *args],
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=git_env(),
        )
    except FileNotFoundError as exc:
        raise HarnessError(f"cannot run git in {cwd}: {exc}; install git and check the folder exists") from exc


def git_bytes(args: Sequence[str], cwd: Path) -> bytes:
    """Run `git <args>` and return raw stdout (archives, binary diffs); raises `HarnessError` on failure."""
    proc = subprocess.run(["git", *SAFE_PREFIX, *args], cwd=cwd, capture_output=True, env=git_env(), check=False)
    if proc.returncode != 0:
        stderr = proc.stderr.decode("utf-8", "replace")
        raise_if_disk_full(stderr, args, cwd)
        raise HarnessError(f"git {' '.join(args)} failed in {cwd} (exit {proc.returncode}): {_tail(stderr)}")
    return proc.stdout


def _tail(text: str, limit: int = 800) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def is_repo_root(path: Path) -> bool:
    """True for a repository's top folder (main or linked worktree) or a bare repository itself;
    a folder inside someone else's repository (a template in a source checkout) is not one."""
    proc = git(["rev-parse", "--is-bare-repository", "--show-toplevel"], path, check=False)
    lines = proc.stdout.split("\n")
    if proc.returncode != 0 and lines[0] == "true":
        gitdir = git(["rev-parse", "--absolute-git-dir"], path, check=False).stdout.strip()
        return bool(gitdir) and Path(gitdir).resolve() == path.resolve()
    return proc.returncode == 0 and len(lines) > 1 and Path(lines[1].strip()).resolve() == path.resolve()


def configure_run_repo(repo_dir: Path, source: str) -> None:
    """Local identity, no gc (objects never vanish mid-run), no signing, interpreter caches ignored;
    remembers where the harness came from in `saddler.source`."""
    for key, value in (
        ("user.name", "saddler"),
        ("user.email", "saddler@localhost"),
        ("gc.auto", "0"),
        ("maintenance.auto", "false"),
        ("commit.gpgsign", "false"),
        ("core.autocrlf", "false"),
        ("advice.detachedHead", "false"),
        ("saddler.source", source),
    ):
        git(["config", key, value], repo_dir)
    exclude = repo_dir / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    with exclude.open("a", encoding="utf-8") as fh:
        fh.write("# saddler: never commit interpreter caches\n__pycache__/\n*.pyc\n")


def worktree_admin_dir(worktree: Path) -> Path | None:
    """The admin entry (`<git_dir>/worktrees/<id>`) a linked worktree's `.git` file points to; None for anything
    else (no such file, a main repository's `.git` folder, an entry without `gitdir`)."""
    try:
        pointer = (Path(worktree) / ".git").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not pointer.startswith("gitdir: "):
        return None
    admin = (Path(worktree) / pointer[len("gitdir: ") :]).resolve()
    return admin if (admin / "gitdir").is_file() else None


def drop_dead_worktree_entries(git_dir: Path) -> None:
    """Remove `<git_dir>/worktrees/*` entries whose folder is gone, locked or not (a crash leaves both).

    git creates the worktree folder before it writes `gitdir`, so a live `worktree add` in another
    thread is never mistaken for a dead entry; an entry without `gitdir` counts as dead after a minute."""
    admin = git_dir / "worktrees"
    if not admin.is_dir():
        return
    for entry in admin.iterdir():
        try:
            dead = not Path((entry / "gitdir").read_text().strip()).parent.exists()
        except OSError:
            dead = _age(entry) > 60
        if dead:
            shutil.rmtree(entry, ignore_errors=True)


def _age(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0


def stale_locks(git_dir: Path, older_than: float) -> list[Path]:
    """git's `*.lock` files under `git_dir` (index, HEAD, config, packed-refs, refs/**, worktrees/*/...) last
    touched before `older_than` (seconds since the epoch), sorted. Loose-object folders are not searched."""
    found = []
    for root, dirs, files in os.walk(git_dir):
        if Path(root) == git_dir / "objects":
            dirs[:] = [d for d in dirs if d in ("info", "pack")]
        for name in files:
            if name.endswith(".lock"):
                path = Path(root) / name
                try:
                    if path.lstat().st_mtime < older_than:
                        found.append(path)
                except FileNotFoundError:
                    continue
    return sorted(found)


def remove_stale_locks(git_dir: Path, older_than: float) -> list[Path]:
    """Delete `stale_locks(git_dir, older_than)` and return them. Call it only while holding the run lock
    taken at `older_than`: then no live git process of this run can own them (they are a killed run's)."""
    removed = []
    for path in stale_locks(git_dir, older_than):
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        removed.append(path)
    return removed
