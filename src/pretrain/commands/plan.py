"""`pretrain plan`: memory, compute, layout, time and failures for a training run, before renting GPUs."""

from __future__ import annotations

import argparse

from pretrain.bounds import Number

HELP = "plan a run: memory per GPU, best TP/PP/DP/ZeRO layout, FLOPs, time, failures"
DESCRIPTION = """\
Plan a training run with arithmetic alone (no GPU, no torch): does it fit, how to split it, how
long it takes, what failures cost.

What it computes (formulas and sources in docs/planner.md):
  training state   bytes per parameter: 16 (bf16 weights 2 + bf16 grads 2 + fp32 master 4 + Adam 8),
                   18 (fp32 grads), 20 (+ fp32 accumulation buffer), or Megatron's distributed
                   optimizer 6 + 12/DP. A 7B model needs 112 GB at 16 B: more than one 80 GB GPU.
  ZeRO / FSDP      stage 1 shards the optimizer state over the data-parallel GPUs, stage 2 also
                   the gradients, stage 3 (= FSDP) also the weights.
  activations      what the backward pass needs, tensor by tensor for the blocks we train (RMSNorm,
                   SwiGLU, GQA, flash attention): shrunk by tensor parallelism (TP, split each
                   matmul inside a node), sequence parallelism (SP), context parallelism (CP,
                   split the sequence over GPUs), selective and full recompute. The default
                   counts fused kernels (Megatron-Core/TE); this project's trainer saves ~1.9x
                   that on a Llama block: plan a `pretrain train` run with --activations pretrain
                   (the table prints what it would need).
  pipeline (PP)    layers split into stages; the batch into m micro-batches. The bubble is the idle
                   share of the step: (p-1)/(m+p-1) of wall time, (p-1)/(v*m) of ideal time with v
                   interleaved chunks per GPU (the Megatron papers' convention).
  compute          FLOPs per token 6N + 12*L*h*s (PaLM); total 6*N*D; MFU = achieved model FLOP/s
                   over peak; HFU also counts recomputation; Chinchilla ~20 tokens per parameter.
  step time        built from parts, each printed: GEMMs by shape, attention, element-wise
                   traffic, recompute, collectives as latency + bytes/(bandwidth x efficiency)
                   inside and across nodes, what overlaps with what, pipeline bubble and p2p,
                   optimizer. Every constant is in the GPU table with its source; held against
                   published runs: median 6% on the 26 it was built beside (Megatron-LM,
                   Korthikanti, Llama 3, torchtitan), 15% on 218 held out (llm-foundry, MT-NLG,
                   more torchtitan).
  software         what the training code runs, which moves the step time as much as the chip:
                   --kernels eager (PyTorch without fusion or torch.compile: norms, rotary, SwiGLU
                   as separate memory-bound passes, 4-5x the bytes of fused kernels), --selective op
                   (torchtitan's selective checkpointing: every second matmul and all element-wise
                   ops re-run; default: attention only, as Megatron), --reduce-dtype fp32 (FSDP2 as
                   torchtitan configures it), --attention flash1 (FlashAttention-1 or its Triton
                   port: half FlashAttention-2's speed). A torchtitan run without compile:
                   --activations torchtitan --kernels eager --selective op --reduce-dtype fp32
                   (torchtitan saves bf16 activations, no autocast: 24h + 8f per token and layer).
  failures         cluster MTBF = per-GPU MTBF / GPUs; checkpoint every sqrt(2*C*M) (Young), or
                   Daly's refinement; waste = C/T + T/(2M); goodput = 1 - waste.
  search           every TP x CP x PP x DP x ZeRO x micro-batch x recompute x SP (x interleave):
                   drops what breaks a rule (named) or does not fit in 90% of HBM, ranks the rest
                   by predicted tokens/s, and explains the winner by changing one knob at a time.
  recipe           --emit-recipe FILE writes a pretrain train config, its layout planned with
                   --activations pretrain (this trainer's saved tensors) whatever the table used
                   (and 16 bytes a parameter for --accounting megatron-distopt: this trainer has
                   no distributed optimizer); nothing is written when none fits (exit 1). With
                   --model DIR (a Hugging Face folder) it continues that checkpoint
                   (model.init_from); with --model RUN it trains a new model of the run's shape
                   (--set model.init_from=RUN at train time continues the run).
  calibrate        --calibrate RUN... fits the GPU's efficiencies to the tokens/s your own runs
                   measured (their metrics.jsonl); --save-hardware keeps them for the next plan.

Examples:
  pretrain plan --model llama-3-8b --gpus 64 --gpu h100 --tokens 1T
  pretrain plan --params 7B --gpus 8 --gpu a100-80gb --tokens 140B --json
  pretrain plan --model llama-3-405b --gpus 16384 --gpu h100 --tokens 15.6T --batch-tokens 16M \\
      --layout tp=8,pp=16,zero=2,mbs=1,recompute=none,sp=1
  pretrain plan --model llama-3-8b --gpus 64 --gpu a100-80gb --batch-tokens 512K --kernels eager \\
      --selective op --reduce-dtype fp32 --layout tp=1,pp=1,zero=3,mbs=1,recompute=selective
  pretrain plan --model llama-3-8b --gpus 16 --emit-recipe run.toml
  pretrain plan --calibrate runs/a runs/b --gpu h100 --save-hardware mine.toml
  pretrain plan --model gpt2-124m --gpus 1 --gpu a100-40gb --tokens 10B --figures plan_figs/

Output: a table (model, budget, chosen layout, memory per GPU, step time by part, MFU, days,
GPU-hours, communication, bubble, failures, the top layouts and why the winner wins), or with
--json one JSON object with the same numbers (schema in docs/planner.md; "headline" first).
--figures DIR writes memory.png, zero.png, pipeline.png and checkpoint.png for this configuration.
Models: --model NAME (see --list-models), --model DIR (a Hugging Face folder's config.json: Llama,
Mistral, Qwen2, Qwen3 or GPT-2, counted exactly as transformers builds it; its context is
max_position_embeddings, often 32K-128K: plan continued training at yours with --seq-len),
--model RUN (a run directory of pretrain train: the model it trained), or --params 7B.
Exit code 1 when no layout fits (or the --layout given does not).
"""


def _model_shape(model: str):
    """A preset by name, or the shape of a Hugging Face folder (a directory with config.json), read
    by the same code as `model.init_from` (train/hf.py), hostile-input checks included."""
    from pathlib import Path

    from pretrain.errors import UserError
    from pretrain.plan import shapes

    if model in shapes.PRESETS or not Path(model).is_dir():
        if "/" in model or (Path(model).exists() and not Path(model).is_dir()):
            raise UserError(f"--model {model}: not a folder (give a Hugging Face model folder with "
                            "config.json, or a preset: see --list-models)")
        return shapes.get_shape(model)
    if (Path(model) / "config.toml").is_file() and not (Path(model) / "config.json").is_file():
        return _run_shape(Path(model))
    from pretrain.train.hf import read_hf_model_config

    fields = read_hf_model_config(model)[0]
    return shapes.ModelShape(name=Path(model).resolve().name, **fields)


def _run_shape(run):
    """The shape a run of `pretrain train` trained: its config.toml's [model] (a preset and the fields
    set over it, or the model.init_from folder's, with the fields set over that), read as the
    calibration reads it (hostile-input checks, no torch)."""
    import dataclasses

    from pretrain.errors import UserError
    from pretrain.plan.calibrate import _shape
    from pretrain.plan.recipe import SHAPE_FIELDS
    from pretrain.untrusted import load_toml

    where = run / "config.toml"
    model = load_toml(where).get("model", {})
    if not isinstance(model, dict):
        raise UserError(f"{where}: [model] must be a table, got {model!r}")
    if model.get("init_from"):  # continued pretraining: the folder's shape, as the trainer builds it
        base = _model_shape(str(model["init_from"]))
        over = {k: model[k] for k in SHAPE_FIELDS if model.get(k) not in (None, "")}
        try:
            return dataclasses.replace(base, **over)
        except TypeError as e:
            raise UserError(f"{where}: [model]: {e}") from None
    return dataclasses.replace(_shape(model, where), name=run.resolve().name)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None,
                   help="preset, e.g. llama-3-8b, gpt2-124m (see --list-models), a Hugging Face folder, "
                   "or a run directory of pretrain train (the model it trained)")
    p.add_argument("--params", default=None, help="a parameter count instead of a preset, e.g. 7B, 1.5T")
    p.add_argument("--seq-len", type=Number(int, lo=2, hi=2**24,
                               why="tokens of context; one position attends to nothing"),
                   default=None, help="sequence length (default: the model's)")
    p.add_argument("--gpus", type=Number(int, lo=1, hi=10**7,
                               why="GPUs in the job; Llama 3 405B used 16,384"),
                   default=8, help="number of GPUs (default 8)")
    p.add_argument("--gpu", default="h100",
                   help="a100-40gb, a100-80gb, h100, h100-hbm2e (96 GB, Meta's Grand Teton), h200, b200, "
                   "mi300x (default h100)")
    p.add_argument("--hardware", default=None, metavar="FILE", help="TOML/JSON file overriding the GPU table")
    p.add_argument("--tokens", default=None, help="training tokens, e.g. 1T (default: 20 per param)")
    p.add_argument("--batch-tokens", default="4M", help="global batch in tokens; 4M = 4*2^20 (default)")
    p.add_argument("--layout", default=None, help="evaluate this layout, e.g. tp=2,pp=1,cp=1,zero=1,"
                   "mbs=1,recompute=selective,sp=1,v=1 (dp is the rest; dp_shard/dp_replicate for HSDP)")
    p.add_argument("--accounting", default="16B", choices=["16B", "18B", "20B", "megatron-distopt"],
                   help="bytes of training state per parameter (default 16B)")
    p.add_argument("--headroom", type=Number(float, hi=0.99, why="a share of each GPU's memory, below 1"),
                   default=0.10,
                   help="share of each GPU's memory left free for what the model does not count: the "
                   "CUDA context (~0.8 GB), NCCL buffers (0.5-1.6 GB per communicator), allocator "
                   "fragmentation (default 0.10; the plan says when it alone refuses a layout)")
    p.add_argument("--no-flash", action="store_true", help="attention stores s x s scores")
    p.add_argument("--no-dropout", action="store_true",
                   help="GPT blocks trained with dropout 0 (MPT, most LLM pretraining) save no dropout "
                   "masks: 2 bytes per token per layer fewer than Korthikanti's 34h")
    p.add_argument("--efficiency", type=Number(float, gt=0, hi=1, why="a share of peak"), default=None,
                   help="share of peak large GEMMs sustain (default: the GPU table's, e.g. 0.80 on H100; "
                   "llm-foundry's published PyTorch-FSDP runs imply ~0.58 on H100, ~0.69 on A100: "
                   "docs/planner.md; better, --calibrate on your own runs)")
    p.add_argument("--activations", default="fused", choices=["fused", "pretrain", "torchtitan"],
                   help="saved-tensor accounting: fused kernels (Megatron/TE, default), this project's "
                   "trainer as written (fp32 residual, unfused norms and SwiGLU; ~1.9x the activations "
                   "on a Llama block): pick pretrain to plan a `pretrain train` run; or torchtitan "
                   "(eager, bf16 weights, no autocast)")
    p.add_argument("--loss-chunks", type=Number(int, lo=1, hi=4096, why="slices of a micro-batch's tokens"),
                   default=1, help="with --activations pretrain: the trainer's loss run over this many "
                   "slices of the tokens (train.loss_chunks), its 12 bytes per vocabulary entry per token "
                   "divided by it; only layouts with tp=1 and pp=1 (default 1: the whole loss)")
    p.add_argument("--kernels", default=None, choices=["fused", "eager"],
                   help="element-wise kernels: fused (Megatron-Core/TE, torch.compile) or eager PyTorch, "
                   "one pass per op (default: eager with --activations pretrain, else fused)")
    p.add_argument("--selective", default="attention", choices=["attention", "op"],
                   help="what recompute=selective re-runs: the attention core (Megatron, default) or "
                   "torchtitan's per-op policy (every second matmul and the element-wise ops)")
    p.add_argument("--attention", default="flash2", choices=["flash2", "flash1"],
                   help="fused attention kernel: FlashAttention-2 (default, the GPU table's speed) or "
                   "FlashAttention-1 / its Triton port, half as fast (Dao 2023): MPT/llm-foundry in 2023")
    p.add_argument("--reduce-dtype", default=None, choices=["bf16", "fp32"],
                   help="dtype gradients are reduced in (default: fp32 with --accounting 18B or "
                   "megatron-distopt, else bf16; torchtitan's FSDP2 reduces in fp32)")
    p.add_argument("--mtbf-gpu-hours", type=Number(float, gt=0, why="hours one GPU runs between failures"),
                   default=50_000.0,
                   help="mean hours between failures of one GPU (default 50,000, from Llama 3)")
    p.add_argument("--checkpoint-seconds", type=Number(float, gt=0, why="seconds"),
                   default=60.0, help="time to save a checkpoint (60)")
    p.add_argument("--restart-seconds", type=Number(float, why="seconds"),
                   default=0.0, help="time lost per failure restarting (0)")
    p.add_argument("--top", type=Number(int, lo=1, hi=10**6, why="layouts shown"),
                   default=5, help="how many ranked layouts to show (5)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    p.add_argument("--figures", default=None, metavar="DIR", help="write PNG figures into DIR")
    p.add_argument("--calibrate", nargs="+", default=None, metavar="RUN",
                   help="fit the GPU's compute efficiencies (and kernel launch overhead, given runs of "
                   "different sizes) to the tokens/s measured in these pretrain train run directories; "
                   "the plan then uses the calibrated GPU")
    p.add_argument("--save-hardware", default=None, metavar="FILE",
                   help="with --calibrate: write the calibrated GPU as a --hardware TOML file")
    p.add_argument("--emit-recipe", default=None, metavar="FILE",
                   help="write a training config (TOML) for pretrain train: the best layout under this "
                   "trainer's activations (--activations pretrain), which may differ from the table's")
    p.add_argument("--list-models", action="store_true",
                   help="list the presets and exit (with --json: a JSON list)")


def run(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from pretrain.errors import UserError
    from pretrain.jsonout import dumps
    from pretrain.plan import hardware, report, shapes
    from pretrain.plan.search import Job

    for flag, path in (("--emit-recipe", args.emit_recipe), ("--save-hardware", args.save_hardware)):
        if path and Path(path).is_dir():  # said now, not after the search as a temporary file's error
            name = "run.toml" if flag == "--emit-recipe" else "hardware.toml"
            raise UserError(f"{flag} {path}: a folder; give the file's path (e.g. {Path(path) / name})")
    if args.save_hardware and not args.calibrate:  # it was ignored in silence: no file, no word
        raise UserError(f"--save-hardware {args.save_hardware}: writes a GPU fitted by --calibrate RUN "
                        "[RUN ...]; without --calibrate there is nothing fitted to save (a GPU of your "
                        "own: a --hardware FILE, format in docs/planner.md)")
    _check_modes(args)
    if args.list_models:
        if args.json:  # a script reads the presets back
            print(dumps([{"name": name, "params": s.params(), "n_layers": s.n_layers, "d_model": s.d_model,
                          "n_heads": s.n_heads, "n_kv_heads": s.n_kv_heads, "vocab_size": s.vocab_size,
                          "seq_len": s.seq_len} for name, s in shapes.PRESETS.items()], indent=2))
            return 0
        for name, s in shapes.PRESETS.items():
            print(f"{name:18s} {s.params() / 1e9:9.3f}B  L={s.n_layers} h={s.d_model} a={s.n_heads} "
                  f"kv={s.n_kv_heads} V={s.vocab_size} s={s.seq_len}")
        return 0
    if args.calibrate:
        calibration, args.gpu_override = _calibrate(args)
        if args.model is None and args.params is None:
            print(dumps(calibration, indent=2) if args.json else _calibration_text(calibration))
            return 0
    if (args.model is None) == (args.params is None):
        raise UserError("give exactly one of --model NAME or --params COUNT (e.g. --params 7B)")
    if args.seq_len is not None and args.seq_len < 2:  # one position attends to nothing
        raise UserError(f"--seq-len must be >= 2, got {args.seq_len}")
    if args.no_flash and args.attention != "flash2":  # the kernel is of fused attention, which is off
        raise UserError(f"--attention {args.attention} names a fused attention kernel and --no-flash "
                        "plans without one: give one of them")
    if args.model:
        shape = _model_shape(args.model)
    else:
        wanted = shapes.parse_count(args.params)
        shape = shapes.shape_for_params(wanted, seq_len=args.seq_len or 4096)
        if abs(shape.params() / wanted - 1) > 0.01:
            print(f"--params {args.params}: no Llama-style shape comes within 1%; planning the nearest, "
                  f"{shape.params():,} parameters (L={shape.n_layers}, h={shape.d_model}, "
                  f"d_ff={shape.d_ff}, vocabulary {shape.vocab_size:,})", file=sys.stderr)
    if args.seq_len:
        shape = shape.with_(seq_len=args.seq_len)
    table = hardware.load_table(args.hardware) if args.hardware else None
    gpu = getattr(args, "gpu_override", None) or hardware.get_gpu(args.gpu, table)
    if args.gpus < 1:
        raise UserError(f"--gpus must be >= 1, got {args.gpus}")
    if args.efficiency is not None and not 0 < args.efficiency <= 1:
        raise UserError(f"--efficiency is a share of peak in (0, 1], got {args.efficiency}")
    _check_budget_flags(args)
    tokens = shapes.parse_count(args.tokens) if args.tokens else 20.0 * shape.params()
    if tokens <= 0:
        raise UserError(f"--tokens must be positive, got {args.tokens}")
    batch = shapes.parse_batch_tokens(args.batch_tokens)
    if batch < shape.seq_len:
        raise UserError(f"--batch-tokens {args.batch_tokens} ({batch:,}) holds no sequence of "
                        f"{shape.seq_len:,}")
    whole = batch // shape.seq_len * shape.seq_len  # the global batch the plan runs
    if tokens < whole:
        given = f"--tokens {args.tokens}" if args.tokens else "the default budget (20 tokens per parameter)"
        raise UserError(f"{given} ({tokens:,.0f}) is less than one global batch "
                        f"({whole:,} tokens, --batch-tokens {args.batch_tokens}): not a training run")
    job = Job(shape, gpu, args.gpus, batch, args.accounting, not args.no_flash, args.efficiency,
              args.activations, kernels=args.kernels or "", selective=args.selective,
              reduce_dtype=args.reduce_dtype or "", attention=args.attention, dropout=not args.no_dropout,
              headroom=args.headroom, loss_chunks=args.loss_chunks)
    budget = report.Budget(tokens, args.mtbf_gpu_hours, args.checkpoint_seconds, args.restart_seconds)
    layout = report.parse_layout(args.layout, args.gpus) if args.layout else None
    if layout is not None:
        report.check_layout(job, layout)
    plan = report.build_plan(job, budget, layout, args.top)
    if args.calibrate:
        plan["calibration"] = calibration
    if args.json:
        print(dumps(plan, indent=2))
    else:
        from pretrain.plan.render import print_plan

        if args.calibrate:
            print(_calibration_text(calibration))
        print_plan(plan)
    if args.figures:
        from pretrain.plan.figures import write_figures

        try:
            for path in write_figures(plan, job, args.figures):
                print(f"wrote {path}", file=sys.stderr)
        except OSError as e:
            raise UserError(f"cannot write {e.filename or args.figures}: {e.strerror or e}") from e
    fits = bool(plan["layout"] and plan["layout"]["fits"])
    if args.emit_recipe and fits:
        return 0 if _emit(args, plan, job, budget, layout) else 1
    elif args.emit_recipe:
        print(f"no layout fits: {_nothing_written(args.emit_recipe)}", file=sys.stderr)
    return 0 if fits else 1


def _check_modes(args: argparse.Namespace) -> None:
    """Options a mode would ignore, refused in one line (they were accepted and dropped in silence:
    `--calibrate RUN --emit-recipe r.toml` printed the fit and wrote nothing)."""
    from pretrain.errors import UserError

    planning = {"--model": args.model, "--params": args.params, "--tokens": args.tokens,
                "--layout": args.layout, "--emit-recipe": args.emit_recipe, "--figures": args.figures,
                "--efficiency": args.efficiency}
    if args.list_models:
        more = {"--calibrate": args.calibrate, "--hardware": args.hardware}
        given = [f for f, v in {**planning, **more}.items() if v is not None]
        if given:
            raise UserError(f"--list-models prints the presets and exits: {', '.join(given)} would do "
                            "nothing; drop --list-models to plan")
    if args.calibrate and args.model is None and args.params is None:
        given = [f for f, v in planning.items() if v is not None]
        if given:
            raise UserError(f"--calibrate RUN... alone prints the fit and exits: {', '.join(given)} "
                            "plans a model; add --model NAME (or --params COUNT) to plan with the fitted GPU")
    if args.calibrate and args.efficiency is not None:
        raise UserError(f"--efficiency {args.efficiency} would replace the GEMM efficiency --calibrate "
                        "fits to your runs: give one of them")
    if args.hardware:
        _check_hardware_names(args.hardware, args.gpu)


def _check_hardware_names(path: str, gpu: str) -> None:
    """--hardware FILE whose entries leave --gpu's as built in changes nothing: say so (a file
    saved by --calibrate on an h100 run, passed with --gpu a100-80gb, was ignored in silence)."""
    from pretrain.errors import UserError
    from pretrain.plan import hardware

    table = hardware.load_table(path)
    changed = [name for name, g in table.items() if hardware.GPUS.get(name) != g]
    if hardware.ALIASES.get(gpu.lower(), gpu.lower()) not in changed:
        have = ", ".join(changed) or "no GPU it changes"
        raise UserError(f"--hardware {path} holds {have}; --gpu {gpu} is not among them, so the file "
                        f"would change nothing: pass --gpu {changed[0] if changed else 'NAME'}")


def _check_budget_flags(args: argparse.Namespace) -> None:
    """Failure and display flags, before any search (NaN would reach the JSON as an invalid `NaN`)."""
    import math

    from pretrain.errors import UserError

    for flag, value, ok in (("--mtbf-gpu-hours", args.mtbf_gpu_hours, "> 0"),
                            ("--checkpoint-seconds", args.checkpoint_seconds, "> 0"),
                            ("--restart-seconds", args.restart_seconds, ">= 0")):
        if not math.isfinite(value) or value < 0 or (ok == "> 0" and value == 0):
            raise UserError(f"{flag} must be a finite number {ok}, got {value}")
    if args.top < 1:
        raise UserError(f"--top must be >= 1, got {args.top}")


def _emit(args: argparse.Namespace, plan: dict, job, budget, layout) -> bool:
    """Write the recipe; False (nothing written, one line why) when this trainer cannot hold it."""
    import sys
    from pathlib import Path

    from pretrain.errors import UserError
    from pretrain.plan import recipe, shapes
    from pretrain.plan.layout import Layout

    first, profile = plan["layout"]["label"], job.activations
    mapped: list[str] = []
    if layout is not None:  # the trainer's nearest layout, refused in one line before any memory check
        layout, mapped = recipe.trainer_layout(layout)
        try:
            recipe.check(job.shape, layout, job.batch_seqs)
        except UserError as e:
            raise UserError(f"{e}; {_nothing_written(args.emit_recipe)}") from e
    plan, job, notes = _trainer_plan(plan, job, budget, layout)
    if plan is None:
        print(f"--emit-recipe: {notes[0]}: {_nothing_written(args.emit_recipe)}", file=sys.stderr)
        return False
    lay = Layout(**{k: v for k, v in plan["layout"]["layout"].items() if k != "dp"})
    try:
        config, more = recipe.recipe(job.shape, lay, job.batch_seqs)
        if job.loss_chunks > 1:
            config["train"]["loss_chunks"] = job.loss_chunks
    except UserError as e:
        raise UserError(f"{e}; {_nothing_written(args.emit_recipe)}") from e
    notes = mapped + [m for m in more if m not in mapped] + notes
    if args.model and args.model not in shapes.PRESETS and (Path(args.model) / "config.json").is_file():
        # planned from a Hugging Face folder: the recipe continues training it (weights, rotary base,
        # norm epsilon and tokenizer from the folder, which checks the shape written here)
        config["model"]["init_from"] = str(Path(args.model).resolve())
        notes.append("model.init_from is the folder: continued pretraining from its weights")
    elif args.model and args.model not in shapes.PRESETS and Path(args.model).is_dir():
        # a run directory gave the shape only: planning that model at scale is not continuing the
        # run (its weights, its tokenizer); that is the user's choice, one --set away
        notes.append(f"a new model of {args.model}'s shape; to continue from its weights instead, "
                     f"add --set model.init_from={args.model} to pretrain train")
    if args.accounting == "megatron-distopt":
        notes.append("sized at 16 bytes a parameter as FSDP2 keeps them: this trainer has no Megatron "
                     "distributed optimizer (the table's 6 + 12/DP)")
    if layout is None and plan["layout"]["label"] != first:
        notes.append(f"the plan printed above, with {profile} activations, chose {first}; this is the "
                     "best layout for this trainer's saved tensors")
    t = plan["time"]
    long = _long_step(config, job, t["step_s"])
    if long:
        notes.append(long)
    where = f"{job.n_gpus} {job.gpu.name}"
    header = [f"pretrain plan: {lay.label()} on {where}",
              f"planned with --activations pretrain (this trainer's saved tensors), "
              f"{'fused' if job.kernels == 'fused' else 'eager'} kernels",
              f"predicted {t['tokens_per_s']:,.0f} tokens/s, MFU {t['mfu']:.1%}, "
              f"step {_step_text(t['step_s'])} on "
              f"{where} (a step: {job.batch_seqs * job.shape.seq_len:,} tokens; on another machine, "
              "its time scales with that machine's speed)",
              "set data.path (or data.kind/sources) and train.steps before running", *notes]
    try:
        path = recipe.write_recipe(args.emit_recipe, config, header)
    except OSError as e:
        raise UserError(f"cannot write {e.filename or args.emit_recipe}: {e.strerror or e}") from e
    # the layout written is named: "this is the best layout" pointed at a file the user had not opened
    print(f"wrote {path}: {lay.label()}" + (f" ({'; '.join(notes)})" if notes else ""), file=sys.stderr)
    return True


# a step of more micro-batches than this per GPU is minutes wherever a micro-batch takes a tenth of
# a second or more (a CPU: tiny-cpu's 4M-token default batch, 2,048 micro-batches, took 5 min 37 s
# on the sweep's machine, session 11, where the recipe said 3.74 s on the planned H100). Not a
# step time on the planned machine: 66 s is llama-3-8b's on 8 H100s at the usual 4M tokens.
MANY_MICRO_BATCHES = 256


def _step_text(s: float) -> str:
    """'3.74 s'; two significant figures under 0.1 s: a tiny model's step printed as '0.00 s'."""
    return f"{s:,.2f} s" if s >= 0.1 else f"{s:.2g} s"


def _long_step(config: dict, job, step_s: float) -> str:
    """A warning when the recipe's step holds over MANY_MICRO_BATCHES micro-batches per GPU
    (--batch-tokens sized for a cluster, trained on a CPU or one GPU), with the --batch-tokens that
    gives 32 per GPU. "" when it does not."""
    micro = max(config["train"]["grad_accum"], config["parallel"].get("pp_microbatches", 1))
    if micro <= MANY_MICRO_BATCHES:
        return ""
    fewer = job.batch_seqs // micro * job.shape.seq_len * 32  # 32 micro-batches, all replicas
    size = (f"{fewer >> 20}M" if fewer % (1 << 20) == 0 else f"{fewer >> 10}K" if fewer % 1024 == 0
            else f"{fewer:,}")
    return (f"warning: a step is {micro:,} micro-batches per GPU ({_step_text(step_s)} on {job.n_gpus} "
            f"{job.gpu.name}, minutes on a CPU) and logs, evaluations and checkpoints come once a step: "
            f"--batch-tokens {size} gives 32")


def _nothing_written(path: str) -> str:
    """What a refused --emit-recipe did: nothing; and an earlier run's FILE, when there is one, is
    still there (a user running `pretrain train FILE` next must not take it for the new plan)."""
    import os

    left = f"; {path} still holds an earlier file, left as it was" if os.path.exists(path) else ""
    return f"nothing written to {path}{left}"


def _trainer_plan(plan: dict, job, budget, layout) -> tuple[dict | None, object, list[str]]:
    """The plan under the `pretrain` activation profile, the one `pretrain train` runs (eager PyTorch
    saves ~1.9x what fused kernels do on a Llama block): the recipe is for this trainer, whatever
    profile the printed plan used. (None, job, [why]) when no layout (or not the given one) fits it."""
    from pretrain.plan import report

    if job.activations == "pretrain" and job.trainer:
        return plan, job, []
    # the search keeps only what the trainer runs (no ZeRO-1, no CP with PP/SP/HSDP, ...): the plan
    # printed above may have chosen a layout `pretrain train` refuses
    ours = job.as_trained()  # kernels "": eager, as trained; megatron-distopt -> 16 B a parameter
    theirs = report.build_plan(ours, budget, layout, top=1)
    if theirs["layout"] and theirs["layout"]["fits"]:
        return theirs, ours, []
    est = theirs["layout"]
    if layout is not None and est and est.get("memory_gb"):
        from pretrain.plan.memory import size_text

        why = (f"{layout.label()} needs {size_text(est['memory_gb']['total'])} of "
               f"{size_text(ours.usable_bytes / 1e9)} with this trainer's saved tensors "
               "(--activations pretrain)")
    elif layout is not None:
        why = f"{layout.label()}: {est['reason'] if est else 'cannot be planned'}"
    else:
        why = "no layout fits this trainer's saved tensors (--activations pretrain)"
    return None, job, [why]


def _calibrate(args: argparse.Namespace):
    from pretrain.errors import UserError
    from pretrain.plan import calibrate, hardware

    table = hardware.load_table(args.hardware) if args.hardware else None
    gpu = hardware.get_gpu(args.gpu, table)
    runs = [calibrate.load_run(r) for r in args.calibrate]
    fitted, k = calibrate.fit(runs, gpu)
    rows = [{"run": str(r.path), "layout": r.layout.label(), "batch_seqs": r.batch_seqs,
             "measured_tokens_per_s": r.tokens_per_s, "steps": r.steps, "skipped_lines": r.skipped,
             "predicted_before": calibrate.predict(r, gpu), "predicted_after": calibrate.predict(r, fitted)}
            for r in runs]
    out = {"gpu": gpu.name, "factor": k, "launch_us": fitted.launch_us,
           **{f: getattr(fitted, f) for f in calibrate.EFFICIENCIES}, "runs": rows}
    if k < calibrate.IMPLAUSIBLE:
        out["warning"] = (f"{gpu.name}'s efficiencies x{k:.3f} (GEMMs at {fitted.gemm_efficiency:.1%} of its "
                          "peak) is no GPU running slow: runs trained on a CPU (train.device \"auto\" "
                          "without a GPU) or on another GPU calibrate nothing; use runs made on the GPU "
                          "you plan for")
    if args.save_hardware:
        from pretrain.plan.recipe import write_text

        try:
            write_text(args.save_hardware, calibrate.hardware_toml(fitted))
        except OSError as e:  # the temporary file's name would say nothing
            raise UserError(f"--save-hardware {args.save_hardware}: cannot write: {e.strerror or e}") from e
        out["saved"] = args.save_hardware
    return out, fitted


def _calibration_text(c: dict) -> str:
    lines = [f"calibrated {c['gpu']}: compute efficiencies x{c['factor']:.3f} (gemm "
             f"{c['gemm_efficiency']:.3f}, attention {c['attention_efficiency']:.3f}, hbm "
             f"{c['hbm_efficiency']:.3f}), launch {c['launch_us']:.1f} us per kernel"]
    for r in c["runs"]:
        lines.append(f"  {r['run']}: measured {r['measured_tokens_per_s']:,.0f} tokens/s; predicted "
                     f"{r['predicted_before']:,.0f} before, {r['predicted_after']:,.0f} after "
                     f"({r['layout']})")
    if c.get("warning"):
        lines.append(f"WARNING: {c['warning']}")
    if c.get("saved"):
        lines.append(f"wrote {c['saved']} (use it with --hardware)")
    return "\n".join(lines)
