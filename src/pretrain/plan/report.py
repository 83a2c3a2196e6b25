"""The whole plan as one dict: model, cluster, budget, chosen layout, memory, time, communication,
pipeline bubble, reliability and the search's ranking with its explanation. `pretrain plan` prints
this dict as a table or as JSON, so both show the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from pretrain.errors import UserError
from pretrain.plan import bestcase, compute, memory, parallel, reliability
from pretrain.plan.layout import Layout, data_parallel, problems
from pretrain.plan.search import Estimate, Job, SearchResult, evaluate, explain, headroom_note, search

# Llama 3 (Dubey et al. 2024, sec. 3.3.4): 419 unexpected interruptions in 54 days on 16,384 GPUs,
# one every 11,135 s, i.e. about 50,700 hours per GPU.
DEFAULT_MTBF_GPU_HOURS = 50_000.0


@dataclass(frozen=True)
class Budget:
    tokens: float
    mtbf_gpu_hours: float = DEFAULT_MTBF_GPU_HOURS
    checkpoint_s: float = 60.0
    restart_s: float = 0.0


LAYOUT_KEYS = ("tp", "pp", "cp", "dp", "dp_shard", "dp_replicate", "zero", "mbs", "recompute", "sp", "v")


def parse_layout(text: str, n_gpus: int) -> Layout:
    """'tp=2,pp=4,zero=1,mbs=1,recompute=selective,sp=1,v=2' -> Layout. dp (the data-parallel ranks,
    sharded when zero > 0) defaults to the GPUs left; dp_shard and dp_replicate set an HSDP split."""
    kwargs: dict = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, _, value = part.partition("=")
        key = key.strip()
        if key not in LAYOUT_KEYS or not value:
            raise UserError(f"--layout: cannot read {part!r}; keys: {', '.join(LAYOUT_KEYS)}")
        if key in kwargs:  # "tp=2,tp=4" planned tp=4 without a word
            raise UserError(f"--layout: {key} is given twice")
        if key == "recompute":
            kwargs[key] = value
        elif key == "sp":
            if value.lower() not in ("0", "1", "true", "false", "yes", "no", "on", "off"):
                raise UserError(f"--layout: sp wants 0 or 1, got {value!r}")
            kwargs[key] = value.lower() in ("1", "true", "yes", "on")
        else:
            try:
                kwargs[key] = int(value)
            except ValueError:
                raise UserError(f"--layout: {key} wants an integer, got {value!r}") from None
    for key in ("tp", "pp", "cp", "dp", "dp_shard", "dp_replicate", "mbs", "v"):
        if kwargs.get(key, 1) < 1:
            raise UserError(f"--layout: {key} must be >= 1, got {kwargs[key]}")
    model = kwargs.get("tp", 1) * kwargs.get("pp", 1) * kwargs.get("cp", 1)
    if "dp_shard" in kwargs or "dp_replicate" in kwargs:
        if "dp" in kwargs:
            raise UserError("--layout: give dp, or dp_shard and dp_replicate, not both")
        kwargs.setdefault("zero", 3 if kwargs.get("dp_shard", 1) > 1 else 0)
        return Layout(**kwargs)
    dp = kwargs.pop("dp", n_gpus // model if n_gpus % model == 0 else 0)
    if dp < 1:
        raise UserError(f"--layout: tp x pp x cp = {model} does not divide --gpus {n_gpus}")
    return data_parallel(dp, kwargs.pop("zero", 1), **kwargs)


def check_layout(job: Job, lay: Layout) -> None:
    """Stop with one line naming every broken rule, before any search runs."""
    shape = job.shape
    broken = problems(lay, world_size=job.n_gpus, n_layers=shape.n_layers, n_heads=shape.n_heads,
                      n_kv_heads=shape.n_kv_heads, seq_len=shape.seq_len, batch_seqs=job.batch_seqs)
    if broken:
        raise UserError(f"--layout {lay.label()}: " + "; ".join(broken))


def _reliability(job: Job, budget: Budget, days: float) -> dict:
    m = reliability.cluster_mtbf(budget.mtbf_gpu_hours * 3600, job.n_gpus)
    c = budget.checkpoint_s
    young = reliability.young_interval(c, m)
    waste = reliability.waste_fraction(young, c, m, budget.restart_s)
    return {"mtbf_gpu_hours": budget.mtbf_gpu_hours, "cluster_mtbf_s": m,
            "expected_failures": reliability.expected_failures(days * 86400, m), "checkpoint_s": c,
            "young_interval_s": young, "daly_interval_s": reliability.daly_interval(c, m),
            "waste_fraction": waste, "goodput": max(0.0, 1 - waste)}


def _state_table(job: Job) -> dict:
    n, g = job.shape.params(), job.n_gpus
    return {
        "training_state_gb": {a: memory.training_state_bytes(n, a, g) / 1e9 for a in memory.ACCOUNTING},
        "inference_weights_gb": memory.inference_weight_bytes(n) / 1e9,
        "zero_per_gpu_gb": {f"stage{z}": memory.zero_memory_per_gpu(n, z, g) / 1e9 for z in range(4)},
    }


def build_plan(job: Job, budget: Budget, layout: Layout | None = None, top: int = 5) -> dict:
    """Search (and evaluate `layout` if given); return every number the CLI shows."""
    result = search(job)
    chosen: Estimate | None = evaluate(job, layout) if layout else result.best
    shape, gpu = job.shape, job.gpu
    fpt = compute.flops_per_token(shape)
    plan: dict = {
        "model": {"name": shape.name, "params": shape.params(),
                  "non_embedding_params": shape.non_embedding_params(),
                  "n_layers": shape.n_layers, "d_model": shape.d_model, "n_heads": shape.n_heads,
                  "n_kv_heads": shape.n_kv_heads, "d_ff": shape.d_ff, "vocab_size": shape.vocab_size,
                  "seq_len": shape.seq_len, "flops_per_token": fpt,
                  "flops_per_token_6n": compute.flops_per_token(shape, attention=False)},
        "cluster": {"gpu": gpu.name, "n_gpus": job.n_gpus, "nodes": -(-job.n_gpus // gpu.gpus_per_node),
                    "peak_tflops_per_gpu": gpu.bf16_tflops, "memory_gb_per_gpu": gpu.memory_gb,
                    "usable_gb_per_gpu": job.usable_bytes / 1e9, "headroom": job.headroom,
                    "efficiency": job.gpu.gemm_efficiency},
        "budget": {"tokens": budget.tokens, "batch_tokens": job.batch_seqs * shape.seq_len,
                   "chinchilla_tokens": compute.chinchilla_tokens(shape.params()),
                   "training_flops_6nd": compute.training_flops(shape.params(), budget.tokens),
                   "training_flops": fpt * budget.tokens},
        "memory_single_replica": _state_table(job),
        "software": _software(job, chosen, layout),
        "layout": chosen.as_dict() if chosen else None,
        "search": _search_summary(result, top, chosen),
    }
    if chosen is not None and chosen.fits:
        plan.update(_timing(job, budget, chosen, fpt))
        _published_check(plan, job, chosen)
    elif chosen is not None and job.refused_by_headroom(chosen.memory):
        plan["layout"]["headroom_note"] = headroom_note(job)
    plan = {"schema": SCHEMA, "headline": _headline(plan), **plan}
    note = bestcase.first_line(plan)  # the terminal's first line; the report's plan section says it too
    if note:
        plan["headline"]["published_note"] = note
    return plan


SCHEMA = "pretrain.plan/2"  # docs/planner.md describes every key


def _software(job: Job, chosen: Estimate | None, given: Layout | None = None) -> dict:
    """What the training code is assumed to run; with fused kernels (the default), also what this
    project's trainer, which saves ~1.9x those activations on a Llama block, would need, whether it
    runs the chosen layout at all, and if not the layout `--emit-recipe` writes instead."""
    sw = job.software
    out: dict = {"activations": job.activations, "kernels": "eager" if sw.eager else "fused",
                 "selective": job.selective, "reduce_dtype": "fp32" if sw.grad_bytes == 4 else "bf16",
                 "accounting": job.accounting, "flash_attention": job.flash,
                 "attention_kernel": job.attention, "dropout_masks": job.dropout}
    if job.activations != "pretrain" and chosen is not None:
        ours = evaluate(job.as_trained(trainer=False), chosen.layout)
        if ours.memory is not None:
            refuses = _trainer_refuses(job, chosen.layout)
            out["pretrain_trainer_gb"] = ours.memory.total / 1e9
            out["pretrain_trainer_fits"] = ours.fits and not refuses
            out["pretrain_trainer_refuses"] = refuses
            if refuses:
                out["pretrain_trainer_nearest"] = _trainer_nearest(job, given)
    elif chosen is not None and not job.trainer:  # planned with our saved tensors: may it run?
        refuses = _trainer_refuses(job, chosen.layout)
        out["pretrain_trainer_refuses"] = refuses
        if refuses:
            out["pretrain_trainer_nearest"] = _trainer_nearest(job, given)
    return out


def _trainer_refuses(job: Job, lay: Layout) -> list[str]:
    """The trainer's rules (plan/layout.py, trainer=True) this layout breaks, [] when it runs it."""
    from pretrain.plan.search import _trainer_kwargs

    shape = job.shape
    return problems(lay, n_layers=shape.n_layers, n_heads=shape.n_heads, n_kv_heads=shape.n_kv_heads,
                    seq_len=shape.seq_len, batch_seqs=job.batch_seqs, **_trainer_kwargs(shape))


def _trainer_nearest(job: Job, given: Layout | None) -> dict | None:
    """What `pretrain plan ... --emit-recipe` writes (commands/plan.py `_emit`): a given --layout
    mapped to the trainer's nearest one, else the best layout of a search with the trainer's rules,
    both planned with its saved tensors. None when it writes nothing."""

    from pretrain.plan import recipe

    ours = job.as_trained()
    if given is not None:
        mapped, _ = recipe.trainer_layout(given)
        if _trainer_refuses(job, mapped):
            return None
        est = evaluate(ours, mapped)
    else:
        est = search(ours).best
    if est is None or not est.fits:
        return None
    return {"label": est.layout.label(), "gb": est.memory.total / 1e9}


def _headline(plan: dict) -> dict:
    """The four numbers a report shows first (None when no layout fits)."""
    lay, t = plan.get("layout"), plan.get("time")
    fits = bool(lay and lay["fits"] and t)
    return {"fits": fits, "layout": lay["label"] if lay else None,
            "days": t["calendar_days"] if fits else None, "gpu_hours": t["gpu_hours"] if fits else None,
            "mfu": t["mfu"] if fits else None, "tokens_per_s": t["tokens_per_s"] if fits else None,
            "gpus": plan["cluster"]["n_gpus"], "gpu": plan["cluster"]["gpu"]}


def _timing(job: Job, budget: Budget, est: Estimate, fpt: float) -> dict:
    lay, shape = est.layout, job.shape
    run_s = budget.tokens / est.tokens_per_s
    rel = _reliability(job, budget, run_s / 86400)
    days = run_s / max(rel["goodput"], 1e-9) / 86400
    stage = memory.stage_params(shape, lay.tp, lay.pp, lay.v)
    return {
        "time": {"step_s": est.step_s, "tokens_per_s": est.tokens_per_s, "mfu": est.mfu, "hfu": est.hfu,
                 "hfu_causal": est.hfu_causal, "flops_convention": flops_convention(est, job.flash),
                 "steps": budget.tokens / (job.batch_seqs * shape.seq_len), "compute_days": run_s / 86400,
                 "calendar_days": days, "gpu_hours": days * 24 * job.n_gpus},
        "communication_gb_per_step": {
            "dp": parallel.dp_bytes_per_step(stage, lay.dp, lay.zero) / 1e9 if lay.dp > 1 else 0.0,
            "tp": parallel.tp_bytes_per_layer(shape.seq_len, lay.mbs, shape.d_model, lay.tp)
            * memory.layers_per_gpu(shape.n_layers, lay.pp, lay.v) * est.m / 1e9,
            "pp": parallel.pp_bytes_per_microbatch(shape.seq_len, lay.mbs, shape.d_model, lay.tp, lay.sp)
            * est.m / 1e9 if lay.pp > 1 else 0.0},
        "bubble": {"wall": parallel.pipeline_bubble(lay.pp, est.m, lay.v, "wall"),
                   "ideal": parallel.pipeline_bubble(lay.pp, est.m, lay.v, "ideal")},
        "reliability": rel,
    }


def _published_check(plan: dict, job: Job, est: Estimate) -> None:
    """For a model up to 14B: what published runs on this GPU measured, with this layout's recompute
    policy, and how far the time model misses them (plan/bestcase.py)."""
    if job.shape.params() > bestcase.SMALL:
        return
    check = bestcase.check(job.gpu, est.layout.recompute != "none")
    if check is not None:
        plan["time"]["published_check"] = check.sentence(est.mfu)
        plan["published"] = check.as_dict()


def flops_convention(est: Estimate, flash: bool) -> str:
    """Which FLOPs each utilization counts; why a figure is above 100% when one is."""
    text = ("mfu and hfu count attention as 12·L·h·s FLOPs per token, no causal halving (PaLM, "
            "Chowdhery et al. 2022, app. B; hfu adds the recomputed forward); hfu causal counts "
            + ("what the causal flash kernel executes, half the attention, as the step time does"
               if flash else "what runs (explicit attention computes the masked scores too: the same FLOPs)"))
    if max(est.mfu, est.hfu) > 1:
        text += (f". Above 100% because the counted attention FLOPs are twice those executed: "
                 f"{est.hfu_causal:.1%} of peak is what runs")
    return text


def _search_summary(result: SearchResult, top: int, chosen: Estimate | None) -> dict:
    why = explain(result, chosen if chosen is not None and chosen.fits else None)
    return {"evaluated": result.evaluated, "feasible": len(result.ranked), "rejected": result.rejected,
            "top": [e.as_dict() for e in result.ranked[:top]], "explanation": why}
