"""`pretrain eval`: score a run or a Hugging Face model on benchmarks and perplexity sets."""

from __future__ import annotations

import argparse

from pretrain.bounds import Number

HELP = "evaluate a run or a Hugging Face model: acc/acc_norm, exact match, perplexity, bits per byte"

DESCRIPTION = """\
Score a model on evaluation tasks with lm-evaluation-harness's definitions, and print a table.

  pretrain eval runs/tiny --tasks arc_easy,copa,ppl:valid.txt --shots 0 --limit 500
  pretrain eval hf-model/ --tasks mmlu --shots 5
  torchrun --nproc-per-node 4 -m pretrain eval runs/tiny --tasks arc_easy   # examples split over ranks

MODEL is a run directory (newest complete checkpoint; --step picks another) or a folder that
transformers' AutoModelForCausalLM loads (config.json + weights + tokenizer files), read offline.

Tasks: names resolved under --benchmarks (laid out like ../shared/data/benchmarks: llm-foundry's
ICL files, MMLU, GSM8K), any .jsonl in one of those formats, ppl:PATH for a text file or a token
directory, or mem:PATH for the share of random training windows the model reproduces (Carlini et
al. 2022: 32-token prefix, 32 tokens greedily; --limit windows, default 200).
Multiple-choice tasks report acc (highest log-likelihood is the gold choice) and acc_norm
(log-likelihood divided by the choice's length in characters, as the harness); schema tasks acc;
LAMBADA-style tasks acc (greedy continuation) and perplexity; GSM8K and TriviaQA exact match of a
greedy generation; ppl: perplexity and bits per byte (tokenizer-independent).
k-shot prompts draw their examples with --seed, so a rerun builds the same prompts.

Writes one JSON (schema pretrain.eval/1, see docs/evaluation.md): RUN/eval/step_NNNNNNN.json for
a run, FOLDER/eval/results.json for a Hugging Face folder (beside the model it scores, from any
working directory; a folder you cannot write to, or one in the Hugging Face cache, needs --output),
or --output PATH. Per-example log-likelihoods are kept under "examples". The file is rewritten as
each task finishes, and is also what a rerun reads: a task it holds for the same model (the run's
checkpoint, by step and digest; a folder, by its files' digest), the same settings of those it reads
(--shots, --seed, --limit, --ppl-tokens), the same task file bytes and the same code (pretrain's
version) is taken from it, not scored again ("copa: from FILE (same model, same settings); --force
to score again"): the same command again scores nothing, killed after 5 of 6 tasks it scores the
sixth, killed inside a task it continues from its last chunk of 256 examples (FILE.partial.jsonl),
and more tasks add to the file. An edited task file, other settings for a task, or other code
score that task again, as do the trainer's in-loop scores of that step (named with both numbers).
Another model replaces the file, naming the tasks scored again and dropped.
"""


PPL_TOKENS = 200_000  # --ppl-tokens' default


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="run directory or Hugging Face model folder")
    parser.add_argument("--tasks", required=True, action="append",
                        help="comma-separated task names, .jsonl paths or ppl:PATH (repeatable)")
    parser.add_argument("--shots", type=Number(int, hi=1000, why="few-shot examples per prompt (ARC: 25)"),
                        default=0, help="few-shot examples per prompt (default 0)")
    parser.add_argument("--seed", type=Number(int, hi=2**63 - 1, why="a seed: a 64-bit integer"),
                        default=1234, help="seed of the few-shot draw (default 1234)")
    parser.add_argument("--limit", type=Number(int, why="examples per task; 0 = all"),
                        default=None,
                        help="first N examples of each task (default 0 = all; mem: windows, default 200)")
    parser.add_argument("--benchmarks", default=None,
                        help="benchmarks folder (default: the first that exists of $PRETRAIN_BENCHMARKS, "
                        "$PRETRAIN_SHARED_DATA/benchmarks, ../shared/data/benchmarks)")
    parser.add_argument("-o", "--output", default=None,
                        help="result JSON (default RUN/eval/step_N.json; for a Hugging Face folder: "
                        "FOLDER/eval/results.json)")
    parser.add_argument("--checkpoints", default=None, metavar="DIR_OR_URL",
                        help="read the run's checkpoints here (a folder or s3://...): needed when the run's "
                             "config.toml puts checkpoint.storage outside the run directory")
    parser.add_argument("--step", type=Number(int, hi=2**63 - 1, why="a checkpoint's step"),
                        default=None, help="run checkpoint step (default: newest)")
    parser.add_argument("--tokenizer", default="", help="tokenizer.json (default: the run's own)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                        help="cpu or cuda (default cpu; under torchrun cuda is each rank's LOCAL_RANK GPU)")
    parser.add_argument("--batch-tokens", type=Number(int, lo=1, why="tokens per forward pass"), default=4096,
                        help="tokens per forward pass (padded batch width x rows; default 4096)")
    parser.add_argument("--ppl-tokens", type=Number(int, lo=1, why="tokens scored per text"),
                        default=PPL_TOKENS, help="ppl: tasks read at most this many tokens (default 200000)")
    parser.add_argument("--force", action="store_true",
                        help="score every task again, even those the result file holds for this model and "
                             "these settings, and a task cut short from its first example")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--threads", type=Number(int, lo=1, hi=1024, why="torch's CPU threads"), default=None,
                        help="CPU threads (default: the run's train.threads; for a Hugging Face folder 1 "
                             "when its model is small, else torch's default; see docs/evaluation.md)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from pretrain.errors import UserError
    from pretrain.eval.lm import load_model, use_threads
    from pretrain.eval.report import table
    from pretrain.eval.suite import benchmarks_dir, rank_world, run_tasks, split_specs
    from pretrain.eval.tasks import check_spec
    from pretrain.train.parallel import end_distributed

    specs = split_specs(args.tasks)
    for spec in specs:  # before the model loads: a typo costs a second, not a model load
        check_spec(spec, benchmarks_dir(args.benchmarks), args.shots)
    if args.shots < 0:
        raise UserError(f"--shots must be >= 0, got {args.shots}")
    # said before the model loads: a negative --ppl-tokens cut texts short through Python's slicing,
    # a negative --limit printed a task with no example and exit 0
    for flag, value, least in (("--limit", args.limit, 0), ("--batch-tokens", args.batch_tokens, 1),
                               ("--ppl-tokens", args.ppl_tokens, 1), ("--step", args.step, 0)):
        if value is not None and value < least:
            raise UserError(f"{flag} must be >= {least}, got {value}")
    if args.output and Path(args.output).is_dir():  # said before the model loads, not after scoring
        raise UserError(f"--output {args.output}: a folder; give the result file's path "
                        f"(e.g. {Path(args.output) / 'eval.json'})")
    # where the results go, checked before the model loads: a teammate's read-only run folder failed
    # at the first task's write, after that task's scoring
    if not args.output and Path(args.model).resolve().parent.name == "snapshots":
        raise UserError(f"{args.model}: a model in the Hugging Face cache (.../snapshots/REVISION), kept as "
                        "it was downloaded: -o PATH says where its results go")
    _check_writable(Path(args.output) if args.output else _default_folder(args.model) / "x.json",
                    flag="--output" if args.output else "", model=args.model)
    if not (Path(args.model) / "config.toml").is_file() and (Path(args.model) / "config.json").is_file():
        for flag, value in (("--step", args.step), ("--tokenizer", args.tokenizer),
                            ("--checkpoints", args.checkpoints)):
            if value not in (None, ""):  # a folder has one model and its own tokenizer: ignored otherwise
                raise UserError(f"{flag} picks a run's checkpoint or tokenizer; {args.model} is a "
                                "Hugging Face folder, scored with its own")
    _check_task_options(args, specs)
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():  # torch's own error is a traceback after the imports
            raise UserError(f"--device cuda: no CUDA device is available (torch {torch.__version__}); "
                            "use --device cpu")
    use_threads(args.model, args.threads)
    _init_distributed(args.device)
    try:
        rank, world = rank_world()
        recorded = _all_recorded(args, specs, world) if rank == 0 else None
        if _broadcast(["all"] if recorded else []):  # the same command again: nothing to score
            end_distributed()
            return _show_recorded(*recorded) if rank == 0 else 0
        model, step = load_model(args.model, args.step, args.tokenizer, _device(args.device),
                                 args.checkpoints)
        out, writer = _result_file(args, step, world, specs) if rank == 0 else (None, None)
        skip = _broadcast(sorted(writer.done) if writer else [])
        results, seconds = run_tasks(model, specs, benchmarks_dir(args.benchmarks), args.shots, args.seed,
                                     args.limit, args.batch_tokens, args.ppl_tokens, progress=not args.quiet,
                                     skip=set(skip), on_result=writer.add if writer else None,
                                     partial=writer.partial if writer else None, force=args.force)
    except BaseException:
        end_distributed(barrier=False)  # a rank that failed cannot wait for the others
        raise
    end_distributed()
    if rank != 0:
        return 0
    doc = writer.finish()
    if not results:  # every task was in the file (a folder saved again with the same bytes: loaded to know)
        return _show_recorded(out, doc, writer.done)
    print(table(doc))
    if writer.taken:  # the table is what gets pasted elsewhere: it says which rows were not measured now
        names = ", ".join(r["task"] for s, r in writer.done.items() if s in writer.taken)
        print(f"not scored by this command: {names}, as recorded in {out} (--force measures them)")
    took = f"{seconds:.1f} s"
    if len(doc["results"]) > len(results):  # tasks kept from earlier runs: the file's total too
        took += (f"; its {len(doc['results'])} tasks took {doc['seconds']:.1f} s in all, "
                 "earlier runs' included")
    print(f"wrote {out} ({took})")
    return 0


def _show_recorded(out, doc: dict, taken: dict) -> int:
    """The table of a file that already held every task asked for (nothing loaded, nothing written)."""
    from pretrain.eval.report import table

    print(table(doc))
    took = sum(r.get("seconds", 0.0) for r in taken.values() if isinstance(r.get("seconds"), (int, float)))
    print(f"nothing scored: {out} holds all {len(taken)} task{'s' * (len(taken) > 1)} "
          f"(scored in {took:.1f} s by earlier runs)")
    return 0


def _check_task_options(args: argparse.Namespace, specs: list[str]) -> None:
    """--shots, --limit and --ppl-tokens given where no task reads them (`--tasks ppl:valid.txt --shots 5`
    printed "shots 0" and exit 0): refused before the model loads."""
    from pretrain.errors import UserError

    ppl = [s for s in specs if s.startswith(("ppl:", "mem:"))]
    prompted = [s for s in specs if not s.startswith(("ppl:", "mem:"))]
    if args.shots and not prompted:
        raise UserError(f"--shots {args.shots}: few-shot examples go before benchmark questions, and "
                        f"{', '.join(specs)} has none (ppl: and mem: score text as it is)")
    if args.limit and all(s.startswith("ppl:") for s in specs):  # a ppl: text is scored whole
        raise UserError(f"--limit {args.limit} takes the first examples of a benchmark (mem: windows); "
                        f"{', '.join(specs)} is read whole, up to --ppl-tokens")
    if args.ppl_tokens != PPL_TOKENS and not ppl:
        raise UserError(f"--ppl-tokens {args.ppl_tokens} bounds ppl:PATH and mem:PATH tasks, and "
                        f"{', '.join(specs)} has none")


def _default_folder(model: str):
    """The folder the result file goes to without --output: MODEL/eval/, a run's or a Hugging Face
    folder's. Until session 11 a folder's went to ./eval/NAME.json: two folders of one name (two
    exports called `hf`) replaced each other's results, and the file moved with the working directory."""
    from pathlib import Path

    return Path(model) / "eval"


def _earlier_default(model: str, out) -> None:
    """Say where a folder's results went before session 11 (./eval/NAME.json) when such a file holds
    this folder's and the new place holds none: a rerun would otherwise score everything again."""
    import sys
    from pathlib import Path

    from pretrain.eval.report import read_previous

    old = Path("eval") / f"{Path(model).name}.json"
    doc = read_previous(old) if not out.exists() else None
    model_info = doc.get("model") if isinstance(doc, dict) else None
    path = model_info.get("path") if isinstance(model_info, dict) else None
    if path == str(Path(model).resolve()):
        print(f"{old} holds earlier results of {model} (the default place before session 11); "
              f"this run writes {out}; -o {old} adds to that file instead", file=sys.stderr)


def _check_writable(out, flag: str = "--output", model: str = "") -> None:
    """The result's folder can be made and written: said before the model loads, not after a task."""
    import os
    from pathlib import Path

    from pretrain.errors import UserError

    here = out.parent
    while not here.exists() and here != here.parent:
        here = here.parent
    if here.is_dir() and os.access(here, os.W_OK | os.X_OK):
        return
    if flag:
        raise UserError(f"{flag} {out}: cannot write there ({here} is not a writable folder)")
    raise UserError(f"cannot write the results into {out.parent}/ ({here} is not a writable folder); "
                    f"-o PATH writes them elsewhere (e.g. -o {Path(model).name or 'model'}-eval.json)")


def _out_path(args: argparse.Namespace, step: int | None, say: bool):
    """The result file: --output, RUN/eval/step_N.json, or FOLDER/eval/results.json (said)."""
    import sys
    from pathlib import Path

    if args.output:
        return Path(args.output)
    if step is not None:
        return Path(args.model) / "eval" / f"step_{step:07d}.json"
    out = Path(args.model) / "eval" / "results.json"
    if say:  # beside the model, said now: the path no longer follows the working directory
        _earlier_default(args.model, out)
        print(f"results go to {out}", file=sys.stderr)
    return out


def _identity(args: argparse.Namespace, step: int | None, world: int, specs: list[str], old, read: bool):
    """({"model", "settings"} of this evaluation, {spec: input digest}); None when the model's
    identity is not known without reading its weights (`read=False`)."""
    from pretrain.eval.identity import model_identity, same_model, settings_of, task_inputs
    from pretrain.eval.suite import benchmarks_dir

    info = model_identity(args.model, step, args.tokenizer, args.checkpoints,
                          (old or {}).get("model"), read=read)
    if info is None:
        return None
    # ppl_tokens cuts ppl: and mem: texts, so it changes their numbers: part of the merge rule
    settings = {"shots": args.shots, "seed": args.seed, "limit": args.limit or None,
                "ppl_tokens": args.ppl_tokens, "world_size": world}
    if old and same_model(old.get("model"), info):  # what no task of this command reads stays the file's
        settings = settings_of(specs, settings, old.get("settings"))
    return {"model": info, "settings": settings}, task_inputs(specs, benchmarks_dir(args.benchmarks))


def _all_recorded(args: argparse.Namespace, specs: list[str], world: int):
    """(path, file, taken) when the result file already answers every task for this model and
    these settings, found without loading the model (a run: its checkpoint's marker; a folder: the
    digest the file recorded for the same name, size, time and inode of its files); else None."""
    import sys
    from pathlib import Path

    from pretrain.eval.identity import run_checkpoint
    from pretrain.eval.report import read_previous
    from pretrain.eval.resume import plan, plan_lines

    if args.force:
        return None
    found = None
    if (Path(args.model) / "config.toml").is_file():
        if (found := run_checkpoint(args.model, args.step, args.checkpoints)) is None:
            return None  # the load says why
    out = _out_path(args, found[0] if found else None, say=False)
    old = read_previous(out)
    me = _identity(args, found[0] if found else None, world, specs, old, read=False) if old else None
    p = plan(old, me[0], specs, me[1], False) if me else None
    if p is None or len(p.taken) != len(specs):
        return None
    if found and args.step is None:
        from pretrain.train.runs import _say_damaged

        _say_damaged(found[2], found[0])  # a newer damaged checkpoint passed over, as the load says it
    _out_path(args, found[0] if found else None, say=True)
    for line in plan_lines(p, specs, out):
        print(line, file=sys.stderr)
    return out, old, p.taken


def _result_file(args: argparse.Namespace, step: int | None, world: int, specs: list[str]):
    """(the result path, rank 0's writer): takes what the file holds for this model and settings."""
    import sys

    from pretrain.eval.report import read_previous
    from pretrain.eval.resume import ResultFile, plan, plan_lines

    out = _out_path(args, step, say=True)
    old = read_previous(out)
    me, inputs = _identity(args, step, world, specs, old, read=True)
    p = plan(old, me, specs, inputs, args.force)
    for line in plan_lines(p, specs, out):
        print(line, file=sys.stderr)
    return out, ResultFile(out, me["model"], me["settings"], specs, old, p.taken, inputs)


def _broadcast(specs: list[str]) -> list[str]:
    """Rank 0's list of tasks to skip, on every rank (only rank 0 reads the result file)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return specs
    box = [specs]
    dist.broadcast_object_list(box, src=0)  # our own ranks' strings, not a file from elsewhere
    return box[0]


def _device(name: str) -> str:
    import os

    if name == "cuda":
        return f"cuda:{os.environ.get('LOCAL_RANK', '0')}"
    return name


def _init_distributed(device: str) -> None:
    """Join torchrun's process group when there is one (gloo on CPU, NCCL on GPU)."""
    import torch

    from pretrain.train.parallel import init_distributed

    init_distributed(torch.device("cuda" if device.startswith("cuda") else "cpu"), 600.0)
