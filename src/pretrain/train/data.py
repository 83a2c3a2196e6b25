"""Batches for the trainer: token shards through the MixtureSampler, or a raw text file on the fly.

Every loader answers `next_batch(batch_size) -> int64 (batch_size, seq_len + 1)` and has an exact
`state_dict()`: restoring it continues the same stream, so a resumed run sees the same batches.
`SkippingLoader` wraps any loader and drops micro-batch indices (PaLM's "skip the batches around the
spike", Chowdhery et al. 2022, sec. 5.1); its ranges are part of its state, so they survive restarts.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from pretrain.errors import UserError

BYTE_VOCAB = 257  # 256 byte values + one end-of-text id (256)
MAX_TEXT_BYTES = 2 << 30  # refuse to slurp more than 2 GiB of raw text: use token shards instead


def encode_text(text: str, tokenizer: str = "", say=None) -> tuple[np.ndarray, int]:
    """Token ids of `text` and the vocabulary size: UTF-8 bytes (vocab 257) or a tokenizer.json.
    `say(line)` is told, once, when a long text is encoded whole (its tokenizer has no cut rule)."""
    if not tokenizer:
        return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int64), BYTE_VOCAB
    from pretrain.tokens import pieces
    from pretrain.tokens.tokenizer import load_tokenizer

    tok = load_tokenizer(tokenizer)  # a long text in pieces: ~120 bytes per character whole (2 GiB)
    rule = pieces.cut_rule(tok) if len(text) > pieces.LONG_DOC else None
    if isinstance(rule, str) and say is not None:  # `tokenize` says it per shard; this was silent
        say(f"{len(text):,} characters {pieces.whole_because(rule)}")
    return pieces.encode_ids(tok, text, rule, specials=True), tok.get_vocab_size()


def decode_tokens(ids: list[int], tokenizer: str = "") -> str:
    if not tokenizer:
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")
    from pretrain.tokens.tokenizer import load_tokenizer

    return load_tokenizer(tokenizer).decode(ids)


def undecodable_tokens(ids: list[int], tokenizer: str = "") -> int:
    """How many of `ids` carry a byte that is part of no valid UTF-8 character of the decoded text
    (each such run shows as U+FFFD: decoding replaces, as Hugging Face's decode does). Counted for
    byte ids and byte-level BPE (a partly trained model emits byte pieces that do not form
    characters); 0 for a tokenizer whose tokens are not bytes."""
    pieces = _token_bytes(ids, tokenizer)
    if pieces is None:
        return 0
    bad, off = [], 0
    # surrogateescape turns each invalid byte (always >= 0x80) into one lone surrogate U+DC80..DCFF
    for ch in b"".join(pieces).decode("utf-8", errors="surrogateescape"):
        if "\udc80" <= ch <= "\udcff":
            bad.append(off)
            off += 1
        else:
            off += len(ch.encode("utf-8"))
    ends = np.cumsum([len(p) for p in pieces])
    return len(set(np.searchsorted(ends, bad, side="right").tolist()))


def _token_bytes(ids: list[int], tokenizer: str) -> list[bytes] | None:
    """Each token's bytes as decode sees them (special tokens: none); None when not byte-level."""
    if not tokenizer:
        return [bytes([i]) if 0 <= i < 256 else b"" for i in ids]
    from pretrain.tokens.hf_tokenizer import bytes_to_unicode
    from pretrain.tokens.tokenizer import load_tokenizer

    tok = load_tokenizer(tokenizer)
    if type(tok.decoder).__name__ != "ByteLevel":
        return None
    back = {c: b for b, c in bytes_to_unicode().items()}
    special = {i for i, t in tok.get_added_tokens_decoder().items() if t.special}
    out = []
    for i in ids:
        piece = tok.id_to_token(i) or ""
        ok = i not in special and all(c in back for c in piece)
        out.append(bytes(back[c] for c in piece) if ok else b"" if i in special else piece.encode("utf-8"))
    return out


class TextLoader:
    """Random windows of one token array; batch i's offsets depend only on (seed, i, rank slice).

    Stateless sampling keyed by the batch number makes the state one integer, and the global batch
    (batch_size * world_size windows) is the same for any world size: rank r takes its own rows.
    """

    def __init__(self, tokens: np.ndarray, seq_len: int, seed: int = 0, rank: int = 0, world_size: int = 1,
                 name: str = "text", tokenizer: dict | None = None):
        if tokens.size < seq_len + 2:
            raise UserError(f"{name}: {tokens.size} tokens, fewer than one sequence of {seq_len + 1}")
        self.tokens, self.seq_len, self.seed = tokens, seq_len, seed
        self.rank, self.world_size, self.name = rank, world_size, name
        self.batches, self.tokenizer = 0, tokenizer  # tokenizer_identity: says why a fingerprint moved
        self.fingerprint = hashlib.sha256(tokens[:65536].tobytes()).hexdigest()[:16] + f"/{tokens.size}"

    def batch_at(self, i: int, batch_size: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, i])
        starts = rng.integers(0, self.tokens.size - self.seq_len - 1, size=batch_size * self.world_size)
        mine = starts[self.rank * batch_size:(self.rank + 1) * batch_size]
        return np.stack([self.tokens[s:s + self.seq_len + 1] for s in mine])

    def next_batch(self, batch_size: int) -> np.ndarray:
        out = self.batch_at(self.batches, batch_size)
        self.batches += 1
        return out

    def state_dict(self) -> dict:
        state = {"kind": "text", "batches": self.batches, "seed": self.seed, "seq_len": self.seq_len,
                 "fingerprint": self.fingerprint}
        return state if self.tokenizer is None else {**state, "tokenizer": self.tokenizer}

    def load_state_dict(self, state: dict) -> None:
        mine = {"seed": self.seed, "seq_len": self.seq_len, "fingerprint": self.fingerprint}
        theirs = {k: state.get(k) for k in mine}
        if theirs != mine:
            how = tokenizer_change(state.get("tokenizer"), self.tokenizer)
            if how and theirs["fingerprint"] != mine["fingerprint"]:
                raise UserError(f"{self.name}: cannot resume: the tokenizer of the checkpoint's token ids "
                                f"changed: {how}; restore it, or start a new run in another train.out")
            what = _text_change(theirs, mine)
            raise UserError(f"{self.name}: the checkpoint was trained on other data ({what}); "
                            "point data.path back at that text, or train into another train.out")
        self.batches = int(state["batches"])


def _text_change(theirs: dict, mine: dict) -> str:
    """What differs between a checkpoint's text-loader state and this loader, in words (the state's
    fingerprint is "sha256-prefix/token-count")."""
    out = [f"{key} {str(theirs[k])[:40]} then, {mine[k]} now"
           for k, key in (("seed", "data.seed"), ("seq_len", "model.seq_len")) if theirs[k] != mine[k]]
    if theirs["fingerprint"] != mine["fingerprint"]:
        then = str(theirs["fingerprint"]).rpartition("/")[2][:20]
        now = mine["fingerprint"].rpartition("/")[2]
        out.append(f"{int(now):,} tokens now, {int(then):,} then" if then.isdigit() and then != now
                   else "as many tokens, other content" if then == now else "another text")
    return "; ".join(out)


def tokenizer_identity(path: str | Path = "") -> dict:
    """The tokenizer a text loader's ids come from, kept in its state: the file's absolute path,
    size and SHA-256 (path "" for UTF-8 bytes). A resume whose ids differ can then say the
    tokenizer changed and how, instead of only that the token fingerprint moved."""
    if not path:
        return {"path": ""}
    p = Path(path).resolve()
    data = p.read_bytes()  # already read whole by load_tokenizer: a second read of a small file
    return {"path": str(p), "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def tokenizer_change(saved, now: dict | None) -> str:
    """How the tokenizer at `saved` (a tokenizer_identity from a checkpoint) differs from `now`, in
    words ("" when it does not, or when the checkpoint did not record it)."""
    if not isinstance(saved, dict) or not isinstance(now, dict) or not isinstance(saved.get("path"), str):
        return ""
    was = saved["path"]
    if not was:
        return f"it was UTF-8 bytes, it is now {now.get('path')}" if now.get("path") else ""
    p = Path(was)
    if not p.is_file():
        return f"{p} is missing" + ("" if now.get("path") else " (the text is now read as UTF-8 bytes)")
    size, before = p.stat().st_size, saved.get("bytes")
    if size != before:
        return f"{p} changed size ({before:,} -> {size:,} bytes)" if isinstance(before, int) else \
            f"{p} changed size (now {size:,} bytes)"
    if hashlib.sha256(p.read_bytes()).hexdigest() != saved.get("sha256"):
        return f"{p} changed content (same size, another SHA-256)"
    if now.get("path") != was:
        return f"it was {p}, it is now {now.get('path') or 'UTF-8 bytes'}"
    return ""


class SkippingLoader:
    """Wraps a loader; micro-batch indices inside `ranges` (inclusive) are drawn and thrown away."""

    def __init__(self, inner, ranges: list | None = None):
        self.inner = inner
        self.ranges: list[list[int]] = [[int(a), int(b)] for a, b in (ranges or [])]
        self.index = 0  # micro-batches drawn from `inner` so far, skipped ones included
        self.skipped = 0

    def _skipping(self, i: int) -> bool:
        return any(a <= i <= b for a, b in self.ranges)

    def next_batch(self, batch_size: int) -> np.ndarray:
        while self._skipping(self.index):
            self.inner.next_batch(batch_size)
            self.index += 1
            self.skipped += 1
        self.index += 1
        return self.inner.next_batch(batch_size)

    def add_skip(self, first: int, last: int) -> None:
        if [int(first), int(last)] not in self.ranges:  # a resume adds the ledger's ranges again
            self.ranges.append([int(first), int(last)])

    def state_dict(self) -> dict:
        return {"inner": self.inner.state_dict(), "index": self.index, "ranges": self.ranges,
                "skipped": self.skipped}

    def load_state_dict(self, state: dict, reweight: bool = False) -> None:
        """`reweight` (train.allow_changes): a token mixture changed since the state was saved goes on
        as a new phase (MixtureSampler.load_state_dict); a text loader has no mixture to change."""
        self.inner.load_state_dict(state["inner"], **({"reweight": True} if reweight else {}))
        self.index, self.skipped = int(state["index"]), int(state.get("skipped", 0))
        # Ranges added after this checkpoint (a rollback's skip) are kept: they are the reason we restored.
        for r in state["ranges"]:
            if [int(r[0]), int(r[1])] not in self.ranges:
                self.ranges.append([int(r[0]), int(r[1])])


def read_text(path: str | Path) -> str:
    p = Path(path)
    if p.is_dir() and (p / "manifest.json").is_file():  # `pretrain tokenize` wrote it: say how to train on it
        raise UserError(f"data.path: {p} is a token directory (pretrain tokenize), not a text file: "
                        f"--set data.kind=tokens --set data.sources.NAME={p} trains on it")
    if not p.is_file():
        raise UserError(f"data.path: text file not found: {p}")
    if p.stat().st_size > MAX_TEXT_BYTES:
        raise UserError(f"{p}: {p.stat().st_size} bytes: too large for kind='text'; tokenize it")
    return p.read_bytes().decode("utf-8", errors="replace")


def _say_once(what: str):
    """A `say` for encode_text: one line on stderr, from global rank 0 only (every rank encodes the
    text; under tp or pp more than one rank is data-parallel rank 0)."""
    import sys

    from pretrain.onerank import global_rank
    from pretrain.untrusted import one_line

    if global_rank() != 0:
        return None
    return lambda line: print(f"{one_line(what)}: {line}", file=sys.stderr, flush=True)


def build_loaders(dcfg, seq_len: int, rank: int = 0, world_size: int = 1) -> tuple[object, object, int]:
    """(train loader, eval loader or None, vocabulary size) for the data config."""
    if dcfg.kind == "text":
        given = [k for k in ("sources", "eval_sources") if getattr(dcfg, k)]
        if given:  # token folders given, kind left at the recipe's: beside a data.path they were dropped
            key = f"data.{given[0]}"  # in silence and the run trained on the text (session 14 sweep)
            reads = (f"trains on data.path {dcfg.path} and would ignore them" if dcfg.path else
                     "reads one file, data.path")
            raise UserError(f"{key} ({', '.join(getattr(dcfg, given[0]))}) are read with data.kind = "
                            f"\"tokens\"; data.kind is 'text', which {reads}: set data.kind = \"tokens\"")
        if not dcfg.path:
            raise UserError("data.path is required for data.kind='text'")
        ids, vocab = encode_text(read_text(dcfg.path), dcfg.tokenizer, _say_once(f"data.path {dcfg.path}"))
        n_eval = int(ids.size * dcfg.eval_fraction)
        train_ids, eval_ids = ids[:ids.size - n_eval], ids[ids.size - n_eval:]
        tok = tokenizer_identity(dcfg.tokenizer)
        train = TextLoader(train_ids, seq_len, dcfg.seed, rank, world_size, str(dcfg.path), tok)
        ev = None
        if eval_ids.size >= seq_len + 2:
            ev = TextLoader(eval_ids, seq_len, dcfg.seed + 1, rank, world_size, name=f"{dcfg.path} (eval)",
                            tokenizer=tok)
        return SkippingLoader(train, dcfg.skip), ev, vocab
    if dcfg.kind == "tokens":
        from pretrain.tokens.mixture import MixtureSampler

        if not dcfg.sources:  # data.path is kind=text's: with tokens it was dropped, "needs one source"
            path = f"; data.path {dcfg.path} is read by data.kind = text only" if dcfg.path else ""
            raise UserError(f"data.kind = \"tokens\" reads data.sources (NAME = token directory), and none "
                            f"is set{path}: --set data.sources.web={dcfg.path or 'TOKENS'}")

        weights = dcfg.weights or {k: 1.0 for k in dcfg.sources}
        train = MixtureSampler(dcfg.sources, weights, seq_len, dcfg.seed, rank, world_size)
        ev = None
        if dcfg.eval_sources:
            ew = {k: 1.0 for k in dcfg.eval_sources}
            ev = MixtureSampler(dcfg.eval_sources, ew, seq_len, dcfg.seed + 1, rank, world_size)
        # The model reads the held-out sources too: the largest vocabulary of any source is what
        # model.vocab_size must hold (only the training sources' was compared; an eval source of a
        # larger vocabulary then failed in the embedding at the first evaluation).
        vocab = max(d.vocab_size for s in (train, ev) if s is not None for d in s.dirs)
        return SkippingLoader(train, dcfg.skip), ev, vocab
    raise UserError(f"data.kind must be 'text' or 'tokens', got {dcfg.kind!r}")


def eval_batches(loader, n: int, batch_size: int) -> list[np.ndarray]:
    """The same n held-out batches every time (a fresh stream from the loader's start)."""
    if isinstance(loader, TextLoader):
        return [loader.batch_at(i, batch_size) for i in range(n)]
    state = loader.state_dict()
    out = [loader.next_batch(batch_size) for _ in range(n)]
    loader.load_state_dict(state)
    return out
