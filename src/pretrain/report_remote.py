"""`pretrain report s3://...`: a report argument on object storage (any fsspec URL the io layer opens).

Owns reading the few small files a section needs from a URL into a local folder laid out as the
job wrote it, so every section is drawn by the same code as for a folder on this disk (the page
of a bucket's folder equals the page of its copy). Nothing else is fetched:

- a corpus job: stats.json, plan.json, config.toml, decontam_report.json; its rejects/ and data/
  are not copied but streamed from the bucket by the section, which stops after the records it
  shows (report_corpus.MAX_SCANNED);
- a training run: metrics.jsonl, config.toml, the first 16 KiB of samples.txt, the newest file
  of eval/ (the others are named, not read); checkpoints are never read;
- a token directory: manifest.json, the tokenizer copy, every .idx (document lengths), and of
  the .bin shards only the bytes of the first documents (bytes per token): the rest of each shard
  is a hole of a sparse local file, so the shard keeps the size its manifest states;
- a JSON object (mixture, plan, eval result).

Each file is read up to the bound the local report uses (untrusted.MAX_SMALL_FILE, or the
section's own), counted while reading, so an object that is larger than listed cannot run past
it. Object keys are names someone else chose: only the names above are fetched, never a key
that would place a file outside the staging folder. A URL that holds nothing, or nothing the
report knows, is one line naming it.
"""

from __future__ import annotations

import re
from pathlib import Path

from pretrain import untrusted
from pretrain.curate import io as cio
from pretrain.curate.outputs import MAX_PLAN_BYTES
from pretrain.errors import UserError, storage_error

MAX_LARGE = 1 << 30  # metrics.jsonl, decontam_report.json, .idx: the local report reads these whole,
# under the same bound (report_run.read_metrics, report_corpus: decontam_report.json)
SAMPLES_HEAD = 16_384  # what the run section shows of samples.txt (report_run.run_section)
BPT_DOCUMENTS = 200  # documents decoded for bytes per token (report_corpus.bytes_per_token)
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}")  # a key's last part we write locally


class Remote:
    """A report argument at `url`, staged into `into` (created); `stage()` returns the local path."""

    def __init__(self, url: str, into: Path):
        self.url = url.rstrip("/")
        self.fs, self.root = cio.url_fs(self.url)
        self.root = self.root.rstrip("/")
        self.into = into

    def stage(self) -> Path:
        try:
            return self._stage()
        except UserError:
            raise
        except FileNotFoundError:
            raise UserError(f"not found: {self.url}") from None
        except Exception as e:  # the store refused (endpoint, credentials): one line naming the URL
            line = storage_error(e)
            if line is None:
                raise
            raise UserError(f"cannot read {self.url}: {line}") from e

    def _stage(self) -> Path:
        listed = self.fs.ls(self.root, detail=True)  # one listing; FileNotFoundError: nothing there
        if [e["name"].rstrip("/") for e in listed] == [self.root] and listed[0].get("type") == "file":
            return self._stage_object(listed[0])  # the URL names one object
        top = {Path(e["name"]).name: e for e in listed}
        if not top:
            raise UserError(f"not found: {self.url} (an empty folder)")
        name = self.root.rsplit("/", 1)[-1] if _PLAIN.fullmatch(self.root.rsplit("/", 1)[-1]) else "remote"
        local = self.into / name
        local.mkdir(parents=True, exist_ok=True)
        if "stats.json" in top:
            self._copy(top, local, ["decontam_report.json"], limit=MAX_LARGE)
            self._copy(top, local, ["stats.json", "config.toml"])
            self._copy(top, local, ["plan.json"], limit=MAX_PLAN_BYTES)
        elif "metrics.jsonl" in top:
            self._stage_run(top, local)
        elif "manifest.json" in top:
            self._stage_tokens(top, local)
        elif "plan.json" in top:  # an unfinished corpus job: the section says so, naming the URL
            self._copy(top, local, ["plan.json"], limit=MAX_PLAN_BYTES)
        else:
            raise UserError(f"{self.url}: not a curate output, token directory, mixture or plan JSON, "
                            "eval result or training run (it holds none of stats.json, metrics.jsonl, "
                            "manifest.json)")
        return local

    def _stage_object(self, info: dict) -> Path:
        """The URL names one object: a mixture, plan or eval JSON."""
        name = self.root.rsplit("/", 1)[-1]
        local = self.into / (name if _PLAIN.fullmatch(name) else "remote.json")
        self.into.mkdir(parents=True, exist_ok=True)
        self._fetch(self.root, local, untrusted.MAX_SMALL_FILE, info.get("size"))
        return local

    def _copy(self, top: dict, local: Path, names: list[str], limit: int = untrusted.MAX_SMALL_FILE) -> None:
        for name in names:
            entry = top.get(name)
            if entry is not None and entry.get("type") == "file":
                self._fetch(entry["name"], local / name, limit, entry.get("size"))

    def _fetch(self, key: str, dest: Path, limit: int, size: int | None = None, head: bool = False) -> None:
        """Copy at most `limit` bytes of `key` to `dest`; more is a BadFile naming the URL, unless
        `head` (only the first `limit` bytes are wanted)."""
        url = self.fs.unstrip_protocol(key)
        if size is not None and size > limit and not head:
            raise untrusted.BadFile(too_big(url, size, limit))
        got = 0
        # a head is fetched as it is read (s3fs reads ahead 50 MiB by default: the first read of
        # samples.txt or a .bin shard fetched that much for the 16 KiB or the few documents used)
        kw = {"cache_type": "none"} if head else {}
        with self.fs.open(key, "rb", **kw) as src, open(dest, "wb") as dst:
            while got <= limit and (block := src.read(min(1 << 20, limit + 1 - got))):
                dst.write(block)
                got += len(block)
        if got > limit:
            if not head:
                raise untrusted.BadFile(f"{url}: grew past the {limit:,} bytes such a file may hold "
                                        "while it was read")
            with open(dest, "r+b") as f:
                f.truncate(limit)

    def _stage_run(self, top: dict, local: Path) -> None:
        self._copy(top, local, ["metrics.jsonl"], limit=MAX_LARGE)
        self._copy(top, local, ["config.toml"])
        if (s := top.get("samples.txt")) and s.get("type") == "file":
            self._fetch(s["name"], local / "samples.txt", SAMPLES_HEAD, head=True)
        if (e := top.get("eval")) and e.get("type") == "directory":
            files = sorted(Path(f).name for f in self.fs.ls(e["name"], detail=False) if f.endswith(".json"))
            files = [f for f in files if _PLAIN.fullmatch(f)]
            (local / "eval").mkdir(exist_ok=True)
            for f in files[:-1]:  # named (the page counts them), not read
                (local / "eval" / f).touch()
            if files:
                self._fetch(f"{e['name']}/{files[-1]}", local / "eval" / files[-1], untrusted.MAX_SMALL_FILE)

    def _stage_tokens(self, top: dict, local: Path) -> None:
        from pretrain.tokens.shards import read_manifest

        self._copy(top, local, ["manifest.json"])
        man = read_manifest(local)  # checks the shard names are plain file names
        tok = (man.get("tokenizer") or {}).get("copy") or "tokenizer.json"
        if _PLAIN.fullmatch(str(tok)):
            self._copy(top, local, [str(tok)])
        itemsize = 2 if man.get("dtype") == "uint16" else 4
        wanted = BPT_DOCUMENTS
        for sh in man["shards"]:
            self._copy(top, local, [sh["idx"]], limit=MAX_LARGE)
            entry = top.get(sh["bin"])
            if entry is None:
                continue  # TokenDir names the missing shard
            bin_path = local / sh["bin"]
            idx = _offsets(local / sh["idx"])
            take = min(wanted, max(len(idx) - 1, 0))
            nbytes = int(idx[take]) * itemsize if take else 0
            if nbytes:
                self._fetch(entry["name"], bin_path, nbytes, head=True)
            with open(bin_path, "ab") as f:  # the rest: a hole, the size the listing gives
                f.truncate(int(entry.get("size") or 0))
            wanted -= take


def too_big(name: str, size: int, limit: int) -> str:
    """The one line for a file over its bound, the same for a local folder and a bucket."""
    return f"{name}: {size:,} bytes, over the {limit:,} bytes such a file may hold"


def _offsets(path: Path):
    from pretrain.tokens.shards import load_idx

    try:
        return load_idx(path)
    except (OSError, ValueError):
        return [0]


def stage(url: str, into: Path) -> Path:
    """The local copy of what the report reads of `url` (see the module's docstring)."""
    try:
        remote = Remote(url, into)
    except (ImportError, ValueError) as e:  # a protocol fsspec does not know, or its package missing
        raise UserError(f"{url}: cannot open: {e}") from None
    return remote.stage()
