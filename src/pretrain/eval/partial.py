"""A task's scores so far, kept while it runs: what lets `pretrain eval` continue inside a task.

A task's examples (a `ppl:` text's windows) are scored in fixed chunks of `CHUNK` by index, in
order (harness.score_chunks). After each chunk rank 0 appends one line to `OUT.partial.jsonl`
beside the result file, flushed and fsynced:

    {"task": NAME, "key": DIGEST, "start": A, "stop": B, "seconds": S, "records": [records A..B-1]}

A rerun of the same task under the same key (the model, the settings the task reads, its files'
digest and the code: `resume.ResultFile.partial`) takes the chunks in order from 0 and scores the
rest, saying so (`piqa: continuing at item 768 of 1,838 (from OUT.partial.jsonl)`); the metrics are
then computed from all the records, as an uninterrupted run computes them, and the task's seconds
count the chunks' (`seconds`: the time each chunk cost the run that scored it).

Why chunks by count and not "every T seconds": how requests are batched changes a score's float
rounding (the padded width, the kernels' blocking), so a resumed run must score exactly the batches
an uninterrupted one scores. Both score the same chunks, so the final numbers are equal bit for bit;
the records survive JSON exactly (Python writes floats by `repr`). Why records and not running sums:
the result file keeps them anyway (`examples`), and acc's standard error needs every value.

The file may come with a run directory from elsewhere: a line over `MAX_LINE`, not JSON, of another
key, out of order or with a record that is not what the scorer writes ends what is taken (the task
continues from there), and the file is rewritten with what was taken, so a line torn by a kill does
not swallow the next append. `--force` starts over. The lines of a task go once its score is in the
result file; the file goes with its last line. What `lm-evaluation-harness --use_cache` does
instead: a SQLite cache of each request's answer keyed by the request's arguments alone (not the
model, not the code), for the user to point at one model's folder.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

# examples (windows) per chunk: a kill loses at most one; bigger batches buy little on CPU. Another
# value batches differently (other rounding): change it with identity.SCORING.
CHUNK = 256
MAX_LINE = 64 << 20  # 256 generations of 256 tokens are ~1 MB
MAX_FILE = 1 << 30  # read no further (MMLU's 14,079 records are ~3 MB): a file from elsewhere is bounded
NUMBERS = ("acc", "acc_norm", "acc_bytes", "exact_match", "ll", "gold")


class Partial:
    """Rank 0's record of one task's finished chunks in `path` (see the module docstring)."""

    def __init__(self, path: Path, task: str, key: str):
        self.path, self.task, self.key = Path(path), task, key
        self.earlier = 0.0  # seconds the chunks taken from the file cost the runs that scored them
        self._since = time.perf_counter()

    def resume(self, n: int, force: bool = False) -> list[dict]:
        """The records of the chunks already scored (indices 0..k-1, k a multiple of CHUNK or n),
        said on stderr; the file is rewritten to hold just those and other tasks' lines."""
        from pretrain.untrusted import jsonl_objects, one_line

        others, mine, stale = [], [], False
        self._since = time.perf_counter()
        try:
            with open(self.path, "rb") as f:
                for line in jsonl_objects(f, MAX_LINE, max_bytes=MAX_FILE):
                    if line.get("task") != self.task:
                        others.append(line)
                    elif force or line.get("key") != self.key or not _chunk(line, len(mine) * CHUNK, n):
                        stale = True
                    elif not stale:
                        mine.append(line)
        except FileNotFoundError:
            return []
        except OSError as e:  # unreadable: scored from the start, and the file is written anew
            print(f"{one_line(self.task)}: {self.path}: not read ({one_line(str(e))[:200]}); scoring "
                  "from the start", file=sys.stderr)
        self._write(others + mine)
        records = [r for line in mine for r in line["records"]]
        self.earlier = sum(x["seconds"] for x in mine if _seconds(x.get("seconds")))
        if records:
            print(f"{one_line(self.task)}: continuing at item {len(records):,} of {n:,} (from {self.path})",
                  file=sys.stderr)
        elif stale and not force:
            print(f"{one_line(self.task)}: {self.path} holds a partial score of other settings, code, task "
                  "file or model (or a damaged one): scoring from the start", file=sys.stderr)
        return records

    def add(self, start: int, stop: int, records: list[dict]) -> None:
        """Append one finished chunk (durable before the next chunk starts)."""
        now = time.perf_counter()
        line = json.dumps({"task": self.task, "key": self.key, "start": start, "stop": stop,
                           "seconds": round(now - self._since, 3), "records": records}) + "\n"
        self._since = now
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())

    def close(self) -> None:
        """The task's score is in the result file: its lines go (the file with its last line)."""
        from pretrain.untrusted import jsonl_objects

        try:
            with open(self.path, "rb") as f:
                lines = jsonl_objects(f, MAX_LINE, max_bytes=MAX_FILE)
                self._write([x for x in lines if x.get("task") != self.task])
        except OSError:
            pass

    def _write(self, lines: list[dict]) -> None:
        from pretrain.curate.io import write_bytes_atomic

        if not lines:
            self.path.unlink(missing_ok=True)
            return
        write_bytes_atomic(self.path, "".join(json.dumps(x) + "\n" for x in lines).encode())


def _seconds(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x < 1e9


def _chunk(line: dict, start: int, n: int) -> bool:
    """Whether `line` is the chunk that starts at `start` of n items, with one record per item."""
    stop, records = line.get("stop"), line.get("records")
    if line.get("start") != start or stop != min(start + CHUNK, n) or not isinstance(records, list):
        return False
    if [r.get("i") if isinstance(r, dict) else None for r in records] != list(range(start, stop)):
        return False
    return all(_record(r) for r in records)


def _record(r: dict) -> bool:
    """A record the scorer writes: numbers where aggregate reads numbers, a list of them for `lls`."""
    def number(x) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool)

    if not all(number(r[k]) for k in NUMBERS if k in r):
        return False
    lls = r.get("lls", [])
    return isinstance(lls, list) and all(number(x) for x in lls)
