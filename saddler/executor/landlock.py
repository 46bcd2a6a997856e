"""Landlock (Linux ≥ 5.13): an unprivileged process confines itself and everything it starts, for good.

`confine(private_dir, network=...)` is what a rollout child calls before it runs harness code when bubblewrap is
not available: it may write only beneath `private_dir` (and to /dev/null), read everything but other processes'
/proc entries (so not the optimizer's environment), make no TCP connection or listener (Landlock ABI ≥ 4, unless
`network`), and neither signal nor reach the abstract Unix sockets of processes outside it (ABI ≥ 6).
Import-light (stdlib and ctypes): rollout children import it.
"""

from __future__ import annotations

import ctypes
import functools
import os
import stat

_CREATE, _ADD_RULE, _RESTRICT = 444, 445, 446  # the same on every architecture (generic syscall table)
_CREATE_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_MAKE_AND_REMOVE = sum(1 << bit for bit in range(4, 13))  # remove dir/file, make char/dir/reg/sock/fifo/block/sym
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # what a rule on a non-directory may allow
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
READ = EXECUTE | READ_FILE | READ_DIR
_PROC_SHARED = ("cpuinfo", "meminfo", "stat", "loadavg", "version", "filesystems", "sys")  # no secrets in these


class LandlockError(OSError):
    """Landlock is missing or refused the ruleset."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]  # fmt: skip


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


@functools.lru_cache(maxsize=1)
def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is not available (old kernel, disabled, seccomp)."""
    try:
        version = _libc().syscall(_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def handled_fs(abi: int) -> int:
    """Every filesystem access right this ABI knows (all of them are denied unless a rule allows them)."""
    access = READ | WRITE_FILE | _MAKE_AND_REMOVE
    if abi >= 2:
        access |= REFER
    if abi >= 3:
        access |= TRUNCATE
    if abi >= 5:
        access |= IOCTL_DEV
    return access


def confine(private_dir: str, *, network: bool = False) -> int:
    """Confine this process (and all it starts) as the module docstring says; returns the ABI used.
    Raises `LandlockError` when Landlock is unavailable or refuses (the caller decides whether that is fatal)."""
    abi = abi_version()
    if abi < 1:
        raise LandlockError("Landlock is not available on this kernel")
    fs = handled_fs(abi)
    attr = _RulesetAttr(fs, 0 if network or abi < 4 else NET_BIND_TCP | NET_CONNECT_TCP,
                        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0)  # fmt: skip
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    libc = _libc()
    ruleset = libc.syscall(_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise LandlockError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        for entry in os.scandir("/"):
            if entry.name != "proc":
                _allow(ruleset, entry.path, READ & fs)
        _allow(ruleset, f"/proc/{os.getpid()}", READ & fs)
        for name in _PROC_SHARED:
            _allow(ruleset, f"/proc/{name}", READ & fs)
        _allow(ruleset, "/dev/null", (WRITE_FILE | READ_FILE | TRUNCATE) & fs)
        _allow(ruleset, private_dir, fs)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise LandlockError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(_RESTRICT, ruleset, ctypes.c_uint32(0)) != 0:
            raise LandlockError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)
    return abi


def _allow(ruleset: int, path: str, access: int) -> None:
    """Allow `access` beneath `path` (only the file rights when it is not a directory); a path that cannot be
    opened (absent, unreadable) gets no rule, which denies it."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= _FILE_ONLY
        if not access:
            return
        rule = _PathBeneath(access, fd)
        if _libc().syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
            raise LandlockError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
    finally:
        os.close(fd)
