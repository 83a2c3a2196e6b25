"""Downstream evaluation during training (OLMo's in-loop evaluators): `log.eval_tasks` every N steps.

The trainer calls `eval_tasks_event(trainer)` every `log.eval_tasks_every` steps (default: the
held-out loss's `log.eval_every`). It scores the tasks on the live model (eval mode, the run's
autocast dtype), its examples split over data-parallel ranks, and returns the fields of one
`eval_tasks` event for RUN/metrics.jsonl, one number per task and headline metric:
    {"event": "eval_tasks", "step": N, "copa/acc": 0.6, "copa/acc_norm": 0.55, "ppl:v.txt/bits_per_byte": 2.1}
TensorBoard gets `eval/TASK/METRIC` scalars; rank 0 also writes the full result with per-example
scores as RUN/eval/step_NNNNNNN.json (the schema of `pretrain eval`).

Layouts: one process, or data parallel with whole replicas (DDP). Sharded or split models (FSDP,
TP, PP) would need every rank in every forward pass; they are refused when the config is checked.
"""

from __future__ import annotations

from pretrain.errors import UserError

PPL_TOKENS = 200_000  # `pretrain eval --ppl-tokens`'s default: the same numbers from either
HEADLINE = ("acc", "acc_norm", "exact_match", "perplexity", "bits_per_byte", "memorized")


def check_layout(cfg, dims) -> None:
    """Refuse in-loop task evaluation on layouts whose forward pass is collective."""
    if not cfg.log.eval_tasks:
        return
    if dims.dp_shard > 1 or dims.tp > 1 or dims.pp > 1 or dims.cp > 1:
        raise UserError("log.eval_tasks needs whole model replicas (one process or dp_replicate only); "
                        "evaluate a checkpoint with `pretrain eval RUN` instead")


def check_tasks(cfg) -> None:
    """Each task of log.eval_tasks can run (a known name under its benchmarks folder, an existing
    file): said when the run starts, not at the first evaluation step, hours in, with no checkpoint."""
    if not cfg.log.eval_tasks:
        return
    from pretrain.eval.suite import benchmarks_dir, split_specs
    from pretrain.eval.tasks import check_spec

    bench = benchmarks_dir(cfg.log.eval_benchmarks or None)
    for spec in split_specs(cfg.log.eval_tasks):
        try:
            check_spec(spec, bench, cfg.log.eval_tasks_shots)
        except UserError as e:
            raise UserError(f"log.eval_tasks: {e}") from None


def eval_model(trainer):
    """An EvalModel over the trainer's live model and the run's tokenizer (bytes when it has none)."""
    from pretrain.eval.lm import _tokenizer_functions, from_module

    cfg = trainer.cfg
    net = getattr(trainer.model, "module", trainer.model)  # DDP: its replica, no broadcast in forward
    tok = cfg.data.tokenizer
    if cfg.data.kind == "tokens" and not tok:
        from pretrain.commands.sample import _tokenizer_of_shards

        tok = _tokenizer_of_shards(cfg.data.sources)
    encode, decode, eot = _tokenizer_functions(tok)
    name = f"{trainer.run_dir.name}@{trainer.step}"
    return from_module(net, encode, decode, trainer.shape.seq_len, eot, name,
                       autocast_dtype=cfg.precision.dtype)


def eval_tasks_event(trainer) -> dict:
    """Score log.eval_tasks now; the event's fields (and RUN/eval/step_N.json on rank 0)."""
    from pretrain.eval.identity import code_version
    from pretrain.eval.report import assemble, write_json
    from pretrain.eval.suite import benchmarks_dir, rank_world, run_tasks, split_specs

    log = trainer.cfg.log
    was_training = trainer.model.training
    trainer.model.eval()
    try:
        results, seconds = run_tasks(eval_model(trainer), split_specs(log.eval_tasks),
                                     benchmarks_dir(log.eval_benchmarks or None), log.eval_tasks_shots,
                                     1234, log.eval_tasks_limit or None, ppl_tokens=PPL_TOKENS)
    finally:
        trainer.model.train(was_training)
    fields = {f"{r['task']}/{k}": v for r in results for k, v in r["metrics"].items() if k in HEADLINE}
    if trainer.rank == 0:
        # the identity `pretrain eval RUN` records (absolute path; limit 0 = all = None), so the final
        # `pretrain eval` of the same step and settings adds to this file instead of replacing it
        info = {"path": str(trainer.run_dir.resolve()), "kind": "run", "step": trainer.step}
        settings = {"shots": log.eval_tasks_shots, "seed": 1234, "limit": log.eval_tasks_limit or None,
                    "ppl_tokens": PPL_TOKENS, "world_size": rank_world()[1]}
        # each task says it was scored in the loop (the live model under the run's autocast), so a
        # later `pretrain eval` of this step (the checkpoint in fp32) names what it replaces
        marked = [{**r, "in_loop": {"precision": trainer.cfg.precision.dtype}, "code": code_version()}
                  for r in results]
        write_json(assemble(info, settings, marked, seconds),
                   trainer.run_dir / "eval" / f"step_{trainer.step:07d}.json")
    return fields
