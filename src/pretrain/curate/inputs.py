"""Which files an input names: `list_inputs` (files, folders, globs -> sorted files) and the one
rule every folder walk, bucket prefix and glob follows (`walked`, `globbed`, `walk_folder`): known
extensions, nothing hidden below the folder (`is_hidden`), no link out of it. `readers.py` reads the
files; `job.py` lists bucket prefixes with the same rule; decontam walks benchmark folders with it.
"""

from __future__ import annotations

import fnmatch
import glob
import re
from pathlib import Path

from pretrain.errors import UserError
from pretrain.progress import count
from pretrain.untrusted import printable

# JSON Lines, or one JSON array (sniffed), plain or compressed: `.json` is what HF `datasets` and
# pandas name either; Dolma ships `.json.gz`; bz2 and xz come with the stdlib.
JSONL_SUFFIXES = tuple(base + codec for base in (".jsonl", ".json", ".ndjson")
                       for codec in ("", ".gz", ".zst", ".bz2", ".xz"))
WARC_SUFFIXES = (".warc", ".warc.gz", ".wet", ".wet.gz", ".wat", ".wat.gz", ".arc", ".arc.gz")
# Gzipped pages (.html.gz: the article-extraction and trafilatura benchmarks ship them so) are read:
# a page is one record, so its inflated bytes stop at max_record_bytes.
HTML_SUFFIXES = (".html", ".htm", ".html.gz", ".htm.gz")
SUFFIXES = JSONL_SUFFIXES + (".parquet", ".arrow", ".txt") + HTML_SUFFIXES + WARC_SUFFIXES


def list_inputs(paths: list[str], own_out: str | None = None, exclude: tuple[str, ...] = ()) -> list[Path]:
    """Expand files, folders (recursively, known extensions only) and globs into sorted files.

    A folder or glob from someone else may hold symlinks to files of the user running the job
    (`notes.txt -> ~/.ssh/id_rsa`) that would end up in a corpus: inside a folder or glob, a symlink
    whose target lies outside it is skipped, with one line on stderr. A file named itself is read.
    `exclude` (--exclude GLOB): a folder's or glob's files that match are left out (`excluded`);
    those read that look like a licence or readme are named in one line (`say_paperwork`).
    """
    from pretrain.curate.outputs import job_data_only

    found: set[Path] = set()
    for p in paths:
        if any(ch in p for ch in "*?["):
            matches = [Path(m) for m in glob.glob(p, recursive=True)]
            if not matches:
                raise UserError(f"no input matches {p!r}")
            root = _glob_root(p)
            kept = [m for m in matches if globbed(_below(m, root)) and m.is_file()]
            if not kept:
                raise UserError(f"{p!r} matches {count(len(matches), 'path')}, none a file of a known type "
                                f"({', '.join(SUFFIXES)}) outside hidden folders")
            say_unread(repr(p), [_below(m, root) for m in matches if m.is_file()], len(kept), globbed)
            kept = [m for m in kept if not excluded(_below(m, root), exclude)]
            say_paperwork(repr(p), [_below(m, root) for m in kept])
            found.update(_inside(root, kept))
            continue
        path = Path(p)
        if path.is_dir():
            every = list(path.rglob("*"))  # one walk: the files, and any job's plan.json
            files = [f for f in every if walked(f.relative_to(path)) and f.is_file()]
            plans = [f for f in every if f.name == "plan.json"]
            if not plans or not files:  # a job's OUT says what of it is read (job_data_only)
                say_unread(str(path), [f.relative_to(path) for f in every if f.is_file()], len(files))
            files = [f for f in files if not excluded(f.relative_to(path), exclude)]
            files = job_data_only(plans, files, own_out)
            say_paperwork(str(path), [f.relative_to(path) for f in files])
            found.update(_inside(path, files))
        elif path.is_file():
            found.add(path)
        else:
            raise UserError(f"input not found: {p}")
    unique: dict[Path, Path] = {}  # one file named twice (a folder and its file, ./x and /abs/x)
    for f in sorted(found):
        unique.setdefault(f.resolve(), f)
    return sorted(unique.values())


def _glob_root(pattern: str) -> Path:
    """The folder a glob searches: its path up to the first part with a wildcard."""
    parts = Path(pattern).parts
    fixed = [q for q in parts[: next(i for i, q in enumerate(parts) if any(c in q for c in "*?["))]]
    return Path(*fixed) if fixed else Path(".")


def _inside(root: Path, files: list[Path]) -> list[Path]:
    """`files` less those that resolve outside `root` through a symlink (reported on stderr), and
    less repeats of one file (a glob's `**` follows symlinked folders, loops included)."""
    import sys

    base, seen = root.resolve(), set()
    kept, outside = [], []
    for f in sorted(files, key=lambda f: (f.resolve() != f.absolute(), len(f.parts), f)):  # real path first
        real = f.resolve()
        if not real.is_relative_to(base):
            outside.append(f)
        elif real not in seen:
            seen.add(real)
            kept.append(f)
    if outside:
        said = (f"pretrain: skipped {count(len(outside), 'file')} in {root} that link outside it, "
                f"e.g. {outside[0]} -> {outside[0].resolve()}; name a file to read it")
        print(printable(said), file=sys.stderr)
    return kept


def is_supported(path: Path) -> bool:
    return path.name.lower().endswith(SUFFIXES)


# Formats whose records have named fields, one of which holds the text (ReaderConfig.text_field).
# The others (.txt, HTML, WARC) are one document per file or per record: no field to pick.
FIELD_SUFFIXES = JSONL_SUFFIXES + (".parquet", ".arrow")


def text_field_for(given: str | None, files: list[Path]) -> str:
    """The field to read the text of `files` from: `given` (--text-field), or "text" when it was
    not given. A field given for inputs none of which has fields is refused: `--text-field
    content` over .txt files was dropped in silence (session 13), and the run said nothing of it."""
    if given is None or any(f.name.lower().endswith(FIELD_SUFFIXES) for f in files):
        return "text" if given is None else given
    kinds = sorted({next((s for s in SUFFIXES if f.name.lower().endswith(s)), _kind(f)) for f in files})
    which = "the input file" if len(files) == 1 else f"the {len(files):,} input files"
    raise UserError(f"--text-field {printable(given)} picks a field of JSON Lines, Parquet or Arrow records; "
                    f"{which} ({', '.join(kinds)}) {'has' if len(files) == 1 else 'have'} no fields (one "
                    f"document per file or record): drop --text-field")


def walked(rel: str | Path, suffixes: tuple[str, ...] = SUFFIXES) -> bool:
    """True for a file that a folder walk or a bucket prefix's listing reads, `rel` its path below
    the folder: a known extension, not hidden (`is_hidden`), and not a plain `.json`: configs and
    metadata share that extension (tokenizer.json, config.json, datasets' state.json and
    dataset_info.json, a job's plan.json), so `.json` records are read when named or globbed
    (`DIR/**/*.json`); compressed ones (Dolma's `.json.gz`) are walked. `suffixes`: the
    extensions a caller reads (decontam's benchmarks: JSON Lines only)."""
    name = Path(rel).name.lower()
    return name.endswith(suffixes) and not name.endswith(".json") and not is_hidden(rel)


def globbed(rel: str | Path) -> bool:
    """True for a glob's match that is read, `rel` its path below the glob's fixed part (a local
    glob and a bucket's alike): a known extension (`.json` too: the pattern asked for it), and
    nothing hidden below the fixed part, as in a folder walk (`'out/**/*.parquet'` on a Spark
    output must not read a killed task's `_temporary/`; `'out/_temporary/*/*.parquet'` does)."""
    return is_supported(Path(rel)) and not is_hidden(rel)


def _below(path: Path, root: Path) -> Path:
    try:
        return path.relative_to(root)
    except ValueError:  # a glob of `..` parts: judge the name alone
        return Path(path.name)


def walk_folder(folder: Path, suffixes: tuple[str, ...] = SUFFIXES) -> list[Path]:
    """The files a folder holds, sorted, by the one rule (`walked`) and without links out of it
    (`_inside`): what a corpus folder and a benchmark folder (decontam) both read."""
    files = [f for f in folder.rglob("*") if walked(f.relative_to(folder), suffixes) and f.is_file()]
    return sorted(_inside(folder, files))


# Files a data folder holds beside its data that nobody means as records: not worth a line.
_PAPERWORK = re.compile(r"(readme|license|licence|notice|copying|changelog|authors)\b.*|.*\.(md|rst)",
                        re.IGNORECASE)
# ... and those of them a walk reads (LICENSE.txt, README.txt): named in one line, not skipped.
_LOOKS_PAPER = re.compile(r"(readme|license|licence|notice|copying|changelog|authors|manifest|citation)"
                          r"\b.*", re.IGNORECASE)


def excluded(rel: str | Path, patterns: tuple[str, ...] | list[str]) -> bool:
    """`--exclude GLOB` (repeatable): a file found by a folder walk, a glob or a bucket prefix is left
    out when a pattern matches its path below that folder (a pattern with a "/": `docs/*`, `**/x`
    reads as `*/x`) or its name (without one: `LICENSE*`, `*.md.txt`); fnmatch's rules, case as
    written. A file named on the command line is read, as hidden files are (`is_hidden`)."""
    rel = Path(rel).as_posix()
    name = rel.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(rel if "/" in pat else name, pat.replace("**/", "*/")) for pat in patterns)


def say_paperwork(root: str, read: list[Path]) -> None:
    """One line on stderr naming the files a walk reads as documents whose names say licence, readme,
    notice or manifest (`LICENSE.txt`: a data folder's paperwork, not its data), and how to leave them
    out. Not a silent skip: `README.txt` may be someone's data, and a skip nobody sees is worse."""
    import sys

    odd = sorted(f.as_posix() for f in read if _LOOKS_PAPER.fullmatch(f.name))
    if odd:
        shown = ", ".join(odd[:3]) + (f" and {len(odd) - 3:,} more" if len(odd) > 3 else "")
        one = len(odd) == 1
        print(printable(f"pretrain: {root}: {count(len(odd), 'file')} read as documents "
                        f"{'looks' if one else 'look'} like a licence or readme, not data ({shown}); "
                        f"--exclude '{Path(odd[0]).name}' leaves {'it' if one else 'one'} out"),
              file=sys.stderr)


def say_unread(root: str, every: list[Path], read: int, reads=None) -> None:
    """One line on stderr when a folder walk leaves files unread. None read: `.json` files (not
    walked: configs share the extension) and how to read them, or files of other types (a folder of
    `.html.gz` pages said only "no input files found"): how many, the commonest extensions, what
    is read. Some read: the others by type (a folder of `.jsonl` and `.pdf` files read the `.jsonl`
    alone, without a word), less paperwork (README, LICENSE, `.md`). `every`: the folder's (or
    bucket prefix's) files, relative to it; `reads`: what the walk reads (`walked`; a glob's:
    `globbed`)."""
    import sys
    from collections import Counter

    files = [f for f in every if not is_hidden(f)]
    jsons = [f for f in files if f.name.lower().endswith(".json")]
    other = [f for f in files if not f.name.lower().endswith(".json")]
    how = (f"a folder's .json files are not read (configs share the extension); name them or use a glob "
           f"such as '{root.rstrip('/')}/**/*.json'")
    if read:
        left = [f for f in files if not (reads or walked)(f) and not _PAPERWORK.fullmatch(f.name)]
        if left:
            kinds = Counter(_kind(f) for f in left).most_common(3)
            line = (f"{root}: {count(len(left), 'file')} of a type not read here left out "
                    f"({', '.join(f'{k} {n:,}' for k, n in kinds)}), {read:,} read"
                    + (f"; {how}" if any(f.name.lower().endswith(".json") for f in left) else ""))
            print(printable(f"pretrain: {line}"), file=sys.stderr)
        return
    if jsons and not other:
        line = f"{root} holds {count(len(jsons), '.json file')} and nothing else to read: {how}"
    elif other:
        kinds = Counter(_kind(f) for f in other).most_common(3)
        kinds += [(".json", len(jsons))] if jsons else []
        line = (f"{root} holds {count(len(files), 'file')}, none of a type read here "
                f"({', '.join(f'{k} {n:,}' for k, n in kinds)}); read: .jsonl/.json/.ndjson (plain or "
                ".gz/.zst/.bz2/.xz), .parquet, .arrow, .txt, .html/.htm, .warc/.wet/.wat/.arc (plain or "
                ".gz)"
                + (f"; {how}" if jsons else ""))
    elif hidden := [f for f in every if is_hidden(f) and (reads or walked)(Path(f.name.lstrip("._")))]:
        line = (f"{root} holds only hidden files ({count(len(hidden), 'file')} of a type read, e.g. "
                f"{hidden[0].as_posix()}): names starting with . or _ are left out (a killed Spark task's "
                "_temporary/, macOS ._ files); name a file to read it")
    else:
        return
    print(printable(f"pretrain: {line}"), file=sys.stderr)


def _kind(f: Path) -> str:
    return "".join(f.suffixes[-2:]).lower() or "(no extension)"


def is_hidden(rel: str | Path) -> bool:
    """True when a part of a path below the folder being walked starts with "." or "_": hidden
    files and folders (.DS_Store, macOS `._x.jsonl` AppleDouble files, .cache/), and the
    bookkeeping of Hadoop, Spark and Delta Lake (_SUCCESS, `.part-0.parquet.crc`, _temporary/ with
    a killed task's half-written parts, _delta_log/). pyarrow.dataset skips the same prefixes
    (`ignore_prefixes`). A file named on the command line, or matched by a glob, is read."""
    return any(part.startswith((".", "_")) and part not in (".", "..") for part in Path(rel).parts)


def source_name(path: Path, root: str | Path | None = None) -> str:
    """The file name relative to its input root (stable across machines), else its base name."""
    if root is not None:
        root = Path(root)
        base = root if root.is_dir() else root.parent
        try:
            return path.resolve().relative_to(base.resolve()).as_posix()
        except ValueError:
            pass
    return path.name
