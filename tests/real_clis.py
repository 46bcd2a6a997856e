"""The real claude, codex and pi CLIs, installed from the npm registry, pointed at a loopback model.

`install()` puts them in `~/.cache/saddler-real-clis` (outside /tmp: codex's sandbox and pi's bubblewrap treat
/tmp specially) unless they are there; `environment(home, model)` is the environment of one CLI run whose HOME is
`home` and whose every model call goes to the `LoopbackModel` `model`:

- claude: `ANTHROPIC_BASE_URL` and a dummy `ANTHROPIC_API_KEY` (or `CLAUDE_CODE_OAUTH_TOKEN` for a subscription:
  only then does claude read the usage-window headers); `CLAUDE_CODE_MAX_RETRIES` bounds its own retries;
- codex: `CODEX_HOME=home/.codex` with a `[model_providers.loopback]` (`wire_api = "responses"`) as its provider;
- pi: `home/.pi/agent/models.json` overriding the anthropic provider's `baseUrl`, and `settings.json`'s retry.

Versions tested (the closing note of issue 21): claude 2.1.332, codex 0.171.0, pi 0.73.1.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

PACKAGES = {
    "claude": "@anthropic-ai/claude-code@2.1.332",
    "codex": "@openai/codex@0.171.0",
    "pi": "@mariozechner/pi-coding-agent@0.73.1",
}
MODELS = {"claude": "claude-sonnet-4-5", "codex": "gpt-5.1-codex", "pi": "claude-sonnet-4-5"}  # each preset's model
PREFIX = Path.home() / ".cache" / "saddler-real-clis"
BIN = PREFIX / "node_modules" / ".bin"


def installed() -> dict[str, Path]:
    """The CLIs found in `BIN` by name."""
    return {name: BIN / name for name in PACKAGES if (BIN / name).exists()}


def install() -> dict[str, Path]:
    """Install the three CLIs with npm into `PREFIX` when any is missing; returns them by name. Raises
    `RuntimeError` with npm's output when npm is absent or fails."""
    if len(installed()) == len(PACKAGES):
        return installed()
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not installed: the real-CLI tier installs claude, codex and pi with it")
    PREFIX.mkdir(parents=True, exist_ok=True)
    if not (PREFIX / "package.json").exists():
        (PREFIX / "package.json").write_text('{"name": "saddler-real-clis", "private": true}\n', encoding="utf-8")
    proc = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", *PACKAGES.values()],
        cwd=PREFIX,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if proc.returncode != 0 or len(installed()) != len(PACKAGES):
        raise RuntimeError(f"npm install failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return installed()


def version(name: str) -> str:
    """`<cli> --version`'s first line."""
    proc = subprocess.run([str(BIN / name), "--version"], capture_output=True, text=True, timeout=60, check=False)
    return (proc.stdout.strip() or proc.stderr.strip()).splitlines()[0] if proc.stdout or proc.stderr else "?"


def environment(
    home: Path,
    model_url: str,
    *,
    oauth: bool = False,
    retries: int = 0,
    base: dict[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a CLI run with HOME `home` whose model is at `model_url` (see module docstring)."""
    home.mkdir(parents=True, exist_ok=True)
    codex_home = home / ".codex"
    codex_home.mkdir(exist_ok=True)
    (codex_home / "config.toml").write_text(
        'model = "gpt-5.1-codex"\nmodel_provider = "loopback"\n\n[model_providers.loopback]\nname = "loopback"\n'
        f'base_url = "{model_url}/v1"\nwire_api = "responses"\nenv_key = "OPENAI_API_KEY"\n'
        f"request_max_retries = {retries}\nstream_max_retries = {retries}\n",
        encoding="utf-8",
    )
    pi_dir = home / ".pi" / "agent"
    pi_dir.mkdir(parents=True, exist_ok=True)
    (pi_dir / "models.json").write_text(json.dumps({"providers": {"anthropic": {"baseUrl": model_url}}}), "utf-8")
    retry = {"enabled": retries > 0, "maxRetries": retries, "baseDelayMs": 10}
    (pi_dir / "settings.json").write_text(json.dumps({"retry": retry}), encoding="utf-8")
    env = dict(base if base is not None else {k: v for k, v in os.environ.items() if k in ("LANG", "LC_ALL", "TZ")})
    env.update(
        {
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(home),
            "ANTHROPIC_BASE_URL": model_url,
            "CLAUDE_CODE_MAX_RETRIES": str(retries),
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CODEX_HOME": str(codex_home),
            "OPENAI_API_KEY": "sk-loopback",
            "PI_SKIP_VERSION_CHECK": "1",
            "PI_OFFLINE": "1",
        }
    )
    env["CLAUDE_CODE_OAUTH_TOKEN" if oauth else "ANTHROPIC_API_KEY"] = "sk-ant-loopback"
    return env


def init_args(run_dir: Path, preset: str, seed: int, sets: dict[str, str] | None = None) -> list[str]:
    """`saddler init` arguments of an opsdesk run (command backend) whose sessions are the real `preset` CLI with its
    model (`MODELS`), plus `sets` (dotted key -> TOML value) as more `--set`s."""
    args = ["init", str(run_dir), "--template", "opsdesk", "--backend", "command", "--seed", str(seed)]
    values = {"sessions.command": json.dumps(preset), "sessions.model": json.dumps(MODELS[preset]), **(sets or {})}
    for key, value in values.items():
        args += ["--set", f"{key}={value}"]
    return args
