"""The one layout type of the project: how a run splits over GPUs, and the one set of validity rules.

The planner searches over `Layout`s and the trainer runs one (`pretrain plan --emit-recipe` writes it
as a training config). Five degrees multiply to the world size, innermost first as the ranks are
ordered (torchtitan, Megatron-LM): tp (inside a node), cp, dp_shard, dp_replicate, pp (outermost).
Besides the degrees, a layout carries what the planner must know to predict memory and time: the
ZeRO stage of the data-parallel group, the micro-batch, sequence parallelism, recomputation and
the virtual pipeline stages per GPU.

`problems()` returns every rule a layout breaks (an empty list when it can run), each one line
naming the numbers. Rules:
- every degree >= 1, the degrees multiply to the world size;
- heads and KV heads divisible by tp (each rank holds whole heads; Megatron-LM sec. 3);
- at least one layer per pipeline stage: n_layers >= pp · v. Uneven splits are allowed: Llama 3
  405B ran 126 layers on 16 stages (Dubey et al. 2024 sec. 3.3.2 removed a layer from the first
  and last stages);
- the sequence divisible by cp, by 2·cp with load-balanced causal attention (each rank takes one
  chunk from each end; Llama 3 sec. 3.3.2, Megatron's context parallelism);
- sequence parallelism only with tp > 1 (it splits what TP replicates);
- ZeRO stage in 0..3 and, above 0, a sharded data-parallel group (dp_shard > 1) to shard over;
- recompute one of none, selective, full; v > 1 only with pp > 1;
- with a global batch: sequences divisible by dp · mbs, and micro-batches per pipeline divisible by
  pp when interleaving (Megatron-LM 2021 sec. 2.2).
`trainer=True` adds what this project's trainer (train/) implements: recompute none or full,
v in {1, 2} (1F1B or interleaved 1F1B with 2 stages per rank), untied embeddings under pp, no
DDP replicas under pp, the ZeRO stages FSDP2 offers, and context parallelism only with rotary
positions and without pp, sequence parallelism or HSDP (train/context.py).

Pure Python: no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass

RECOMPUTE = ("none", "selective", "full")
DEGREES = ("dp_replicate", "dp_shard", "cp", "tp", "pp")


@dataclass(frozen=True)
class Layout:
    """Degrees and options of one parallel layout. `zero` applies over the sharded group (dp_shard ×
    cp, as torchtitan's FSDP and Megatron's distributed optimizer shard over data and context ranks)."""

    tp: int = 1
    pp: int = 1
    dp_shard: int = 1
    dp_replicate: int = 1
    cp: int = 1
    zero: int = 0  # 0 replicated state, 1 optimizer, 2 + gradients, 3 + weights (FSDP)
    mbs: int = 1  # sequences per micro-batch per rank
    recompute: str = "none"
    sp: bool = False  # sequence parallelism (Korthikanti 2022): needs tp > 1
    v: int = 1  # virtual pipeline stages per GPU (interleaved 1F1B when > 1)
    cp_load_balance: bool = True  # causal attention split in 2·cp chunks, two per rank

    @property
    def dp(self) -> int:
        return self.dp_replicate * self.dp_shard

    @property
    def world_size(self) -> int:
        return self.dp * self.cp * self.tp * self.pp

    @property
    def shard_group(self) -> int:
        """Ranks the ZeRO-sharded state is split over."""
        return self.dp_shard * self.cp

    def label(self) -> str:
        dp = f"dp={self.dp}" if self.dp_replicate == 1 or self.dp_shard == 1 else \
            f"dp={self.dp_replicate}x{self.dp_shard}"
        cp = f",cp={self.cp}" if self.cp > 1 else ""
        sp = ",sp" if self.sp else ""
        v = f",v={self.v}" if self.v > 1 else ""
        return (f"tp={self.tp},pp={self.pp}{v}{cp},{dp},zero={self.zero},mbs={self.mbs},"
                f"recompute={self.recompute}{sp}")

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__} | {"dp": self.dp}


def data_parallel(dp: int, zero: int, **kwargs) -> Layout:
    """A layout with `dp` data-parallel ranks: sharded (dp_shard) when the ZeRO stage shards anything,
    replicated (dp_replicate) otherwise."""
    if zero > 0:
        return Layout(dp_shard=dp, zero=zero, **kwargs)
    return Layout(dp_replicate=dp, zero=zero, **kwargs)


def problems(lay: Layout, *, world_size: int | None = None, n_layers: int | None = None,
             n_heads: int | None = None, n_kv_heads: int | None = None, seq_len: int | None = None,
             batch_seqs: int | None = None, tied_embeddings: bool = False, d_ff: int | None = None,
             learned_pos: bool = False, trainer: bool = False) -> list[str]:
    """Every rule `lay` breaks for this model and cluster (see the module docstring); [] if none.
    Arguments left None skip the rules that need them."""
    out = [f"{k} must be >= 1, got {getattr(lay, k)}" for k in (*DEGREES, "mbs", "v") if getattr(lay, k) < 1]
    if out:
        return out
    if world_size is not None and lay.world_size != world_size:
        out.append(f"dp_replicate={lay.dp_replicate} x dp_shard={lay.dp_shard} x cp={lay.cp} x tp={lay.tp} "
                   f"x pp={lay.pp} = {lay.world_size}, not the {world_size} GPUs")
    divisible = [("n_heads", n_heads), ("n_kv_heads", n_kv_heads)] + ([("d_ff", d_ff)] if trainer else [])
    for name, value in divisible:
        if value is not None and value % lay.tp:
            out.append(f"{name}={value} is not divisible by tp={lay.tp}")
    if n_layers is not None and n_layers < lay.pp * lay.v:
        out.append(f"n_layers={n_layers} < pp x v = {lay.pp * lay.v} pipeline stages")
    if seq_len is not None and lay.cp > 1:
        chunks = 2 * lay.cp if lay.cp_load_balance else lay.cp
        if seq_len % chunks:
            out.append(f"seq_len={seq_len} is not divisible by {chunks} (cp={lay.cp}"
                       f"{', x2 for load-balanced causal attention' if lay.cp_load_balance else ''})")
    if lay.sp and lay.tp == 1:
        out.append("sequence parallelism needs tp > 1")
    if lay.zero not in (0, 1, 2, 3):
        out.append(f"zero must be 0, 1, 2 or 3, got {lay.zero}")
    elif lay.zero > 0 and lay.dp_shard == 1 and lay.dp_replicate > 1:
        out.append(f"zero={lay.zero} needs sharded data parallelism (dp_shard > 1), got dp_shard=1")
    if lay.recompute not in RECOMPUTE:
        out.append(f"recompute must be one of {', '.join(RECOMPUTE)}, got {lay.recompute!r}")
    if lay.v > 1 and lay.pp == 1:
        out.append(f"v={lay.v} virtual stages need pp > 1")
    if batch_seqs is not None:
        out += _batch_problems(lay, batch_seqs)
    if trainer:
        out += _trainer_problems(lay, tied_embeddings) + _trainer_cp_problems(lay, learned_pos)
    return out


def micro_batches(lay: Layout, batch_seqs: int) -> int:
    """Micro-batches per step per pipeline (each rank of a data-parallel group sees its share)."""
    return batch_seqs // (lay.dp * lay.mbs)


def _batch_problems(lay: Layout, batch_seqs: int) -> list[str]:
    if batch_seqs < 1 or batch_seqs % (lay.dp * lay.mbs):
        return [f"a batch of {batch_seqs} sequences does not divide into dp x mbs = {lay.dp * lay.mbs}"]
    m = micro_batches(lay, batch_seqs)
    if lay.v > 1 and m % lay.pp:
        return [f"interleaving needs micro-batches ({m}) divisible by pp={lay.pp}"]
    return []


def _trainer_problems(lay: Layout, tied_embeddings: bool) -> list[str]:
    out = []
    if lay.recompute == "selective":
        out.append("the trainer recomputes none or full (no selective recompute)")
    if lay.v > 2:
        out.append(f"the trainer runs v=1 (1f1b) or v=2 (interleaved1f1b), got v={lay.v}")
    if lay.pp > 1 and tied_embeddings:
        out.append("pp > 1 needs untied embeddings: the first and last stages live on different ranks")
    if lay.pp > 1 and lay.dp_replicate > 1:
        out.append("pp > 1 with dp_replicate > 1 (DDP) is not supported by the trainer; use dp_shard")
    if lay.dp_shard > 1 and lay.zero == 0:
        out.append("dp_shard > 1 shards the state (FSDP): zero must be 2 or 3")
    if lay.zero == 1:
        out.append("the trainer has no ZeRO-1: FSDP2 shards gradients too (zero=2) or weights (zero=3)")
    return out


def _trainer_cp_problems(lay: Layout, learned_pos: bool) -> list[str]:
    """What train/context.py does not compose with yet. Here, not only in the trainer, so that a plan
    (`--emit-recipe`) never writes a context-parallel layout `pretrain train` then refuses."""
    if lay.cp == 1:
        return []
    out = []
    if lay.pp > 1:
        out.append(f"cp={lay.cp} with pp={lay.pp}: the trainer's context parallelism does not run under a "
                   "pipeline yet")
    if lay.dp_replicate > 1 and lay.dp_shard > 1:
        out.append(f"cp={lay.cp} with dp_replicate={lay.dp_replicate} x dp_shard={lay.dp_shard} (HSDP): "
                   "not supported by the trainer yet")
    if lay.sp:
        out.append(f"cp={lay.cp} with sequence parallelism: not supported by the trainer yet")
    if learned_pos:
        out.append(f"cp={lay.cp} needs rotary positions: the trainer does not split learned positions")
    return out
