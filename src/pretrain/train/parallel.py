"""Parallel layout: the degrees (pp x dp_replicate x dp_shard x tp = world size), the process group
and device mesh, and the small apply_* functions that transform the meta-device model.

Order (torchtitan's parallelize.py): validate -> mesh -> [pp split] -> tp -> ac -> compile -> fsdp
-> allocate and fill this rank's weights -> ddp. Data parallelism is DDP when only dp_replicate > 1, FSDP2
(ZeRO-3) when dp_shard > 1, HSDP when both are. Mesh dims of size 1 are left out of the mesh; the
order is pp (outermost), dp_replicate, dp_shard, tp (innermost: neighbouring ranks talk most).

Weights: each rank allocates and fills only its own piece, with the values one process would draw
(train/init.py: generators keyed by seed, parameter and row block); no full copy, no communication.
"""

from __future__ import annotations

import datetime
import os
import re
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from pretrain.errors import UserError

MESH_ORDER = ("pp", "dp_replicate", "dp_shard", "cp", "tp")
# Prefixes wrappers add to parameter names; stripped to find a parameter's name in the plain model.
_KEY = re.compile(r"\b(dp_replicate|dp_shard|cp|tp|pp|n_layers|n_heads|n_kv_heads|d_ff|seq_len)(?==)")
WRAPPER_PREFIXES = ("_checkpoint_wrapped_module.", "_orig_mod.", "module.")


@dataclass(frozen=True)
class ParallelDims:
    dp_replicate: int = 1
    dp_shard: int = 1
    tp: int = 1
    pp: int = 1
    cp: int = 1

    @property
    def world_size(self) -> int:
        return self.dp_replicate * self.dp_shard * self.cp * self.tp * self.pp

    @property
    def dp(self) -> int:
        return self.dp_replicate * self.dp_shard

    def validate(self, world_size: int) -> None:
        """Refuse a layout whose degrees do not multiply to the number of processes."""
        for k in MESH_ORDER:
            if getattr(self, k) < 1:
                raise UserError(f"parallel.{k} must be >= 1, got {getattr(self, k)}")
        if self.world_size != world_size:
            raise UserError(
                f"parallel degrees pp={self.pp} x dp_replicate={self.dp_replicate} x "
                f"dp_shard={self.dp_shard} x cp={self.cp} x tp={self.tp} = {self.world_size}, but the "
                f"world size is {world_size} (set them so that the product is the number of processes)")

    def plan_layout(self, pcfg):
        """The same layout as plan/layout.py's type (the one set of validity rules for plan/ and train/)."""
        from pretrain.plan.layout import Layout as PlanLayout

        zero = (3 if pcfg.reshard_after_forward else 2) if self.dp_shard > 1 else 0
        return PlanLayout(tp=self.tp, pp=self.pp, dp_shard=self.dp_shard, dp_replicate=self.dp_replicate,
                          cp=self.cp, zero=zero, recompute=pcfg.activation_checkpointing,
                          sp=pcfg.sequence_parallel,
                          v=stages_per_rank(pcfg.pp_schedule) if self.pp > 1 else 1)

    def check_shape(self, shape, pcfg) -> None:
        """Refuse a model the layout cannot split evenly, naming the factor (plan/layout.py's rules,
        then what only this trainer needs)."""
        from pretrain.plan.layout import problems

        broken = problems(self.plan_layout(pcfg), world_size=self.world_size, n_layers=shape.n_layers,
                          n_heads=shape.n_heads, n_kv_heads=shape.n_kv_heads, d_ff=shape.d_ff,
                          seq_len=shape.seq_len, tied_embeddings=shape.tied_embeddings,
                          learned_pos=shape.learned_pos, trainer=True)
        if broken:  # plan/layout.py names the numbers; here they are config keys
            msg = _KEY.sub(lambda m: ("parallel." if m.group(1) in MESH_ORDER else "model.") + m.group(0),
                           broken[0])
            raise UserError(msg + (f" (and {len(broken) - 1} more)" if len(broken) > 1 else ""))
        if self.tp > 1:
            for k in ("n_heads", "n_kv_heads", "d_ff"):
                if getattr(shape, k) % self.tp:
                    raise UserError(f"model.{k}={getattr(shape, k)} is not divisible by "
                                    f"parallel.tp={self.tp}")
        if self.pp > 1:
            stages = self.pp * stages_per_rank(pcfg.pp_schedule)
            if shape.n_layers < stages:
                raise UserError(f"model.n_layers={shape.n_layers} < {stages} pipeline stages "
                                f"(parallel.pp={self.pp}, schedule {pcfg.pp_schedule})")
            if shape.tied_embeddings:
                raise UserError("parallel.pp > 1 needs untied embeddings (model.tied_embeddings=false): "
                                "the first and last stages live on different ranks")
            if self.dp_replicate > 1:
                raise UserError("parallel.pp > 1 with dp_replicate > 1 (DDP) is not supported; "
                                "use parallel.dp_shard for the data-parallel degree")


def layout_of(dims: ParallelDims) -> dict[str, int]:
    """The degrees in the mesh's order (a checkpoint's state file keeps them: a resume says a reshard)."""
    return {k: getattr(dims, k) for k in MESH_ORDER}


def describe_layout(layout: dict[str, int]) -> str:
    """The degrees above 1 (`dp_shard=2 tp=2`), or `one process`."""
    return " ".join(f"{k}={v}" for k, v in layout.items() if v > 1) or "one process"


def dims_from_config(pcfg) -> ParallelDims:
    return ParallelDims(pcfg.dp_replicate, pcfg.dp_shard, pcfg.tp, pcfg.pp, pcfg.cp)


def env_world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def init_distributed(device: torch.device, timeout_s: float) -> None:
    """Join the process group torchrun (or a test's spawner) set up in the environment.

    The store is namespaced by torchrun's restart count: without it a restarted attempt reads
    addresses the crashed attempt left in the store and hangs or mismatches (reference notes:
    0/5 exact restarts without, 5/5 with).
    """
    if dist.is_initialized() or env_world_size() == 1:
        return
    store, rank, world = next(dist.rendezvous("env://", timeout=datetime.timedelta(seconds=timeout_s)))
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    store = dist.PrefixStore(f"attempt_{attempt}", store)
    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend, store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))


def end_distributed(barrier: bool = True) -> None:
    """Leave the process group at the end of a command (PyTorch's "Shutdown" guidance: call
    destroy_process_group once per process when communication is over; NCCL warns at exit
    otherwise). With `barrier`, every rank reaches this point before any tears its connections
    down: a `pretrain eval` rank that left while its peer still closed the last collective aborted
    once at exit in gloo. A rank that failed passes barrier=False: it cannot wait for the others."""
    if dist.is_initialized():
        if barrier:
            dist.barrier()
        dist.destroy_process_group()


class Layout:
    """The mesh and the groups the trainer needs, for one rank (world size 1: no mesh at all)."""

    def __init__(self, dims: ParallelDims, device: torch.device):
        self.dims = dims
        self.mesh = None
        self.coord: dict[str, int] = {k: 0 for k in MESH_ORDER}
        if dims.world_size > 1:
            from torch.distributed.device_mesh import init_device_mesh

            names = tuple(k for k in MESH_ORDER if getattr(dims, k) > 1)
            self.mesh = init_device_mesh(device.type, tuple(getattr(dims, k) for k in names),
                                         mesh_dim_names=names)
            self.coord.update(dict(zip(names, self.mesh.get_coordinate())))

    def sub(self, *names: str):
        """The sub-mesh over the named dims of size > 1, or None."""
        names = tuple(n for n in names if getattr(self.dims, n) > 1)
        if not names:
            return None
        return self.mesh[names[0]] if len(names) == 1 else self.mesh[names]

    def group(self, name: str):
        return self.mesh.get_group(name) if getattr(self.dims, name) > 1 else None

    @property
    def dp_rank(self) -> int:
        return self.coord["dp_replicate"] * self.dims.dp_shard + self.coord["dp_shard"]

    @property
    def pp_rank(self) -> int:
        return self.coord["pp"]

    @property
    def cp_rank(self) -> int:
        return self.coord["cp"]

    def flat(self, *names: str):
        """One 1-D mesh over the named dims of size > 1 (flattened when several), or None."""
        names = tuple(n for n in names if getattr(self.dims, n) > 1)
        if len(names) <= 1:
            return self.sub(*names)
        return self.mesh[names]._flatten("_".join(names))

    @torch.no_grad()
    def mean_over_dp(self, t: torch.Tensor) -> torch.Tensor:
        """The mean of a per-rank scalar over the data-parallel and context-parallel ranks (each cp
        rank's loss is the mean over its equal share of the tokens); all of them get it."""
        t = t.detach().clone()
        for name in ("dp_replicate", "dp_shard", "cp"):
            g = self.group(name)
            if g is not None:
                dist.all_reduce(t, group=g)
        return t / (self.dims.dp * self.dims.cp)

    def extra_norm_groups(self) -> tuple:
        """Groups over which each rank holds different plain parameters (pipeline stages)."""
        return (self.group("pp"),) if self.dims.pp > 1 else ()


# --- tensor parallelism (Megatron-LM, Shoeybi et al. 2019, sec. 3) --------------------------------

def apply_tp(model: nn.Module, tp_mesh, sequence_parallel: bool = False) -> None:
    """Column-parallel Q/K/V and MLP-in, row-parallel attention-out and MLP-out: one all-reduce per
    sub-block forward (and one backward). Embedding row-split over the vocabulary, output head
    column-split with the logits gathered. With sequence_parallel the norms and the residual stream
    are split along the sequence (Korthikanti et al. 2022), all-reduce -> reduce-scatter + all-gather.
    """
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    seq = Shard(1) if sequence_parallel else Replicate()
    top: dict = {}
    if getattr(model, "tok_emb", None) is not None and not model.shape.tied_embeddings:
        top["tok_emb"] = RowwiseParallel(input_layouts=Replicate(), output_layouts=seq)
    if getattr(model, "output", None) is not None:
        top["output"] = ColwiseParallel(input_layouts=seq, output_layouts=Replicate())
    if sequence_parallel and getattr(model, "norm", None) is not None:
        top["norm"] = SequenceParallel()
    if sequence_parallel and model.shape.tied_embeddings:
        raise UserError("parallel.sequence_parallel needs untied embeddings (model.tied_embeddings=false)")
    if top:
        parallelize_module(model, tp_mesh, top)
    for block in model.layers.values():
        plan = {"attn.wq": ColwiseParallel(), "attn.wk": ColwiseParallel(), "attn.wv": ColwiseParallel(),
                "attn.wo": RowwiseParallel(output_layouts=seq),
                "mlp.w1": ColwiseParallel(), "mlp.w2": RowwiseParallel(output_layouts=seq)}
        if block.mlp.w3 is not None:
            plan["mlp.w3"] = ColwiseParallel()
        if block.attn.q_norm is not None:
            # Qwen3's per-head q/k norms see this rank's heads: run them as norms over a tensor split
            # on the heads dim (B, H, T, D), their gains replicated, so each gain's gradient is a
            # Partial sum over the ranks' heads that reduce_partial_grads completes.
            plan["attn.q_norm"] = SequenceParallel(sequence_dim=1, use_local_output=True)
            plan["attn.k_norm"] = SequenceParallel(sequence_dim=1, use_local_output=True)
        if sequence_parallel:
            plan.update({
                "attn_norm": SequenceParallel(), "mlp_norm": SequenceParallel(),
                "attn": PrepareModuleInput(input_layouts=(Shard(1), None),
                                           desired_input_layouts=(Replicate(), None)),
                "mlp": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
            })
        parallelize_module(block, tp_mesh, plan)


# --- activation checkpointing and compile -------------------------------------------------------

def apply_ac(model: nn.Module) -> None:
    """Full activation checkpointing per block: recompute each block's activations in backward."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    for name, block in list(model.layers.named_children()):
        model.layers.register_module(name, checkpoint_wrapper(block))


def apply_compile(model: nn.Module) -> None:
    """torch.compile each block separately (repeated structure: one compiled graph reused)."""
    for name, block in list(model.layers.named_children()):
        model.layers.register_module(name, torch.compile(block))


# --- data parallelism -----------------------------------------------------------------------------

def apply_fsdp(model: nn.Module, dp_mesh, dtype: str, reshard_after_forward: bool = True,
               root: bool = True) -> None:
    """FSDP2 (ZeRO-3, Rajbhandari et al. 2020): each block its own unit, then the rest.

    With bf16 the unit all-gathers bf16 parameters but reduce-scatters fp32 gradients into the fp32
    sharded master (MixedPrecisionPolicy). `root=False` (pipeline parts, whose stage views call the
    submodules directly) shards the embedding, final norm and head as units of their own instead.
    """
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    if root:
        _quiet_logits_view_warning()
    mp = MixedPrecisionPolicy()
    if dtype == "bf16":
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    kw = {"mesh": dp_mesh, "mp_policy": mp, "reshard_after_forward": reshard_after_forward}
    for block in model.layers.values():
        fully_shard(block, **kw)
    if root:
        fully_shard(model, **kw)
        return
    for name in ("tok_emb", "pos_emb", "norm", "output"):
        if getattr(model, name, None) is not None:
            fully_shard(getattr(model, name), **kw)


def _quiet_logits_view_warning() -> None:
    """FSDP2 warns, once per rank, when a wrapped module returns a view (pytorch/pytorch#181850, for
    #181832): an in-place op on that view would skip the all-gather. Under TP our root returns the
    logits through the output head's `to_local()`, a view; the loss reads them out of place only
    (`logits.float().flatten(0, 1)`, trainer.py), the safe use PyTorch's own follow-up
    (pytorch/pytorch#197154) says this warning fires on needlessly. Exactly that module's message is
    filtered: a view returned by any other module (a block) still warns."""
    import warnings

    warnings.filterwarnings("ignore", message=r"FSDP2-wrapped module \(FSDPTransformer\) returned a view "
                            r"tensor\.", category=UserWarning)


def apply_ddp(model: nn.Module, dp_mesh) -> nn.Module:
    """DDP (Li et al. 2020): whole-gradient all-reduce in buckets during backward; names unchanged."""
    from torch.distributed._composable import replicate

    return replicate(model, device_mesh=dp_mesh)


# --- the whole transformation ---------------------------------------------------------------------

def parallelize(model: nn.Module, dims: ParallelDims, pcfg, layout: Layout | None = None,
                dtype: str = "fp32") -> nn.Module:
    """Apply tp -> ac -> compile -> fsdp to a meta-device model, in place (DDP comes after init)."""
    if dims.world_size > 1 and layout is None:
        raise UserError(f"parallel layout {dims} needs {dims.world_size} processes: launch with "
                        f"torchrun --nproc-per-node {dims.world_size}")
    if dims.tp > 1:
        apply_tp(model, layout.sub("tp"), pcfg.sequence_parallel)
    if pcfg.activation_checkpointing == "full":
        apply_ac(model)
    elif pcfg.activation_checkpointing != "none":
        raise UserError(f"parallel.activation_checkpointing must be 'none' or 'full', "
                        f"got {pcfg.activation_checkpointing!r}")
    if pcfg.compile:
        apply_compile(model)
    if dims.cp > 1:
        from pretrain.train.context import apply_cp

        apply_cp(model, layout)
    if dims.dp_shard > 1:  # context-parallel ranks shard the weights too (torchtitan's dp_shard_cp)
        hsdp = dims.dp_replicate > 1
        mesh = layout.sub("dp_replicate", "dp_shard") if hsdp else layout.flat("dp_shard", "cp")
        apply_fsdp(model, mesh, dtype, pcfg.reshard_after_forward, root=dims.pp == 1)
    return model



@torch.no_grad()
def average_over_cp(params: list[torch.Tensor], layout: Layout) -> None:
    """Without FSDP, context-parallel ranks hold whole gradients of partial losses (their slice of
    each sequence): average them over the cp group, in one flat all-reduce."""
    from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors
    from torch.distributed.tensor import DTensor

    grads = [p.grad.to_local() if isinstance(p.grad, DTensor) else p.grad
             for p in params if p.grad is not None]
    if not grads:
        return
    flat = _flatten_dense_tensors(grads)
    dist.all_reduce(flat, group=layout.group("cp"))
    flat /= layout.dims.cp
    for g, avg in zip(grads, _unflatten_dense_tensors(flat, grads)):
        g.copy_(avg)


@torch.no_grad()
def reduce_partial_grads(params: list[torch.Tensor]) -> None:
    """Turn Partial DTensor gradients (sequence-parallel norms) into Replicate ones, in place, once:
    clipping and the optimizer then see whole gradients (one all-reduce each, not one per use)."""
    from torch.distributed.tensor import DTensor, Replicate

    for p in params:
        g = p.grad
        if isinstance(g, DTensor) and any(pl.is_partial() for pl in g.placements):
            whole = [Replicate() if pl.is_partial() else pl for pl in g.placements]
            p.grad = g.redistribute(g.device_mesh, whole)


def _set_buffer(model: nn.Module, name: str, value: torch.Tensor) -> None:
    mod_name, _, attr = name.rpartition(".")
    mod = model.get_submodule(mod_name) if mod_name else model
    setattr(mod, attr, value)


def plain_name(name: str) -> str:
    for p in WRAPPER_PREFIXES:
        name = name.replace(p, "")
    return name


# --- pipeline parallelism (GPipe, Huang et al. 2019; 1F1B, Narayanan et al. 2019/2021) -------------

SCHEDULES = {"gpipe": "ScheduleGPipe", "1f1b": "Schedule1F1B", "interleaved1f1b": "ScheduleInterleaved1F1B"}


def stages_per_rank(schedule: str) -> int:
    if schedule not in SCHEDULES:
        raise UserError(f"parallel.pp_schedule must be one of {', '.join(SCHEDULES)}; got {schedule!r}")
    return 2 if schedule == "interleaved1f1b" else 1


def stage_layers(n_layers: int, n_stages: int) -> list[list[int]]:
    """Contiguous layer ranges, as even as possible (earlier stages get the extra layers)."""
    base, extra = divmod(n_layers, n_stages)
    out, start = [], 0
    for s in range(n_stages):
        k = base + (s < extra)
        out.append(list(range(start, start + k)))
        start += k
    return out


def rank_stages(pp_rank: int, pp: int, schedule: str) -> list[int]:
    """Stage indices held by a pipeline rank: looped placement (rank r holds r, r + p, ...)."""
    return [pp_rank + i * pp for i in range(stages_per_rank(schedule))]


class StageView(nn.Module):
    """One pipeline stage: a view on the rank's model part (shared modules, no parameters of its own
    registered twice); the first stage embeds, the last normalizes and projects to logits."""

    def __init__(self, part: nn.Module, layers: list[int], first: bool, last: bool):
        super().__init__()
        self.part_ref = [part]  # a list: not registered as a submodule (parameters stay in `part`)
        self.layer_ids, self.first, self.last = [str(i) for i in layers], first, last
        self.blocks = nn.ModuleList(part.layers[i] for i in self.layer_ids)
        if first:
            self.tok_emb = part.tok_emb
        if last:
            self.norm, self.output = part.norm, part.output

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        part = self.part_ref[0]
        if self.first:
            x = self.tok_emb(x)
        rope = (part.rope_cos, part.rope_sin)
        for block in self.blocks:
            x = block(x, rope)
        if self.last:
            x = self.output(self.norm(x))
        return x


def split_for_pp(model: nn.Module, stages: list[int], n_stages: int) -> None:
    """Drop from the meta model every layer and end piece this rank's stages do not hold (in place;
    kept layers keep their global names, so checkpoints are keyed as in the whole model)."""
    if model.pos_emb is not None:
        raise UserError("parallel.pp > 1 supports rotary positions only (model.learned_pos=false)")
    ranges = stage_layers(model.shape.n_layers, n_stages)
    keep = {str(i) for s in stages for i in ranges[s]}
    for name in list(model.layers.keys()):
        if name not in keep:
            del model.layers[name]
    if 0 not in stages:
        model.tok_emb = None
    if n_stages - 1 not in stages:
        model.norm, model.output = None, None


def build_schedule(part: nn.Module, layout: Layout, pcfg, device: torch.device, n_micro: int, loss_fn):
    """The pipeline stages of this rank over `part` and the schedule that drives them."""
    import torch.distributed.pipelining as pipe

    pp = layout.dims.pp
    n_stages = pp * stages_per_rank(pcfg.pp_schedule)
    ranges = stage_layers(part.shape.n_layers, n_stages)
    group = layout.group("pp")
    stages = [pipe.PipelineStage(StageView(part, ranges[s], s == 0, s == n_stages - 1), s, n_stages, device,
                                 group=group) for s in rank_stages(layout.pp_rank, pp, pcfg.pp_schedule)]
    cls = getattr(pipe, SCHEDULES[pcfg.pp_schedule])
    if stages_per_rank(pcfg.pp_schedule) == 1:
        return cls(stages[0], n_microbatches=n_micro, loss_fn=loss_fn), stages
    return cls(stages, n_microbatches=n_micro, loss_fn=loss_fn), stages
