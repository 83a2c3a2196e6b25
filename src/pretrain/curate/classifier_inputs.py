"""What `pretrain classifier train` and `score` read: the documents of their inputs as the belt's
classifier step sees them.

Inputs are named as for `pretrain curate` (files, folders, globs, s3:// and other URLs; a URL's
objects are copied to a temporary folder one at a time), and every input that cannot be found is
named in one error, not only the first. HTML pages (`.html`, WARC responses) go through the belt's
`extract` step first: scoring raw markup counted tags and scripts as words (a WARC page of ~9,700
tokens of markup scored -26,411 where its main text scores a fraction of that; session 13).
"""

from __future__ import annotations

import glob
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from pretrain.curate import io
from pretrain.curate.document import Document
from pretrain.curate.readers import ReaderConfig
from pretrain.errors import UserError, not_found


def check_inputs(groups: dict[str, list[str]], model: str | None = None) -> None:
    """Refuse, in one error, every input of `groups` ({option: paths}, "" for positional ones) that
    names nothing (a missing path, a glob matching nothing), and a `model` that is missing or a URL."""
    problems = []
    for role, paths in groups.items():
        for p in paths:
            where = f"{role} " if role else ""
            if io.is_url(p):
                continue  # listed next: a store's refusal names the URL
            if any(ch in p for ch in "*?["):
                if not glob.glob(p, recursive=True):
                    problems.append(f"{where}no input matches {p!r}")
            elif not Path(p).exists():
                problems.append(f"{where}input not found: {p}")
    if model is not None:
        if io.is_url(model):
            try:
                io.local_only(model, "--model")
            except UserError as e:
                problems.append(str(e))
        elif not Path(model).exists():
            problems.append(str(not_found("classifier model", model)))
    if problems:
        raise UserError("; ".join(problems))


def listed(paths: list[str], role: str = "", skip: str = "-",
           exclude: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(file or object URL, source name) of every input, sorted, less `skip` (the scores or model
    being written, which a rerun into the input folder would read back) and the files `exclude`
    (--exclude GLOB, `inputs.excluded`) leaves out of a folder, glob or prefix; none is an error
    naming the inputs."""
    from pretrain.curate.identity import list_any_inputs

    gone = None if skip == "-" or io.is_url(skip) else Path(skip).resolve()
    files = [(f, src) for f, src in list_any_inputs(paths, exclude=exclude)
             if io.is_url(f) or Path(f).resolve() != gone]
    if not files:
        where = f"{role} " if role else ""
        raise UserError(f"{where}no input files found in {', '.join(paths)}")
    return files


def documents(files: list[tuple[str, str]], cfg: ReaderConfig, errors: Skipped,
              stats: Counter[str]) -> Iterator[Document]:
    """The documents of `files` read by `cfg`, HTML pages (and, with `cfg.text_is_html`, every
    record's text) extracted to their main text (ExtractConfig's
    defaults, the belt's); bad records go to `errors` (file, record, reason), and pages the
    extract step drops (no main text, ...) are counted in `stats` under `no_main_text`."""
    from pretrain.curate.extract import ExtractConfig, build_extract_step

    step = build_extract_step(ExtractConfig())
    try:
        yield from step(_read(files, cfg, errors))
    finally:
        if hasattr(step, "close"):  # a time-bounded extraction child (extract.isolation)
            step.close()
    stats["no_main_text"] += sum(n for k, n in step.stats.items() if k.startswith("dropped."))


def _read(files: list[tuple[str, str]], cfg: ReaderConfig, errors: Skipped) -> Iterator[Document]:
    from pretrain.curate.readers import read_documents

    with tempfile.TemporaryDirectory(prefix="pretrain-classifier-") as tmp:
        for f, src in files:
            def bad(_path: str, record: object, why: str, f: str = f) -> None:  # the URL, not the copy
                errors(f, record, why)

            path = _fetched(f, Path(tmp)) if io.is_url(f) else Path(f)
            try:
                yield from read_documents(path, cfg, bad, source=src)
            finally:
                if path != Path(f):
                    path.unlink(missing_ok=True)


def _fetched(url: str, tmp: Path) -> Path:
    """A local copy of the object at `url` under `tmp`, named as the object (its suffix says how to
    read it)."""
    fs, path = io.url_fs(url)
    local = tmp / path.rstrip("/").rsplit("/", 1)[-1]
    try:
        fs.get(path, str(local))
    except FileNotFoundError as e:  # listed, then deleted: name it (the client does not)
        raise UserError(f"{url}: gone since it was listed") from e
    return local


class Skipped:
    """Bad records counted by kind (pretrain.faults: bounded, whatever the input holds), with the
    first of each kind; `lines()` says them all. Five records shown of one kind hid every other
    kind: 130 records of a file without the text field hid a malformed WET file's three."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.first: dict[str, tuple[str, object, str]] = {}
        self.total = 0

    def __call__(self, file: str, record: object, why: str) -> None:
        from pretrain.faults import count_fault

        self.total += 1
        self.first.setdefault(count_fault(self.counts, why), (file, record, why))

    def __len__(self) -> int:
        return self.total

    def lines(self, shown: int = 5) -> list[str]:
        """'N kind; first: file: record: reason' per kind, the most frequent first."""
        from pretrain.curate.report import TEXT_FIELD_HINT
        from pretrain.untrusted import printable

        top = sorted(self.counts.items(), key=lambda kv: -kv[1])
        out = []
        for kind, n in top[:shown]:
            f, record, why = self.first[kind]
            where = f"{f}: record {record}: {why}" if record is not None else f"{f}: {why}"  # as curate
            missing = kind.startswith(("missing text field", "missing text column"))
            hint = f"; {TEXT_FIELD_HINT}" if missing else ""
            out.append(printable(f"{n:,} {kind}; first: {where}{hint}"))
        if len(top) > shown:
            out.append(f"{len(top) - shown} more kinds")
        return out
