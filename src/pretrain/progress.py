"""Progress on the terminal: bars by bytes and documents, moving inside one big input file.

Two halves, so that a job's workers (other processes, other machines under Ray) can report:
- `ShardMeter`, in the worker: wraps the document iterator of one input file and, at most twice a
  second, writes `{"docs", "bytes", "size"}` to a small JSON file (atomic rename). `bytes` is how
  far the reader is into the file on disk (compressed bytes for .gz/.zst: what `size` counts),
  read from the open descriptor's position (Linux /proc); elsewhere only documents are counted.
- `Progress`, in the driver: named phases; a phase given the input files polls those JSON files
  and draws bytes done of all inputs, documents read and files finished. A finished shard counts
  whole whatever its file said. Without a terminal (a log, a pipe, --no-progress) nothing is drawn.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

EVERY_S = 0.5  # how often a worker writes its position and the driver reads them


class ShardMeter:
    """Counts the documents read from one input file and where the reader is in it. A shard of
    several files meters each with `base` (the bytes of the shard's files before this one) and
    `total` (the shard's bytes); the bar reads one position per shard."""

    def __init__(self, progress_file: str | Path, input_path: str | Path, base: int = 0,
                 total: int | None = None):
        self.file = Path(progress_file)
        self.input = Path(input_path)
        try:
            self.size = self.input.stat().st_size
        except OSError:
            self.size = 0
        self.base, self.total = base, total if total is not None else base + self.size
        self.docs = 0
        self._last = 0.0

    def wrap(self, docs: Iterable[Any]) -> Iterator[Any]:
        for d in docs:
            self.docs += 1
            if time.monotonic() - self._last >= EVERY_S:
                pos = self.position()
                self._write(None if pos is None else self.base + pos)
            yield d
        self._write(self.base + self.size)

    def position(self) -> int | None:
        """Offset of this process's open descriptor on the input file, or None if not found."""
        target = str(self.input.resolve())
        try:
            for fd in os.listdir("/proc/self/fd"):
                try:
                    if os.readlink(f"/proc/self/fd/{fd}") != target:
                        continue
                    with open(f"/proc/self/fdinfo/{fd}") as f:
                        return int(f.readline().split()[1])  # first line: "pos:\t<offset>"
                except (OSError, ValueError, IndexError):
                    continue
        except OSError:  # no /proc: documents only
            return None
        return None

    def _write(self, pos: int | None) -> None:
        self._last = time.monotonic()
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.file.with_name(self.file.name + f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"docs": self.docs, "bytes": pos, "size": self.total}))
            tmp.replace(self.file)
        except OSError:  # progress is a courtesy: never fail the job for it
            pass


def read_meters(folder: Path) -> dict[str, dict]:
    """Every meter file under `folder`, by file stem (the shard)."""
    out = {}
    for p in folder.glob("*.json") if folder.is_dir() else []:
        try:
            out[p.stem] = json.loads(p.read_text())
        except (OSError, ValueError):
            continue  # being replaced right now
    return out


class Progress:
    """Named phases, each a bar; by bytes within files when given the inputs, else by units done."""

    def __init__(self, enabled: bool | None = None):
        from rich.console import Console
        from rich.progress import BarColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress

        self.console = Console(stderr=True)
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._bar = RichProgress(
            TextColumn("[bold]{task.description:<8}"),
            BarColumn(),
            TextColumn("{task.fields[done]}"),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            console=self.console,
            disable=not self.enabled,
            transient=False,
        )
        self._tasks: dict[str, Any] = {}
        self._phase: dict[str, dict] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(
        self, name: str, total: int, files: list[str] | list[list[str]] | None = None,
        meters: Path | None = None, noun: str = "file",
    ) -> Callable[[Any], None]:
        """A phase of `total` units; with `files` (per unit, a file or a list of them) and `meters`
        (a folder) the bar counts bytes; `noun` names the units."""
        if not self._tasks:
            self._bar.start()
        sizes = [_size(f) for f in files] if files and meters else None
        if sizes:
            for old in Path(meters).glob("*.json"):  # an earlier run's positions
                old.unlink(missing_ok=True)
        ph = {"units": total, "done": 0, "docs": 0, "sizes": sizes, "meters": meters, "finished": set(),
              "noun": noun}
        self._phase[name] = ph
        self._tasks[name] = self._bar.add_task(name, total=sum(sizes) if sizes else total, done="", info="")
        self._refresh(name)
        if sizes and self.enabled and self._thread is None:
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()

        def tick(result: Any = None) -> None:
            ph["done"] += 1
            if isinstance(result, dict):
                ph["docs"] += int(result.get("read", result.get("in", 0)) or 0)
                if "shard" in result:
                    ph["finished"].add(int(result["shard"]))
            self._refresh(name)

        return tick

    def pending(self, name: str, info: str) -> Callable[[], None]:
        """A phase of unknown length (work inside a library that reports nothing, such as HF
        tokenizers' merges): a pulsing bar, `info` and the elapsed time; returns `done()`."""
        if not self._tasks:
            self._bar.start()
        task = self._tasks[name] = self._bar.add_task(name, total=None, done="", info=info)
        return lambda: self._bar.update(task, total=1, completed=1)

    def _refresh(self, name: str) -> None:
        ph, task = self._phase[name], self._tasks[name]
        if not ph["sizes"]:
            self._bar.update(task, completed=ph["done"], done=f"{ph['done']}/{ph['units']}",
                             info=count(ph["docs"], "doc"))
            return
        live = read_meters(Path(ph["meters"])) if ph["meters"] else {}
        done_bytes, docs = 0, ph["docs"]
        for i, size in enumerate(ph["sizes"]):
            m = live.get(str(i))
            if i in ph["finished"]:
                done_bytes += size
            elif m:
                done_bytes += min(size, m.get("bytes") or 0)
                docs += int(m.get("docs") or 0)
        self._bar.update(task, completed=done_bytes, done=f"{_human(done_bytes)}/{_human(sum(ph['sizes']))}",
                         info=f"{count(docs, 'doc')}, {ph['done']}/{count(ph['units'], ph['noun'])}")

    def _poll(self) -> None:
        while not self._stop.wait(EVERY_S):
            for name in list(self._phase):
                self._refresh(name)

    def stop(self, name: str) -> None:
        self._refresh(name)
        self._bar.refresh()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._tasks:
            self._bar.stop()


def _size(path: str | list[str]) -> int:
    """A file's bytes; a shard's files' (a list) added up."""
    if isinstance(path, list):
        return sum(_size(p) for p in path)
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _human(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n}"


def count(n: int, noun: str) -> str:
    """'1 doc', '0 docs', '12,345 docs': a count and its noun, plural unless the count is one."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def rerun_note(now: int, units: int, done: str, unit: str = "shard") -> str:
    """What this invocation did, for a command that skips the units an earlier run finished: ""
    when it did every unit; "already DONE, nothing to do" when it did none; else how many now and
    how many were already `done`. One wording for curate, dedup, decontaminate, tokenize and tokens
    import-*, so that an earlier run's totals are never read as this run's work."""
    if now == units:
        return ""
    if now == 0:
        return f"already {done}, nothing to do"
    return f"{now} {unit}{'s' * (now != 1)} written now, {units - now} already {done}"


def seconds_text(s: float) -> str:
    """'12.3 s', or two significant figures below a second ('0.043 s'), never '0.0 s' for work done."""
    return f"{s:,.1f} s" if s >= 1 else f"{s:.2g} s"
