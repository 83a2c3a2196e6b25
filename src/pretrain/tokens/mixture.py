"""Data mixtures: weights -> passes over each source, and the deterministic weighted sampler.

`epochs_per_source` is the mixture arithmetic (epochs_i = w_i * D / N_i; the LLaMA paper's Table 1
reports the same "epochs" column). `MixtureSampler` is the trainer's data source: it draws
sequences of `seq_len + 1` tokens from token directories by weight, from a seed, and resumes
exactly from `state_dict()`, whatever the number of data-parallel ranks.

How a sequence is chosen (all of it a pure function of the seed and the global sequence number g,
so memory is O(1) in the corpus size and any rank can compute any position):

- Source choice: the global stream is cut into blocks of `BLOCK` sequences. Each block holds an
  exact quota of each source (largest-remainder rounding of w_i * BLOCK), and a keyed permutation
  of the block's positions shuffles the order. Shares are exact to 1/BLOCK per block, not just in
  expectation, and the order is still random.
- Window choice: source i's token stream is cut into W_i = (N_i - 1) // seq_len windows that start
  every `seq_len` tokens and are `seq_len + 1` long (each token is a target exactly once per epoch;
  windows run across documents, which the end-of-text token separates). The k-th draw from a
  source takes window perm_{i,e}(k mod W_i) in epoch e = k // W_i, with a fresh keyed permutation
  per epoch.
- Permutations are an unbalanced Feistel network on the next power of two with cycle walking (Black and
  Rogaway, "Ciphers with Arbitrary Finite Domains", 2002): a bijection computed per index, never
  materialized.

The state is g (sequences drawn by all ranks together); per-source counts are derived from it.

A mixture changed on resume (`load_state_dict(state, reweight=True)`, the trainer's
`train.allow_changes`: other weights, a source added or dropped) starts a new *phase* at the saved g:
source choice follows the new quotas from there (blocks counted from the phase start), and each
source's draws go on from the count it had (`phase.drawn`), so its epochs continue: no window read
twice before all its windows are read, across the change.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from pathlib import Path
from typing import Any

import numpy as np
import xxhash

from pretrain.bounds import check_number
from pretrain.errors import UserError
from pretrain.tokens.shards import TokenDir
from pretrain.untrusted import load_toml

BLOCK = 1 << 16  # sequences per source-choice block: share error <= 1/65,536 per block
STATE_VERSION = 1
_ROUNDS = 6
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def epochs_per_source(
    weights: dict[str, float], available: dict[str, float], budget: float
) -> dict[str, float]:
    """Passes over each source implied by a mixture: w_i * D / N_i (D = budget in tokens)."""
    missing = set(weights) - set(available)
    if missing:
        raise UserError(f"no token count for source{'s' * (len(missing) != 1)} {', '.join(sorted(missing))}")
    # weight 0: nothing drawn, 0 passes, even over 0 tokens (it printed inf and a warning)
    return {k: weights[k] * budget / available[k] if available[k] else math.inf if weights[k] else 0.0
            for k in weights}


# --- keyed permutations ---------------------------------------------------------------------


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: a cheap bijective scramble of 64-bit words (vectorized; wraps mod 2^64)."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def _key(*parts: object) -> int:
    return xxhash.xxh64_intdigest(":".join(str(p) for p in parts).encode())


def permute(idx: np.ndarray, n: int, key: int) -> np.ndarray:
    """The image of `idx` (values in [0, n)) under a keyed pseudo-random permutation of [0, n)."""
    idx = np.asarray(idx, dtype=np.uint64)
    if n <= 1:
        return idx.astype(np.int64)
    # Unbalanced Feistel on b-bit words (2^b < 2n): each round XORs one half with a keyed hash of
    # the other, which is invertible whatever the halves' widths; cycle walking maps back into [0, n).
    bits = int(n - 1).bit_length()
    lo_bits = bits // 2
    shift = np.uint64(lo_bits)
    lo_mask, hi_mask = np.uint64((1 << lo_bits) - 1), np.uint64((1 << (bits - lo_bits)) - 1)
    keys = [np.uint64(k) for k in _round_keys(key)]

    def feistel(x: np.ndarray) -> np.ndarray:
        hi, lo = x >> shift, x & lo_mask
        for r, k in enumerate(keys):
            if r % 2 == 0:
                hi = hi ^ (_mix64(lo ^ k) & hi_mask)
            else:
                lo = lo ^ (_mix64(hi ^ k) & lo_mask)
        return (hi << shift) | lo

    out = feistel(idx)
    todo = np.nonzero(out >= np.uint64(n))[0]
    while todo.size:  # cycle walking: the domain is < 2n, so about two rounds are expected
        out[todo] = feistel(out[todo])
        todo = todo[out[todo] >= np.uint64(n)]
    return out.astype(np.int64)


@functools.lru_cache(maxsize=4096)
def _round_keys(key: int) -> tuple[int, ...]:
    return tuple(_key(key, r) for r in range(_ROUNDS))


def block_quotas(weights: list[float], block: int = BLOCK) -> np.ndarray:
    """Integer sequences per source in one block: largest-remainder rounding of w_i * block."""
    w = np.asarray(weights, dtype=np.float64)
    raw = w / w.sum() * block
    q = np.floor(raw).astype(np.int64)
    order = np.argsort(-(raw - q), kind="stable")
    q[order[: block - int(q.sum())]] += 1
    return q


# --- the sampler ----------------------------------------------------------------------------


class MixtureSampler:
    """Weighted, seeded, resumable sampler of (seq_len + 1)-token sequences from token directories.

    The global batch at each call is `batch_size * world_size` consecutive sequences of the global
    stream; rank r returns rows [r * batch_size, (r + 1) * batch_size).
    """

    def __init__(
        self,
        sources: dict[str, str | Path],
        weights: dict[str, float],
        seq_len: int,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
    ):
        if set(sources) != set(weights):  # which one, and how to fix it (a typo: `web` for `books`)
            only_w, only_s = sorted(set(weights) - set(sources)), sorted(set(sources) - set(weights))
            odd = "; ".join([f"{', '.join(only_w)}: a weight but no token directory"] * bool(only_w)
                            + [f"{', '.join(only_s)}: a token directory but no weight"] * bool(only_s))
            raise UserError(f"sources ({', '.join(sorted(sources))}) and weights "
                            f"({', '.join(sorted(weights))}) name different sources ({odd}); give every "
                            "source both (data.sources.NAME and data.weights.NAME), or no weights at all")
        if not sources:
            raise UserError("a mixture needs at least one source")
        if seq_len < 1 or world_size < 1 or not 0 <= rank < world_size:
            raise UserError(f"bad sampler shape: seq_len={seq_len} rank={rank} world_size={world_size}")
        if any(not (w >= 0 and math.isfinite(w)) for w in weights.values()) or sum(weights.values()) <= 0:
            raise UserError(f"mixture weights must be non-negative with a positive sum: {weights}")
        distinct_sources(sources)
        self.names = sorted(sources)  # sorted: the stream never depends on dict order
        self.weights = {k: float(weights[k]) for k in self.names}
        self.seq_len, self.seed, self.rank, self.world_size = int(seq_len), int(seed), rank, world_size
        self.dirs = [open_source(k, sources[k]) for k in self.names]
        self._check_same_tokenizer()
        self.windows = np.array([(d.num_tokens - 1) // self.seq_len for d in self.dirs], dtype=np.int64)
        for name, d, w in zip(self.names, self.dirs, self.windows):
            if w < 1 and self.weights[name] > 0:
                raise UserError(f"source {name!r} ({d.path}) has {d.num_tokens} tokens, "
                                f"fewer than one sequence of {self.seq_len + 1}")
        self.quota = block_quotas([self.weights[k] for k in self.names])
        self._bounds = np.cumsum(self.quota)
        self.eot_id = self.dirs[0].eot_id
        self.phase_start = 0  # g where these weights took over (a mixture changed on resume)
        self.phase_drawn = np.zeros(len(self.names), dtype=np.int64)  # each source's draws before it
        self.changed_tokens: dict[str, tuple[int, int]] = {}  # source: (tokens then, now), a resume's
        self._seek(0)

    def _check_same_tokenizer(self) -> None:
        shas = {d.tokenizer_sha256 for d in self.dirs}
        if len(shas) > 1:
            detail = ", ".join(f"{n}={d.tokenizer_sha256[:12]}" for n, d in zip(self.names, self.dirs))
            raise UserError(f"mixture sources were tokenized with different tokenizers: {detail}")

    # The stream, as pure functions of the global sequence number ------------------------------

    def sources_at(self, g: np.ndarray) -> np.ndarray:
        """Source index (into sorted names) of global sequences g."""
        g = np.asarray(g, dtype=np.int64) - self.phase_start  # blocks count from the phase's start
        out = np.empty(g.shape, dtype=np.int64)
        blocks = g // BLOCK
        for b in np.unique(blocks):
            sel = blocks == b
            # the first phase keeps its key (states saved before phases existed resume as they were)
            key = _key(self.seed, "choice", int(b)) if not self.phase_start else \
                _key(self.seed, "choice", self.phase_start, int(b))
            pos = permute(g[sel] % BLOCK, BLOCK, key)
            out[sel] = np.searchsorted(self._bounds, pos, side="right")
        return out

    def _counts_before(self, g: int) -> np.ndarray:
        """Sequences drawn from each source among global sequences [0, g) (g from the phase start)."""
        b, i = divmod(max(g, self.phase_start) - self.phase_start, BLOCK)
        start = self.phase_start + b * BLOCK
        head = self.sources_at(np.arange(start, start + i, dtype=np.int64))
        return self.phase_drawn + b * self.quota + np.bincount(head, minlength=len(self.names))

    def _window_starts(self, src: int, k: np.ndarray) -> np.ndarray:
        """Token offsets of the k-th draws from source `src`."""
        w = int(self.windows[src])
        epochs, slot = k // w, k % w
        win = np.empty_like(k)
        for e in np.unique(epochs):
            sel = epochs == e
            win[sel] = permute(slot[sel], w, _key(self.seed, "windows", self.names[src], int(e)))
        return win * self.seq_len

    def _seek(self, g: int) -> None:
        self.position = int(g)
        self._counts = self._counts_before(self.position)

    # The interface the trainer uses ----------------------------------------------------------

    def next_batch(self, batch_size: int) -> np.ndarray:
        """This rank's slice of the next global batch: int64 array (batch_size, seq_len + 1)."""
        total = batch_size * self.world_size
        g = np.arange(self.position, self.position + total, dtype=np.int64)
        src = self.sources_at(g)
        draw = np.empty(total, dtype=np.int64)  # k: how many earlier draws this source has had
        for s in range(len(self.names)):
            sel = src == s
            draw[sel] = self._counts[s] + np.arange(int(sel.sum()), dtype=np.int64)
        lo, hi = self.rank * batch_size, (self.rank + 1) * batch_size
        out = np.empty((batch_size, self.seq_len + 1), dtype=np.int64)
        for s in np.unique(src[lo:hi]):
            rows = np.nonzero(src[lo:hi] == s)[0]
            starts = self._window_starts(int(s), draw[lo:hi][rows])
            out[rows] = self.dirs[s].gather(starts, self.seq_len + 1)
        self._counts += np.bincount(src, minlength=len(self.names))
        self.position += total
        return out

    def state_dict(self) -> dict[str, Any]:
        """The global position plus what it is only valid for (JSON-serializable, rank-free)."""
        drawn = dict(zip(self.names, self.phase_drawn.tolist()))
        phase = {"phase": {"start": self.phase_start, "drawn": drawn}}
        return {
            "version": STATE_VERSION,
            "sequences": self.position,
            "seed": self.seed,
            "seq_len": self.seq_len,
            "weights": dict(self.weights),
            "tokens": {k: d.num_tokens for k, d in zip(self.names, self.dirs)},
            "block": BLOCK,
            **(phase if self.phase_start else {}),  # none: as before phases existed
        }

    def load_state_dict(self, state: dict, reweight: bool = False) -> None:
        """Continue from a saved position; refuses a state from a different stream definition
        (another seed, sequence length, weights, or sources whose token counts changed). With
        `reweight` (train.allow_changes), other weights or sources start a new phase there instead:
        each source's epochs go on from the draws it had (module docstring); changed tokens of a
        source, the seed or seq_len are still refused (its windows would not be the same)."""
        if state.get("version") != STATE_VERSION or state.get("block") != BLOCK:
            raise UserError(f"sampler state version/block {state.get('version')}/{state.get('block')} "
                            f"is not {STATE_VERSION}/{BLOCK}")
        g = state.get("sequences")
        if not _integer(g) or not 0 <= g < 2**62:  # int64 arithmetic downstream; a state may be hostile
            raise UserError(f"sampler state: sequences must be an integer in [0, 2^62), got {g!r}")
        mine = {"seed": self.seed, "seq_len": self.seq_len, "weights": self.weights,
                "tokens": {k: d.num_tokens for k, d in zip(self.names, self.dirs)}}
        theirs = {k: state.get(k) for k in mine}
        phase = _phase(state, g)
        if theirs == mine:
            self.phase_start, self.phase_drawn = phase[0], np.array(
                [phase[1].get(k, 0) for k in self.names], dtype=np.int64)
        elif reweight and self._same_windows(theirs):
            self._new_phase(theirs, phase, g)
        else:
            what = _changes(theirs, mine)
            how = ("train.allow_changes continues other weights, sources or tokens in a source, not another "
                   "seed or seq_len: " if reweight else "resuming would give a different stream: ")
            go_on = "" if reweight or not self._same_windows(theirs) else (
                ", or --set train.allow_changes=true to go on with the change (a source whose tokens "
                "changed starts a new epoch over its windows: docs/tokens.md)")
            raise UserError(f"data.sources: the checkpoint was trained on another mixture ({what}); {how}"
                            "point data.sources and data.weights back at what it was trained on, train "
                            f"into another train.out{go_on}")
        self._seek(g)

    def _same_windows(self, theirs: dict) -> bool:
        """The saved stream cut the sources this one shares with it into the same windows (same seed,
        seq_len and token counts), and its weights are a well-formed mixture: a new phase may follow."""
        w, tokens = theirs["weights"], theirs["tokens"]
        if theirs["seed"] != self.seed or theirs["seq_len"] != self.seq_len:
            return False
        if not (isinstance(w, dict) and isinstance(tokens, dict) and 0 < len(w) <= 4096
                and set(w) == set(tokens)):
            return False
        if any(not isinstance(v, (int, float)) or not (v >= 0 and math.isfinite(v)) for v in w.values()):
            return False
        # other token counts are a new cut of that source (`_new_phase`); a state may be hostile
        return sum(w.values()) > 0 and all(_integer(t) and 0 <= t < 2**62 for t in tokens.values())

    def _new_phase(self, theirs: dict, phase: tuple[int, dict[str, int]], g: int) -> None:
        """The saved mixture's draws per source at g (its own quotas and phase), kept as the
        new phase's starting counts; a source new to the mixture starts at 0."""
        names = sorted(theirs["weights"])
        quota = block_quotas([float(theirs["weights"][k]) for k in names])
        old = _Stream(names, self.seed, quota, np.cumsum(quota), phase[0],
                      np.array([phase[1].get(k, 0) for k in names], dtype=np.int64))
        drawn = dict(zip(old.names, MixtureSampler._counts_before(old, g).tolist()))
        self.changed_tokens = {k: (theirs["tokens"][k], d.num_tokens) for k, d in zip(self.names, self.dirs)
                               if k in drawn and theirs["tokens"][k] != d.num_tokens}
        for k, (then, _) in self.changed_tokens.items():
            # Its windows are another cut now (tokens added or removed move them): its draws go on at
            # the start of the next epoch over the new windows, whose permutation no draw used yet. The
            # windows left unread in the interrupted epoch wait for that new epoch (docs/tokens.md).
            old_windows = max(1, (int(then) - 1) // self.seq_len)
            drawn[k] = -(-drawn[k] // old_windows) * int(self.windows[self.names.index(k)])
        self.phase_start = g
        self.phase_drawn = np.array([drawn.get(k, 0) for k in self.names], dtype=np.int64)

    def epochs_after(self, sequences: int) -> dict[str, float]:
        """Passes over each source once `sequences` global sequences are drawn: its exact draw count
        (the block quotas and the last block's shuffle) over its windows; weight 0 gives 0."""
        drawn = self._counts_before(int(sequences))
        return {k: float(c) / max(1, int(w)) for k, c, w in zip(self.names, drawn, self.windows)}

    def epochs_table(self, sequences: int) -> dict[str, dict[str, float]]:
        """Per source: normalized weight, tokens, epochs after `sequences` (the run's `data` event)."""
        total = sum(self.weights.values())
        epochs = self.epochs_after(sequences)
        return {k: {"weight": self.weights[k] / total, "tokens": d.num_tokens, "epochs": epochs[k]}
                for k, d in zip(self.names, self.dirs)}

    def describe(self, sequences: int, warn_epochs: float = 4.0) -> str:
        """One log line: per source its weight (normalized), tokens and the epochs a run of
        `sequences` global sequences makes over it, flagged past `warn_epochs` (as `pretrain mix`)."""
        return describe_epochs(self.epochs_table(sequences), warn_epochs)

    def shares(self) -> dict[str, float]:
        """Realized share of sequences per source so far."""
        n = max(1, self.position)
        return {k: float(c) / n for k, c in zip(self.names, self._counts)}


@dataclasses.dataclass
class _Stream:
    """What `sources_at` and `_counts_before` read of a sampler: a saved mixture's stream is
    recomputed with them, without opening its sources."""

    names: list = dataclasses.field(default_factory=list)
    seed: int = 0
    quota: Any = None
    _bounds: Any = None
    phase_start: int = 0
    phase_drawn: Any = None
    sources_at = MixtureSampler.sources_at


def _phase(state: dict, g: int) -> tuple[int, dict[str, int]]:
    """A state's phase (start, draws per source before it): (0, {}) when it has none. A state from
    someone else's checkpoint is checked: integers, a start not past g, at most 4,096 sources."""
    phase = state.get("phase")
    if phase is None:
        return 0, {}
    start = phase.get("start") if isinstance(phase, dict) else None
    drawn = phase.get("drawn") if isinstance(phase, dict) else None
    if (not _integer(start) or not 0 < start <= g or not isinstance(drawn, dict) or len(drawn) > 4096
            or any(not (isinstance(k, str) and _integer(v) and 0 <= v < 2**62) for k, v in drawn.items())):
        raise UserError(f"sampler state: phase must be {{start: an integer in (0, sequences], drawn: "
                        f"{{source: count}}}}, got {_short(phase)}")
    return start, drawn


def describe_epochs(table: dict[str, dict[str, float]], warn_epochs: float = 4.0) -> str:
    """`data: web 0.800 of 1,234 tokens = 0.50 epochs; code ... = 2.10 epochs (repeated); ...;
    WARNING: wiki over 4 epochs, ...`:
    the training log's line, and the run report's (from the `data` event of metrics.jsonl)."""
    parts = [f"{k} {r['weight']:.3f} of {r['tokens']:,} tokens = {r['epochs']:.2f} epochs"
             + (" (repeated)" if 1 < r["epochs"] <= warn_epochs else "")  # as `pretrain mix` says it
             for k, r in table.items()]
    over = [k for k, r in table.items() if r["epochs"] > warn_epochs]
    flag = f"; WARNING: {', '.join(over)} over {warn_epochs:g} epochs, expect memorization" if over else ""
    return f"data: {'; '.join(parts)}{flag}"


def _changes(theirs: dict, mine: dict, prefix: str = "") -> str:
    """The keys (source names inside `weights` and `tokens`) whose values differ: "key then -> now",
    the first 6 (a state from elsewhere may name a million sources), each value cut at 60 characters."""
    out = []
    for k in sorted(set(theirs) | set(mine), key=str):
        a, b = theirs.get(k), mine.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            if inner := _changes(a, b, f"{prefix}{k}."):
                out.append(inner)
        elif a != b:
            out.append(f"{prefix}{k} {_short(a)} -> {_short(b)}")
    return ", ".join(out[:6]) + (", ..." if len(out) > 6 else "")


def _short(v) -> str:
    text = "none" if v is None else repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


# --- mixture.toml ---------------------------------------------------------------------------


@dataclasses.dataclass
class Mixture:
    """A mixture file: `[sources.NAME] path = "tokens/web", weight = 0.8` and `budget = 1e12`."""

    sources: dict[str, Path]
    weights: dict[str, float]
    budget: float
    seq_len: int = 1024
    seed: int = 0
    seq_len_given: bool = True  # False: the file has no seq_len (1024 is a guess, checked by no one)


def load_mixture(path: str | Path) -> Mixture:
    path = Path(path)
    data = load_toml(path, what="mixture TOML")
    srcs = data.get("sources")
    if not isinstance(srcs, dict) or not srcs:
        raise UserError(f"{path}: needs [sources.NAME] tables with `path` and `weight`")
    sources, weights = {}, {}
    for name, s in srcs.items():
        extra = sorted(set(s) - {"path", "weight"}) if isinstance(s, dict) else []
        if extra:  # `weigth = 1` said "needs `weight`" at best; `epochs = 2` beside both was dropped
            raise UserError(f"{path}: source {name!r}: unknown key {', '.join(map(repr, extra))}; "
                            "known: path, weight")
        if not isinstance(s, dict) or "path" not in s or "weight" not in s:
            raise UserError(f"{path}: source {name!r} needs `path` and `weight`")
        if not isinstance(s["path"], str):
            raise UserError(f"{path}: source {name!r}: `path` must be a string, got {s['path']!r}")
        p = Path(s["path"])  # a URL stays as written: refused as one when opened (shards._not_a_url)
        sources[name] = s["path"] if "://" in s["path"] else p if p.is_absolute() else path.parent / p
        weights[name] = _number(path, f"source {name!r} weight", s["weight"], lambda w: w >= 0,
                                "a finite number >= 0")
    if sum(weights.values()) <= 0:
        raise UserError(f"{path}: source weights must have a positive sum, got {weights}")
    try:
        distinct_sources(sources, weights)
    except UserError as e:
        raise UserError(f"{path}: {e}") from None
    if "budget" not in data:
        raise UserError(f"{path}: needs `budget` (training tokens, e.g. budget = 1e12)")
    budget = _number(path, "budget", _count(data["budget"]), lambda b: b > 0,
                     "a positive token count (1e12, or \"1T\" as `pretrain plan --tokens` takes it)")
    seq_len = data.get("seq_len", 1024)
    if not _integer(seq_len) or seq_len < 1:
        raise UserError(f"{path}: seq_len must be an integer >= 1, got {seq_len!r}")
    seed = data.get("seed", 0)
    if not _integer(seed):
        raise UserError(f"{path}: seed must be an integer, got {seed!r}")
    unknown = sorted(set(data) - {"sources", "budget", "seq_len", "seed"})
    if unknown:  # a typo ("seq-len", "budjet") silently took the default
        raise UserError(f"{path}: unknown key {unknown[0]!r}; known: budget, seed, seq_len, sources")
    try:
        for key, value in (("budget", budget), ("seq_len", seq_len), ("seed", seed)):
            check_number(value, MIXTURE_BOUNDS[key], key)
    except UserError as e:
        raise UserError(f"{path}: {e}") from None
    return Mixture(sources, weights, budget, seq_len, seed, "seq_len" in data)


def open_source(name: str, path: str | Path, check_offsets: bool = False) -> TokenDir:
    """A source's token directory; a refusal names the source (`source 'books': tokens/bk: not
    found ...`): with several sources a bare path did not say which line of the mixture to fix."""
    try:
        return TokenDir(path, check_offsets=check_offsets)
    except UserError as e:
        raise UserError(f"source {name!r}: {e}") from None


def distinct_sources(sources: dict[str, str | Path], weights: dict[str, float] | None = None) -> None:
    """Refuse one token directory under two source names (`web` and `./web/`, or a link to it): it
    would be read as two corpora, each drawn at its own weight with its own window order, and
    `mix` would show each name's share of the epochs instead of the passes the data really gets."""
    seen: dict[Path, str] = {}
    for name in sorted(sources):
        real = Path(sources[name]).resolve()
        if real in seen:
            first = seen[real]
            total = f" ({weights[first]:g} + {weights[name]:g})" if weights else ""
            raise UserError(f"sources {first!r} and {name!r} are the same token directory ({real}); "
                            f"give it once, with the weight of both{total}")
        seen[real] = name


# The mixture file's numbers past their type checks (tests/test_config_bounds.py reads them too).
MIXTURE_BOUNDS = {
    # Llama 3 trained on 15.6e12 tokens; 1e16 is 600x that (1e30 printed epochs of 1e-18)
    "budget": {"gt": 0, "hi": 1e16, "why": "training tokens; Llama 3's were 1.56e13"},
    "seq_len": {"lo": 1, "hi": 2**24, "why": "tokens per training sequence"},
    "seed": {"hi": 2**63 - 1, "why": "a 64-bit seed, hashed with each source's name"},
}


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _count(value: object) -> object:
    """`budget = "1T"` as `pretrain plan --tokens 1T` reads it (it was refused as not a number);
    anything else is left for `_number` to judge."""
    from pretrain.plan.shapes import parse_count

    if isinstance(value, str) and len(value) < 64:
        try:
            return parse_count(value)
        except UserError:
            pass
    return value


def _number(path: Path, what: str, value: object, ok: Any, expected: str) -> float:
    # A mixture file may come from someone else: a string, nan, inf or a negative value would
    # print negative or nan epochs (or a traceback) instead of stopping here.
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not numeric or not math.isfinite(value) or not ok(value):
        raise UserError(f"{path}: {what} must be {expected}, got {value!r}")
    return float(value)


def mixture_table(mix: Mixture, warn_epochs: float = 4.0) -> list[dict[str, Any]]:
    """Per source: tokens available, weight (normalized), tokens drawn, epochs, `repeated` (more
    than one pass: its weight asks more tokens than it holds), `warning` (past `warn_epochs`)."""
    available = {k: open_source(k, p, check_offsets=True).num_tokens for k, p in mix.sources.items()}
    total_w = sum(mix.weights.values())
    if total_w <= 0:
        raise UserError("mixture weights must have a positive sum")
    for k, n in available.items():  # "inf epochs" is no answer: the sampler refuses such a source
        if n == 0 and mix.weights[k] > 0:
            raise UserError(f"source {k!r} ({mix.sources[k]}) has no tokens: nothing to draw (its "
                            "manifest.json's `skipped` says why); tokenize it again, or drop it")
        if mix.seq_len_given and n - 1 < mix.seq_len and mix.weights[k] > 0:  # no window: as above
            raise UserError(f"source {k!r} ({mix.sources[k]}) has {n:,} tokens, fewer than one training "
                            f"sequence of seq_len = {mix.seq_len:,} (+ 1) tokens: the sampler cannot draw "
                            "from it; give it more text, a smaller seq_len, or drop it")
    weights = {k: w / total_w for k, w in mix.weights.items()}
    epochs = epochs_per_source(weights, available, mix.budget)
    return [
        {"source": k, "available": available[k], "weight": weights[k], "drawn": weights[k] * mix.budget,
         "epochs": epochs[k], "repeated": epochs[k] > 1, "warning": epochs[k] > warn_epochs}
        for k in mix.sources
    ]


def sampler_from_mixture(
    path: str | Path, rank: int = 0, world_size: int = 1, seq_len: int | None = None
) -> MixtureSampler:
    """A `MixtureSampler` for a mixture.toml (its seq_len and seed unless `seq_len` is given)."""
    mix = load_mixture(path)
    return MixtureSampler(mix.sources, mix.weights, seq_len or mix.seq_len, mix.seed, rank, world_size)
