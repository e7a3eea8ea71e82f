"""No new processes, sockets or keys from submission code: a seccomp filter that the worker loads on itself
before it takes a submission, in CPU mode.

A child process escapes every watch that lives in the worker's memory (the child records its operator
calls in its own copy of the watch, and is reaped before the call returns). The filter refuses `fork`,
`vfork`, `clone` without CLONE_THREAD (threads stay allowed: torch and OpenMP use them) and `execve`.
`clone3` passes its flags in memory, which a filter cannot read: it gets ENOSYS, and glibc falls back to
`clone`. New sockets of every family are refused too (the worker's channel to the judge is already open): a unix
socket at a path the worker can see, or an abstract one, is a door to whatever serves it on the host, and vsock
reaches a VM's hypervisor; io_uring, which opens sockets and files without those system calls (red team round 8),
is refused as a whole, and so are the kernel's keyrings (keyctl, add_key, request_key), which no namespace
separates from the judge's or another worker's (red team round 9).
libseccomp sets no_new_privs, and a filter cannot be removed by the code it filters.

GPU mode keeps fork for now: the harness runs cuobjdump and the Nsight Compute replay as children after
the submission loaded (docs/threat-model.md).

`refuse_reaching_other_processes` is loaded in every mode by each process about to load a submission (and by a
confined build before its compiler starts): the
system calls whose permission is only "the same uid" (prlimit on another process set the judge's RLIMIT_CPU to
one second, and the kernel killed it: red team round 14, a GPU worker, which has no pid namespace; CPU affinity,
priorities of a whole uid, page migration: round 41) act on the caller only, and no process is made another's
child (`clone` with CLONE_PARENT: a GPU worker's sibling was missing from the worker's list of its children, red
team round 48; `clone3` gets ENOSYS, as above). Signals are scoped by Landlock (`confine._scope_signals`); tracing
needs a capability the worker lacks."""

from __future__ import annotations

import errno

CLONE_PARENT, CLONE_THREAD = 0x00008000, 0x00010000
# FS_IOC_RESVSP, FS_IOC_RESVSP64, FS_IOC_ZERO_RANGE and their 32-bit layouts (struct space_resv of 44 bytes)
PREALLOCATING_IOCTLS = (0x40305828, 0x4030582A, 0x40305839, 0x402C5828, 0x402C582A, 0x402C5839)


def refuse_processes_and_sockets() -> str | bool:
    """Load the filter on this process (and every thread it starts later). True, or why it is unavailable."""
    try:
        import pyseccomp as seccomp
    except Exception as e:  # the package, or libseccomp.so (found through ldconfig), is missing
        return f"unavailable: {type(e).__name__}: {e}"
    refuse = seccomp.ERRNO(errno.EPERM)
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in ("fork", "vfork", "execve", "execveat"):
        rules.add_rule(refuse, name)
    rules.add_rule(refuse, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_THREAD, 0))
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    # No new socket of any family (the channel to the judge is open already): an allowlist of none. A denylist
    # left AF_VSOCK, which no network namespace scopes on older kernels (a VM's hypervisor), and AF_NETLINK.
    for name in ("socket", "socketpair", "io_uring_setup", "io_uring_enter", "io_uring_register"):
        rules.add_rule(refuse, name)  # io_uring makes sockets without socket()
    for name in ("keyctl", "add_key", "request_key"):  # keyrings are not namespaced (confine.enter: its own)
        rules.add_rule(refuse, name)
    return _load(rules)


def refuse_reaching_other_processes() -> str | bool:
    """Load on this process (all its threads) a filter refusing limits, priorities and scheduling of any process
    but the caller (pid 0). True, or why it is unavailable."""
    try:
        import pyseccomp as seccomp
    except Exception as e:
        return f"unavailable: {type(e).__name__}: {e}"
    refuse, other = seccomp.ERRNO(errno.EPERM), lambda arg: seccomp.Arg(arg, seccomp.NE, 0)
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    # Red team round 41: sched_setaffinity was missing (a worker pinned every spare, the next step's worker and the
    # armed replays to one CPU), and so were move_pages and migrate_pages, whose permission is the same uid too.
    for name in ("prlimit64", "sched_setscheduler", "sched_setparam", "sched_setattr", "sched_setaffinity",
                 "migrate_pages", "move_pages"):
        rules.add_rule(refuse, name, other(0))
    # (which, who, ...): the caller alone, which is PRIO_PROCESS (0) / IOPRIO_WHO_PROCESS (1) with who 0. Round 41:
    # who 0 with PRIO_USER or IOPRIO_WHO_USER is "every process of my uid", the judge's and its workers'.
    rules.add_rule(refuse, "setpriority", other(0))
    rules.add_rule(refuse, "setpriority", other(1))
    rules.add_rule(refuse, "ioprio_set", seccomp.Arg(0, seccomp.NE, 1))
    rules.add_rule(refuse, "ioprio_set", other(1))
    rules.add_rule(refuse, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_PARENT, CLONE_PARENT))
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")  # glibc falls back to clone, as Docker's profile relies on
    # Disk reserved without a write: fallocate(FALLOC_FL_KEEP_SIZE) past a file's end changes no size, so
    # RLIMIT_FSIZE never sees it, and on the host's disk no cgroup does (red team round 116: the worker's output file
    # reserved the judge's whole disk, and the step ended `ok`). As a file system without it: glibc's
    # posix_fallocate then writes, which every limit counts.
    # Round 117: the same reservation through generic VFS ioctls (`ioctl_preallocate`), on any descriptor.
    rules.add_rule(seccomp.ERRNO(errno.EOPNOTSUPP), "fallocate")
    for request in PREALLOCATING_IOCTLS:  # the kernel reads the request's low 32 bits only: so does the rule
        rules.add_rule(seccomp.ERRNO(errno.EOPNOTSUPP), "ioctl", seccomp.Arg(1, seccomp.MASKED_EQ, 0xFFFFFFFF, request))
    # Per-uid kernel quotas the worker would share with every process of the judge's uid on the host (its user
    # namespace maps that uid): inotify and fanotify instances (round 117: 128 held left the host's others none).
    for name in ("inotify_init", "inotify_init1", "fanotify_init"):
        rules.add_rule(refuse, name)
    # Extended attributes are stored beside a file's size on disk (round 118, on the output file): as a file system
    # without them (ENOTSUP, which shutil's copies pass over).
    for name in ("setxattr", "lsetxattr", "fsetxattr"):
        rules.add_rule(seccomp.ERRNO(errno.ENOTSUP), name)
    return _load(rules)


def before_submission_code() -> None:
    """What every process that loads a submission does first (the worker, the Nsight Compute replays)."""
    import sys

    loaded = refuse_reaching_other_processes()
    if loaded is not True:
        print(f"kerneldojo worker: no seccomp filter on other processes ({loaded})", file=sys.stderr)


def _load(rules) -> str | bool:
    import pyseccomp as seccomp

    rules.set_attr(seccomp.Attr.CTL_TSYNC, 1)  # every thread, also those torch or CUDA started before
    try:
        rules.load()
    except OSError as e:
        return f"unavailable: loading the seccomp filter failed: {e}"
    return True
