"""Every exception saddler raises on purpose. A failing candidate is data, never one of these.

Messages say what to do next.
"""

from __future__ import annotations


class SaddlerError(Exception):
    """Base class: a system fault or a user error that stops the command."""

    exit_code = 1


class ConfigError(SaddlerError):
    """Invalid configuration; the message lists every error with its dotted path."""

    exit_code = 2


class UnknownNameError(SaddlerError):
    """An unknown registered name (backend, benchmark, policy, template)."""

    exit_code = 2

    def __init__(self, kind: str, name: str, available: list[str] | tuple[str, ...]):
        self.kind, self.name, self.available = kind, name, list(available)
        super().__init__(f"unknown {kind} {name!r}; available: {', '.join(sorted(self.available))}")


class HarnessError(SaddlerError):
    """The harness repository cannot be used (not a git repo, bad saddler.toml, git failure)."""


class ProtectedPathError(HarnessError):
    """A change touches a protected path; `paths` names them."""

    def __init__(self, paths: list[str]):
        self.paths = list(paths)
        super().__init__(f"change touches protected path(s): {', '.join(self.paths)}")


class ExecutorError(SaddlerError):
    """The executor itself cannot run (missing sandbox, ray not installed, cluster unreachable)."""


class BackendError(SaddlerError):
    """An optimizer backend cannot run at all (missing CLI, missing credentials)."""


class AuthenticationError(BackendError):
    """Credentials are missing or rejected; the message names the variable to set."""


class RunStateError(SaddlerError):
    """The run folder is missing, locked by another process, or inconsistent."""


class ChangedInputsError(SaddlerError):
    """A run's results-affecting inputs changed since it started; `changed` names the dotted keys."""

    exit_code = 2

    def __init__(self, message: str, changed: list[str]):
        self.changed = list(changed)
        super().__init__(message)
