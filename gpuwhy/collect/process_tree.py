"""The processes of a watched program: a process and all its descendants, from ``/proc``.

``gpuwhy watch`` attributes GPU memory to the program it runs, and programs spread over
processes (``torchrun``, a shell script, a data-loader pool). NVML lists GPU users by
pid, so the sampler needs the current pid set of the whole tree. Reading ``/proc/*/stat``
costs a few milliseconds on a busy host and is done at most once a second (with the
process list); psutil would do the same walk, so it is not worth a dependency.

A process whose parent exits is re-parented to init and drops out of the tree;
:class:`ProcessTree` therefore remembers every pid it has seen as a descendant and keeps
it while it lives. Outside Linux only the root pid is known.
"""

from __future__ import annotations

import os
from collections import defaultdict

PROC = "/proc"


def parent_map(proc: str = PROC) -> dict[int, int]:
    """pid -> parent pid of every process readable under ``/proc``."""
    parents: dict[int, int] = {}
    try:
        names = os.listdir(proc)
    except OSError:
        return parents
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"{proc}/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # exited meanwhile, or not ours to read
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and ')', so split after the last ')'.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) >= 2:
            parents[int(name)] = int(fields[1])
    return parents


def descendants(root: int, proc: str = PROC) -> set[int]:
    """``root`` and every live process below it (just ``{root}`` where /proc is missing)."""
    children: dict[int, list[int]] = defaultdict(list)
    for pid, ppid in parent_map(proc).items():
        children[ppid].append(pid)
    found, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


class ProcessTree:
    """Callable: the pids of ``root``'s tree now, plus earlier descendants still alive."""

    def __init__(self, root: int, proc: str = PROC) -> None:
        self.root, self.proc = root, proc
        self.seen: set[int] = {root}

    def __call__(self) -> frozenset[int]:
        current = descendants(self.root, self.proc)
        orphans = {pid for pid in self.seen - current if alive(pid)}
        self.seen |= current
        return frozenset(current | orphans)
