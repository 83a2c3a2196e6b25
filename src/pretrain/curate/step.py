"""Steps of the belt: `Step` (docs -> docs), `Filter` (keep or a reason), `Tagger` (scores).

A step takes an iterator of Documents and yields Documents; it knows nothing of ranks, shards or
workers, so `list(step(iter(docs)))` tests it. A Filter answers `True` (keep) or a short reason
identifier (drop); the base class counts and hands the dropped document to `on_reject`, which the
pipeline points at the rejects writer. A Tagger writes scores into `doc.metadata` and drops nothing.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator

from pretrain.curate.document import Document

RejectSink = Callable[[Document, str, str], None]  # (doc, step name, reason)


def _discard(doc: Document, step: str, reason: str) -> None:
    pass


class Step:
    """A generator-to-generator stage. Subclasses implement `process` (or override `__call__`)."""

    name: str = "step"

    def __init__(self) -> None:
        self.stats: Counter[str] = Counter()
        self.on_reject: RejectSink = _discard

    def __call__(self, docs: Iterable[Document]) -> Iterator[Document]:
        clock = time.perf_counter
        for doc in docs:
            self.stats["in"] += 1
            t0 = clock()
            out = self.process(doc)
            self.stats["seconds"] += clock() - t0  # per-step cost in stats.json
            if out is not None:
                self.stats["kept"] += 1
                yield out

    def process(self, doc: Document) -> Document | None:  # pragma: no cover - interface
        raise NotImplementedError

    def drop(self, doc: Document, reason: str) -> None:
        """Count a drop under `reason` and hand the document to the rejects sink."""
        self.stats[f"dropped.{reason}"] += 1
        self.on_reject(doc, self.name, reason)


class Filter(Step):
    """Keep a document or drop it with a reason. Subclasses implement `keep`."""

    name = "filter"

    def keep(self, doc: Document) -> bool | str:  # pragma: no cover - interface
        raise NotImplementedError

    def process(self, doc: Document) -> Document | None:
        verdict = self.keep(doc)
        if verdict is True:
            return doc
        self.drop(doc, verdict if isinstance(verdict, str) else self.name)
        return None


class Tagger(Step):
    """Annotate `doc.metadata` with scores; never drops."""

    name = "tagger"

    def tag(self, doc: Document) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def process(self, doc: Document) -> Document | None:
        self.tag(doc)
        return doc


def run_steps(steps: list[Step], docs: Iterable[Document]) -> Iterator[Document]:
    """Chain steps lazily: the output of each is the input of the next."""
    stream: Iterable[Document] = docs
    for step in steps:
        stream = step(stream)
    yield from stream
