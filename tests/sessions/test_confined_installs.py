"""Issue 21.2: an agent inside saddler's bubblewrap starts wherever it and saddler are installed, under /tmp too (the
sandbox replaces /tmp with an empty one); a session whose sandbox cannot start stops the run instead of being
recorded as a failed or empty session."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from repo_paths import REPO

from saddler.errors import BackendError
from saddler.sessions import confine, installs

BWRAP_OK, BWRAP_WHY = confine.bwrap_works()
needs_bwrap = pytest.mark.skipif(not BWRAP_OK, reason=f"bubblewrap cannot run here: {BWRAP_WHY}")


@pytest.fixture
def under_tmp() -> Iterator[Path]:
    """A fresh folder under /tmp itself (whatever TMPDIR says), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="saddler-under-tmp-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _npm_style_pi(prefix: Path, interpreter_dir: Path) -> Path:
    """A `pi` laid out as `npm install -g --prefix PREFIX` lays out a node CLI: `PREFIX/bin/pi` a symlink into
    `PREFIX/lib/node_modules/<package>/`, a dependency beside the package, `#!/usr/bin/env <interpreter>` whose
    interpreter is installed under /tmp too. Returns the bin folder."""
    modules = prefix / "lib" / "node_modules"
    (modules / "fake-pi" / "dist").mkdir(parents=True)
    (modules / "dep").mkdir()
    (modules / "dep" / "version.py").write_text("VERSION = '0.73.1'\n")
    cli = modules / "fake-pi" / "dist" / "cli.py"
    cli.write_text(
        "#!/usr/bin/env fakenode\n"
        "import sys, pathlib\n"
        "sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / 'dep'))\n"
        "from version import VERSION\n"
        "print(VERSION)\n"
    )
    cli.chmod(0o755)
    (prefix / "bin").mkdir()
    (prefix / "bin" / "pi").symlink_to("../lib/node_modules/fake-pi/dist/cli.py")
    interpreter_dir.mkdir(parents=True)
    node = interpreter_dir / "fakenode"
    node.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    node.chmod(0o755)
    return prefix / "bin"


@needs_bwrap
def test_pi_installed_under_tmp_starts_inside_the_sandbox(
    under_tmp: Path, outside: Path, monkeypatch: pytest.MonkeyPatch, command_backend: Callable[..., Any]
) -> None:
    bin_dir = _npm_style_pi(under_tmp / "npm", under_tmp / "node" / "bin")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{under_tmp / 'node' / 'bin'}{os.pathsep}{os.environ['PATH']}")
    backend = command_backend(outside / "run", "pi")
    (outside / "run").mkdir()
    argv = backend.confined(["pi", "--version"])
    ran = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert (ran.returncode, ran.stdout.strip()) == (0, "0.73.1"), ran.stderr
    roots = installs.executable_roots("pi")
    assert under_tmp / "npm" in roots and under_tmp / "node" in roots  # the prefixes, bin/ and lib/ with them
    assert not {Path("/"), Path("/tmp")} & set(roots)


CHILD = """
import json, subprocess, sys
from pathlib import Path
from saddler.config import RunConfig
from saddler.sessions import installs
from saddler.sessions.command import CommandBackend

run_dir, what = Path(sys.argv[1]), sys.argv[2]
config = RunConfig.model_validate({"sessions": {"backend": "command", "command": "pi"}})
if what in ("session", "import"):
    backend = CommandBackend(config.sessions, run_dir=run_dir, seed=0)
    imports = [sys.executable, "-c", "import evodag, saddler.agentcli; print(saddler.__file__)"]
    argv = ["evo-dag", "--help"] if what == "session" else imports
    ran = subprocess.run(backend.confined(argv), capture_output=True, text=True, timeout=120)
    print(json.dumps({"returncode": ran.returncode, "stdout": ran.stdout, "stderr": ran.stderr}))
else:
    from saddler.doctor import run_checks
    if what == "doctor-without-binds":
        installs.saddler_roots = lambda: []
    checks = run_checks(config, run_dir=run_dir)
    print(json.dumps({c.name: c.to_dict() for c in checks}))
"""


OWN_PACKAGES = ("saddler", "evodag", "benchmarks", "harness_templates")


@pytest.fixture
def editable_under_tmp(under_tmp: Path, outside: Path, fakes: Path) -> Callable[[str], dict[str, Any]]:
    """The stand-in CLIs on PATH, and saddler installed editable from a checkout under /tmp into a virtualenv under
    /tmp (its `.pth` names the checkout, as `pip install -e` leaves it, and this venv's dependencies), with its own
    `evo-dag` first on PATH.
    Returns `child(what)`: the JSON CHILD prints when run by that interpreter."""
    import json

    source = under_tmp / "checkout"
    for package in OWN_PACKAGES:
        shutil.copytree(REPO / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    venv = under_tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    purelib = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    site = Path(next(p for p in sys.path if p.endswith("site-packages")))  # typer, pydantic… of this venv
    deps = outside / "deps"  # this venv's packages but saddler's own (CI installs saddler there, not editable)
    deps.mkdir()
    for entry in site.iterdir():
        if entry.name.split("-")[0] not in OWN_PACKAGES and not entry.name.startswith("__editable__"):
            (deps / entry.name).symlink_to(entry)
    # This venv under /tmp too (a clone there): the links in `deps` point where the sandbox shows an empty /tmp, so
    # the .pth names `site` after them, as hidden as the checkout is without saddler's binds.
    hidden_site = [site] if site.resolve().is_relative_to("/tmp") else []
    Path(purelib, "__editable__.saddler.pth").write_text("".join(f"{p}\n" for p in (source, deps, *hidden_site)))
    evo_dag = venv / "bin" / "evo-dag"
    evo_dag.write_text(f"#!{venv / 'bin' / 'python'}\nimport sys\nfrom evodag.cli import app\nsys.exit(app())\n")
    evo_dag.chmod(0o755)
    run_dir = outside / "run"
    run_dir.mkdir()
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)

    def child(what: str) -> dict[str, Any]:
        proc = subprocess.run(
            [str(venv / "bin" / "python"), "-c", textwrap.dedent(CHILD), str(run_dir), what],
            capture_output=True, text=True, env=env, cwd=under_tmp, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return dict(json.loads(proc.stdout))

    return child


@needs_bwrap
def test_evo_dag_of_an_editable_install_under_tmp_runs_inside_the_sandbox(
    editable_under_tmp: Callable[[str], dict[str, Any]],
) -> None:
    """The `evo-dag` a session calls imports evodag from the checkout under /tmp inside the sandbox."""
    ran = editable_under_tmp("session")
    assert ran["returncode"] == 0 and "Usage" in ran["stdout"], ran["stderr"]


@needs_bwrap
def test_a_sandboxed_agent_imports_saddler_installed_editable_under_tmp(
    editable_under_tmp: Callable[[str], dict[str, Any]], under_tmp: Path
) -> None:
    """Issue 23.6: with `pip install -e` (DEVELOPERS.md's quick set-up) of a checkout under /tmp, the fake `pi` of
    tests/sessions/test_presets.py could not import saddler inside the sandbox (`No module named 'saddler'`: two
    tests failed once bubblewrap was installed). Since issue 21 the sandbox binds saddler's roots, wherever the
    checkout is."""
    ran = editable_under_tmp("import")
    assert ran["returncode"] == 0, ran["stderr"]
    assert ran["stdout"].strip() == str(under_tmp / "checkout" / "saddler" / "__init__.py")


@needs_bwrap
def test_the_doctor_runs_evo_dag_inside_the_sessions_sandbox(
    editable_under_tmp: Callable[[str], dict[str, Any]],
) -> None:
    """Issue 21.6: the doctor's `evo-dag --help` runs in the sandbox the sessions get, so it fails exactly when
    the sessions' would (here: without the binds of the checkout), saying so."""
    checks = editable_under_tmp("doctor")
    assert (
        checks["evo-dag"]["ok"] and checks["evo-dag"]["detail"] == "`evo-dag --help` runs inside saddler's bubblewrap"
    )
    broken = editable_under_tmp("doctor-without-binds")["evo-dag"]
    assert (broken["ok"], broken["required"]) == (False, True)
    assert (
        "No module named 'evodag'" in broken["detail"] and "sessions cannot query the run's history" in broken["detail"]
    )


@needs_bwrap
def test_a_session_whose_sandbox_cannot_start_stops_the_run(
    under_tmp: Path,
    outside: Path,
    monkeypatch: pytest.MonkeyPatch,
    command_backend: Callable[..., Any],
    reflection_request: Callable[..., Any],
) -> None:
    """bwrap cannot exec the agent (its interpreter is missing): a system fault naming the doctor, not a failed
    session that the run would count and go on from."""
    bin_dir = under_tmp / "bin"
    bin_dir.mkdir()
    (bin_dir / "pi").write_text("#!/nonexistent/node\n")
    (bin_dir / "pi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake")
    run_dir = outside / "run"
    with pytest.raises(BackendError, match=r"sandbox could not start.*bwrap: execvp pi.*saddler doctor"):
        command_backend(run_dir, "pi").reflect(reflection_request(run_dir))
