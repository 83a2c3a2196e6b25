"""The attempts of one corpus job: their wall time, their lock on the work folder, their debris.

- **Time.** Each attempt records its wall time in OUT/work/attempts.json as units finish, so the
  seconds in stats.json add up over the attempts that did the work (a SIGKILLed one included).
- **Lock.** An attempt holds OUT/work/attempt.lock (flock) while it runs: a second attempt started
  while one runs is refused.
- **Debris.** A killed attempt leaves temporary files (half-written shards, a half-downloaded
  input) in the work folder. The next attempt of the same job removes them before it starts, but
  only the names our writers make and only while it holds the lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pretrain.curate import io

if TYPE_CHECKING:
    from pretrain.curate.job import Layout


class Attempts:
    """This attempt's wall time, saved as units finish; earlier attempts' times are kept."""

    def __init__(self, lay: Layout, started: float | None = None):
        # `started`: when the attempt began, before the steps were built (a benchmark index can take
        # longer than the belt: a decontaminate of 160 documents said 0.4 s of its 14 s)
        self.lay, self.t0 = lay, started if started is not None else time.time()
        try:
            self.before = [float(s) for s in json.loads(lay.attempts.read_text())["seconds"]]
        except (OSError, ValueError, KeyError, TypeError):
            self.before = []
        self.save()

    def now(self) -> float:
        return time.time() - self.t0

    def save(self) -> None:
        self.last = round(self.now(), 3)
        io.write_json_atomic(self.lay.attempts, {"seconds": [*self.before, self.last]}, self.lay.tmp)

    def total(self) -> float:
        """Every attempt's wall time as last saved (stats.json and attempts.json agree)."""
        return sum(self.before) + self.last

    def count(self) -> int:
        return len(self.before) + 1


# Names of the temporary files our writers make in the work folder, and nothing else:
# io.atomic_path / io._upload_path (mkstemp: ".NAME.<random>.tmp"), dedup._write_checked
# (".NAME.<pid>.tmp"), progress.ShardMeter ("<shard>.json.<pid>.tmp" in progress/) and the local copy of
# an input URL (tmp/input_<shard>_<input>_NAME).
_DEBRIS = re.compile(r"\..+\.[a-z0-9_]+\.tmp")
_METER_DEBRIS = re.compile(r"\d+\.json\.\d+\.tmp")
_INPUT_COPY = re.compile(r"input_\d{5}_.+")


@contextlib.contextmanager
def attempt_lock(lay: Layout):
    """Hold OUT/work/attempt.lock (flock: released by the kernel when the process dies, even on
    SIGKILL); yields True, None when another live attempt holds it, False when the filesystem
    cannot lock (the job runs, sweeping nothing)."""
    lay.work.mkdir(parents=True, exist_ok=True)
    fd = os.open(lay.work / "attempt.lock", os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            alone: bool | None = True
        except BlockingIOError:  # EWOULDBLOCK: a concurrent attempt holds it
            alone = None
        except OSError:  # flock unsupported here (ENOLCK, ...): run, but sweep nothing
            alone = False
        yield alone
    finally:
        os.close(fd)  # releases the lock


def _is_debris(rel: Path) -> bool:
    name = rel.name
    if _DEBRIS.fullmatch(name):
        return True
    if rel.parent.name == "progress" and _METER_DEBRIS.fullmatch(name):
        return True
    return rel.parent == Path("tmp") and bool(_INPUT_COPY.fullmatch(name))


def sweep_debris(lay: Layout) -> int:
    """Remove the temporary files a killed attempt of this job left in its work folder; returns
    how many. Only regular files with our writers' names go (never a link, never another name)."""
    removed = 0
    for path in lay.work.rglob("*"):
        rel = path.relative_to(lay.work)
        if _is_debris(rel) and path.is_file() and not path.is_symlink():
            path.unlink(missing_ok=True)
            removed += 1
    return removed
