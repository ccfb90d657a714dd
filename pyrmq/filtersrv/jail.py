"""The start of every filter worker process: confine this process, then run the filter code.

``python -m pyrmq.filtersrv.jail [limits] python`` becomes a Python filter worker and
``python -m pyrmq.filtersrv.jail [limits] exec PROGRAM ARG...`` replaces itself with PROGRAM (the
JVM or javac the FilterServer found at start-up). The confinement is applied here, by our own
code, before any filter code is loaded, so no filter can run unconfined:

- no network: a new, empty network namespace (only a down loopback) -- as root directly, as
  another user through a new user namespace where the kernel allows it; where neither works the
  worker runs without this layer and says so once on stderr (docs/FILTERING.md);
- resource limits: CPU seconds (SIGXCPU, then SIGKILL), address space, no core files, few file
  descriptors, and a file size limit (0: no file can be written, so no file can be filled);
- a file system view where every mount is read-only (a private mount namespace, where the kernel
  lets this process make one: as root); in any case, as root, the worker drops to the user
  ``nobody`` (no groups), and works in a fresh, empty, read-only directory;
- ``PR_SET_NO_NEW_PRIVS``: no set-uid program can give privileges back.
The wall-clock limit is the parent's (workers.py): it kills a worker that does not answer in time.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import os
import resource
import sys

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNS = 0x00020000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
PR_SET_NO_NEW_PRIVS = 38
NOBODY_UID = 65534
NOBODY_GID = 65534
# Imported before privileges drop: as nobody, an interpreter installed where only root may read
# (a pyenv under /root) cannot import anything more, and these are what filters commonly use.
PRELOADED_MODULES = ("re", "json", "math", "datetime", "time", "collections", "functools", "itertools",
                     "string", "struct", "hashlib", "base64", "zlib", "decimal", "fnmatch", "socket",
                     "encodings.idna", "encodings.ascii", "encodings.latin_1", "traceback", "dataclasses",
                     "enum", "typing")


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def isolate_network() -> str:
    """Enter a new network namespace; returns how (or why not)."""
    libc = _libc()
    if libc.unshare(CLONE_NEWNET) == 0:
        return "netns"
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0:
        return "userns+netns"
    return "unavailable: " + os.strerror(ctypes.get_errno())


def read_only_mounts(writable: str = "") -> str:
    """A private mount namespace in which every mount but ``writable`` (the compiler's output
    directory) is read-only; returns how (or why not)."""
    libc = _libc()
    if libc.unshare(CLONE_NEWNS) != 0:
        return "unavailable: " + os.strerror(ctypes.get_errno())
    # Nothing done here may propagate back to the host's mounts.
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return "unavailable: " + os.strerror(ctypes.get_errno())
    keep = os.fsencode(os.path.realpath(writable)) if writable else None
    if keep is not None and libc.mount(keep, keep, None, MS_BIND, None) != 0:
        return "unavailable: " + os.strerror(ctypes.get_errno())
    with open("/proc/self/mountinfo", "rb") as f:
        points = [line.split()[4] for line in f if len(line.split()) > 4]
    failed = 0
    for point in points:
        path = point.replace(b"\\040", b" ")
        if path == keep:
            continue
        if libc.mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID, None) != 0:
            failed += 1
    return "read-only" if not failed else f"read-only except {failed} of {len(points)} mounts"


def set_limits(cpu_seconds: int, address_space_mb: int, file_size_mb: int, open_files: int) -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    if address_space_mb > 0:
        limit = address_space_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_mb * 1024 * 1024,) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))


def drop_privileges() -> None:
    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(NOBODY_GID)
        os.setuid(NOBODY_UID)


def no_new_privs() -> None:
    _libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pyrmq.filtersrv.jail")
    parser.add_argument("--cpu-seconds", type=int, required=True)
    parser.add_argument("--address-space-mb", type=int, required=True)
    parser.add_argument("--file-size-mb", type=int, default=0)
    parser.add_argument("--open-files", type=int, default=64)
    parser.add_argument("--cwd", required=True)
    parser.add_argument("--writable", default="", help="the one directory left writable (javac's output)")
    parser.add_argument("mode", choices=("python", "exec"))
    parser.add_argument("program", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    network = isolate_network()
    if network.startswith("unavailable"):
        print(f"pyrmq filter worker: network isolation {network}", file=sys.stderr, flush=True)
    mounts = read_only_mounts(args.writable)
    if mounts != "read-only":
        print(f"pyrmq filter worker: file system view {mounts}", file=sys.stderr, flush=True)
    os.chdir(args.cwd)
    if args.mode == "python":
        # Imported before the limits: loading the interpreter's modules is not filter code.
        from pyrmq.filtersrv import py_worker
        for module in PRELOADED_MODULES:
            importlib.import_module(module)
    set_limits(args.cpu_seconds, args.address_space_mb, args.file_size_mb, args.open_files)
    drop_privileges()
    no_new_privs()
    if args.mode == "python":
        return py_worker.serve(sys.stdin.buffer, sys.stdout.buffer)
    if not args.program:
        parser.error("exec needs a program")
    os.execv(args.program[0], args.program)
    return 127   # not reached


if __name__ == "__main__":
    sys.exit(main())
