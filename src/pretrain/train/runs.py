"""Reading a finished (or running) run directory: its config, its newest model, its export."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import torch

from pretrain import config as cfgmod
from pretrain.errors import UserError
from pretrain.train import checkpoint as ck
from pretrain.train.config import RunConfig, storage_in_run
from pretrain.train.model import build_model, materialize, resolve_shape, rope_tables
from pretrain.train.precision import DTYPES


def leaves(run: Path, value: str) -> bool:
    """Whether a checkpoint.storage saved in RUN/config.toml lies outside the run directory (an fsspec
    URL always does; a relative folder is relative to the run directory, `storage_in_run`)."""
    if not value:
        return False
    where = storage_in_run(run, value)
    return "://" in where or not Path(where).resolve().is_relative_to(Path(run).resolve())


def read_before(run: Path, storage: str, out: str = "") -> tuple[str, int] | None:
    """A run directory written before session 10 kept a relative checkpoint.storage as typed (from
    the working directory of its training): (that folder from here, or from the directory its saved
    train.out says it was trained from, `trained_from`; its newest step) when it is not the
    run-relative one, holds a complete checkpoint and the run-relative one holds none, so an empty
    run-relative folder is not taken for a fresh run in silence; else None."""
    where = storage_in_run(run, storage)
    if not storage or where == storage or ck.latest_complete(Path(where)):
        return None
    base = trained_from(run, out)
    for old in [storage] + ([str(base / storage)] if base is not None else []):
        if Path(old).resolve() != Path(where).resolve() and (found := ck.latest_complete(Path(old))):
            return old, found[0]
    return None


def trained_from(run: str | Path, out: str) -> Path | None:
    """The directory a run was trained from, read off its saved train.out: a relative one ("runs/x")
    names the run when the run's absolute path ends with it (RUN = /home/a/proj/runs/x: trained from
    /home/a/proj). None when it does not, or cannot tell (absolute, or climbing out with "..")."""
    if not out or Path(out).is_absolute():
        return None
    parts = Path(os.path.normpath(out)).parts
    if ".." in parts:
        return None
    for home in {Path(os.path.abspath(run)), Path(run).resolve()}:  # as typed, and through links
        if home.parts[len(home.parts) - len(parts):] == parts and len(home.parts) > len(parts):
            return Path(*home.parts[:len(home.parts) - len(parts)])
    return None


def names_run(run: str | Path, out: str) -> bool:
    """Whether a saved train.out is this run directory: from here, or from the directory the run was
    trained from (`trained_from`), so a resume through RUN/config.toml works from any directory."""
    return bool(out) and (Path(out).resolve() == Path(run).resolve() or trained_from(run, out) is not None)


def placed(run: str | Path, cfg: RunConfig, given: set[str] = frozenset()) -> RunConfig:
    """RUN/config.toml's relative paths (the data, its tokenizer, model.init_from) as this process
    opens them: relative to the directory the run was trained from when its train.out says which
    (`trained_from`), so they name the same files from any working directory; else as they are (from
    here, the rule of a recipe). Keys in `given` (--set) are the user's, from here."""
    base = trained_from(run, cfg.train.out)
    if base is None or base.resolve() == Path.cwd().resolve():  # from there: as they are
        return cfg
    return _placed_at(base, cfg, given, here=True)


def _paths(cfg: RunConfig) -> dict[str, str]:
    """The paths a run only reads, by key: data.path, data.tokenizer, data.sources.NAME,
    data.eval_sources.NAME, model.init_from."""
    d = cfg.data
    return {"data.path": d.path, "data.tokenizer": d.tokenizer, "model.init_from": cfg.model.init_from,
            **{f"data.sources.{n}": v for n, v in d.sources.items()},
            **{f"data.eval_sources.{n}": v for n, v in d.eval_sources.items()}}


def _with_paths(cfg: RunConfig, paths: dict[str, str]) -> RunConfig:
    d = cfg.data
    data = dataclasses.replace(
        d, path=paths["data.path"], tokenizer=paths["data.tokenizer"],
        sources={n: paths[f"data.sources.{n}"] for n in d.sources},
        eval_sources={n: paths[f"data.eval_sources.{n}"] for n in d.eval_sources})
    return dataclasses.replace(cfg, data=data, model=dataclasses.replace(
        cfg.model, init_from=paths["model.init_from"]))


def _relative(value: str) -> bool:
    return bool(value) and "://" not in value and not Path(value).is_absolute()


def _placed_at(base: Path, cfg: RunConfig, given: set[str] = frozenset(), here: bool = False) -> RunConfig:
    """`placed` from `base`; with `here`, a path found from the working directory and not from `base`
    is taken from here (a teammate's copy of a run, read in their own checkout of the data)."""
    def at(key: str, value: str) -> str:
        if any(g == key or key.startswith(g + ".") for g in given) or not _relative(value):
            return value  # set on the command line (data.sources=... or data.sources.web=...): from here
        if here and not (base / value).exists() and Path(value).exists():
            return value
        return str(base / value)

    return _with_paths(cfg, {k: at(k, v) for k, v in _paths(cfg).items()})


def as_saved(run: str | Path, cfg: RunConfig) -> RunConfig:
    """The config to write to RUN/config.toml on a resume: the saved train.out and relative paths as
    they were when this process only placed them (`check_saved_paths` from another directory read
    runs/x as ../A/runs/x, the data from /home/a/proj), so the file keeps saying where the run was
    trained from and a later resume from a third directory still finds it. A relative path of the
    working directory's left (a --set from elsewhere) keeps the whole config as this process has it:
    the saved train.out must stay the base its relative paths are read from."""
    try:
        old = cfgmod.load(RunConfig, Path(run) / "config.toml")
    except (UserError, OSError):  # none yet (a fresh run), or not readable: the new one stands
        return cfg
    base = trained_from(run, old.train.out)
    if base is None or Path(cfg.train.out).resolve() != Path(run).resolve():
        return cfg
    was, there = _paths(old), _paths(_placed_at(base, old))
    paths = {k: was[k] if k in was and v == there[k] else v for k, v in _paths(cfg).items()}
    if base.resolve() != Path.cwd().resolve() and any(
            _relative(v) and not (k in was and v == there[k]) for k, v in _paths(cfg).items()):
        return cfg
    return dataclasses.replace(_with_paths(cfg, paths),
                               train=dataclasses.replace(cfg.train, out=old.train.out))


def check_saved_paths(config: str | Path, cfg: RunConfig, overrides: list[str]) -> RunConfig:
    """`pretrain train RUN/config.toml`: a run directory's saved config (it travels with the
    directory: a colleague's, a download) does not choose where training writes. train.out must be
    RUN itself (from here, or as `names_run` reads it: then the run's relative data paths are read
    from where it trained, `placed`) and checkpoint.storage empty (RUN/checkpoints) or inside RUN,
    unless the key is on the command line (--set); else one refusal naming each key, its value and
    both ways on. A recipe (any file not named config.toml beside a run's checkpoints/ or
    metrics.jsonl) is the user's own.
    Returns the config to train with: a saved relative storage made the folder inside RUN it names
    (relative to the run directory, from any working directory); a --set one is the user's (cwd)."""
    config = Path(config)
    run = config.parent
    if config.name != "config.toml" or not any((run / n).exists() for n in ("checkpoints", "metrics.jsonl")):
        return cfg
    given = {text.split("=", 1)[0].strip() for text in overrides}
    said, out = [], cfg.train.out  # as saved: it says where the run was trained from
    elsewhere = "train.out" not in given and Path(cfg.train.out).resolve() != run.resolve()
    if elsewhere and names_run(run, cfg.train.out):
        # its own train.out seen from another directory: this run, its paths from where it trained
        cfg = placed(run, cfg, given)
        cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, out=str(run)))
    elif elsewhere:
        said.append(f"train.out = {cfg.train.out!r} is not this run directory: --set train.out={run} "
                    f"continues it here, --set train.out={cfg.train.out} writes there")
    else:
        _check_relative_data(config, cfg, given)
    storage = cfg.checkpoint.storage
    if "checkpoint.storage" not in given and leaves(run, storage):
        # the first way on starts the run over when RUN/checkpoints is empty: said before it is taken
        fresh = "" if ck.latest_complete(run / "checkpoints") else " (no checkpoint there: a fresh start)"
        said.append(f"checkpoint.storage = {storage!r} is outside {run}: --set checkpoint.storage= uses "
                    f"{run / 'checkpoints'}{fresh}, --set checkpoint.storage={storage_in_run(run, storage)} "
                    "reads and writes there")
    if said:
        raise UserError(f"{config}: a run directory's saved config does not choose where training writes "
                        f"(train.out) or keeps checkpoints (checkpoint.storage); {'; '.join(said)}")
    if "checkpoint.storage" in given:
        return cfg
    old = read_before(run, storage, out)
    if old:
        here = storage_in_run(run, storage)
        raise UserError(f"{config}: checkpoint.storage = {storage!r} is relative to the run directory "
                        f"({here}, no checkpoint there); from here it names {old[0]}, "
                        f"which holds step {old[1]} (a run saved before session 10 kept it so): "
                        f"--set checkpoint.storage={old[0]} resumes from there")
    return dataclasses.replace(cfg, checkpoint=dataclasses.replace(
        cfg.checkpoint, storage=storage_in_run(run, storage)))


def _check_relative_data(config: Path, cfg: RunConfig, given: set[str]) -> None:
    """A run whose saved train.out is absolute does not say which directory it was trained from, so
    its relative data paths are read from here; one that is not found from here is refused naming
    why and the ways on. It said "data.path: text file not found: recipes/data/x.txt" from another
    directory (session 14's walk: a run trained with --set train.out=/abs/run, resumed through
    /abs/run/config.toml from /tmp), as if the file were gone."""
    if trained_from(config.parent, cfg.train.out) is not None:
        return
    for key, value in _paths(cfg).items():
        mine = any(g == key or key.startswith(g + ".") for g in given)
        if key.startswith("data.") and not mine and _relative(value) and not Path(value).exists():
            raise UserError(f"{config}: {key} = {value!r} is relative to the directory the run was trained "
                            f"from, which its absolute train.out does not tell, and not found from here "
                            f"({Path.cwd()}): run the command from that directory, or --set {key}=PATH")


def saved_storage(run: Path, cfg: RunConfig, given: str | None) -> str:
    """Where a run's checkpoints are read from: `given` (--checkpoints, from the working directory)
    when the user names it, else the saved checkpoint.storage when it stays inside the run directory
    (empty: RUN/checkpoints; relative: to the run directory). A saved one pointing elsewhere (another
    user's run, an S3 bucket read with your credentials) is refused in one line saying how to read
    it there anyway."""
    if given:
        return given
    storage = cfg.checkpoint.storage
    if leaves(run, storage):
        raise UserError(f"{run / 'config.toml'}: checkpoint.storage = {storage!r} is outside the run "
                        "directory; a run directory's saved config does not choose where checkpoints are "
                        f"read from: pass --checkpoints {storage_in_run(run, storage)} to read them there")
    return storage_in_run(run, storage)


def _before_first_save(run: Path, cfg: RunConfig) -> str:
    """`; it trained to step 57 and saves every 100 steps ...`: a run killed before its first save (a
    timeout, SIGKILL) said only "no complete checkpoint" to `sample`, `eval` and `export` (session 14).
    The last step is read from the tail of metrics.jsonl (64 KiB, any size of file)."""
    import json

    every = cfg.checkpoint.every
    saves = f"saves every {every:,} steps" if every else f"saves first at step {cfg.checkpoint.first_at:,}"
    last = None
    try:
        with open(run / "metrics.jsonl", "rb") as f:
            start = max(0, f.seek(0, os.SEEK_END) - 65536)
            f.seek(start)
            for line in reversed(f.read().splitlines()[1 if start else 0:]):  # a cut first line dropped
                rec = json.loads(line) if line.strip().startswith(b"{") else None
                if isinstance(rec, dict) and "event" not in rec and isinstance(rec.get("step"), int):
                    last = rec["step"]
                    break
    except (OSError, ValueError):
        pass
    trained = f"it trained to step {last:,} and " if last is not None else "it "
    first = every or cfg.checkpoint.first_at
    before = (", so it stopped before its first save: its `pretrain train` command starts it over "
              "(Ctrl-C saves a checkpoint, a kill does not)") if last is not None and last < first else ""
    return f"; {trained}{saves} (checkpoint.every) and at its end{before}"


def load_run_model(run: str | Path, step: int | None = None, storage: str | None = None):
    """(model in eval mode on CPU, resolved config, checkpoint step) from a run directory; its
    checkpoints from `storage` when given (--checkpoints), else as `saved_storage` allows."""
    run = Path(run)
    _check_is_run(run)
    cfg = placed(run, cfgmod.load(RunConfig, run / "config.toml"))  # its tokenizer, from any directory
    root = ck.as_root(saved_storage(run, cfg, storage) or run / "checkpoints")
    if step is not None:
        path = ck.step_dir(root, step)
        if not ck.is_complete(path):  # which steps there are: the user picks one, not a path
            listed = ck.list_checkpoints(root)
            steps = [s for s, _, ok in listed if ok][-8:]
            there = f"the complete ones: step{'s' * (len(steps) > 1)} {', '.join(map(str, steps))}" if steps \
                else "there is none"
            # step 7 of a run saving every 100 was called "not a complete checkpoint"
            there_is = any(s == step for s, _, _ in listed)
            what = "is not a complete checkpoint" if there_is else "does not exist"
            raise UserError(f"--step {step}: {path} {what}; {there}")
        return _verified(cfg, path, run, root), cfg, step
    for attempt in range(3):
        found = ck.latest_complete(root)
        if found is None:
            before = None if storage else read_before(run, cfg.checkpoint.storage, cfg.train.out)
            hint = (f"; from here the saved checkpoint.storage {before[0]!r} names a folder holding step "
                    f"{before[1]} (a run saved before session 10 kept it relative to where it trained): "
                    f"--checkpoints {before[0]} reads there") if before else ""
            raise UserError(f"{root}: no complete checkpoint{hint or _before_first_save(run, cfg)}")
        step, path = found
        if attempt == 0:
            _say_damaged(root, step)
        try:
            return _verified(cfg, path, run, root), cfg, step
        except ck.IntegrityError:
            raise
        except (UserError, OSError, RuntimeError):
            # A training run still writing this directory rotates old checkpoints out
            # (checkpoint.keep): the newest one may be deleted between choosing and reading it.
            if attempt == 2 or ck.is_complete(path):
                raise  # still there: the error is about the checkpoint itself
    raise AssertionError("unreachable")


def _check_is_run(run: Path) -> None:
    """A folder that is no training run is one line saying what it is: a corpus job's OUT (it has a
    config.toml too) was read as a training config ("unknown config key 'steps'")."""
    if not (run / "config.toml").is_file() and (run / "config.json").is_file():
        raise UserError(f"{run}: a Hugging Face folder (config.json), not a run directory (config.toml): "
                        f"`pretrain eval {run}` scores it; `--set model.init_from={run}` trains on from it")
    if not run.is_dir():
        raise UserError(f"{run}: no such run directory (the train.out of a `pretrain train` run)")
    corpus_job = (run / "plan.json").is_file() and (run / "stats.json").is_file()
    if corpus_job and not (run / "metrics.jsonl").exists():
        raise UserError(f"{run}: the output of a corpus job (plan.json, stats.json), not a training run "
                        "directory (the train.out of a `pretrain train` run)")
    if not (run / "config.toml").is_file():
        raise UserError(f"{run}: not a run directory: no config.toml (`pretrain train` writes one in its "
                        "train.out)")


def _say_damaged(root, used: int) -> None:
    """Newer checkpoints whose files do not match their marker (a shard cut in a copy) are passed
    over, as the trainer passes them over, and said as it says them: `pretrain eval RUN` scored an
    older step without a word, so a damaged step 300 read as a run whose newest model was step 200."""
    import os
    import sys

    if os.environ.get("RANK", "0") != "0":  # under torchrun: said once
        return
    for step, path, ok in ck.list_checkpoints(root):
        if step > used and not ok and (why := ck.damage(path)):
            print(f"{path}: not used: {why}; using step {used}", file=sys.stderr, flush=True)


def _verified(cfg: RunConfig, path, run: Path, root) -> torch.nn.Module:
    """`_load`, whose refusal of a checkpoint with changed bytes says what to do: sample, eval and
    export do not pass over it to an older step by themselves (a score or an export of another step
    than the user believes), they name the one before it."""
    try:
        return _load(cfg, path, run)
    except ck.IntegrityError as e:
        older = ck.latest_complete(root, before=ck.dir_step(path))
        hint = (f"--step {older[0]} uses the complete checkpoint before it" if older
                else "there is no complete checkpoint before it")
        raise ck.IntegrityError(f"{e}; copy it again from its source, or: {hint}", e.path, e.name) from None


def _load(cfg: RunConfig, path, run: Path) -> torch.nn.Module:
    model = _allocated(cfg, path, run / "config.toml")
    ck.load_model_only(path, model)
    return model.eval()


def _check_held(cfg: RunConfig, path, where: Path) -> torch.nn.Module:
    """The config's model on the meta device, once it is known to be the model the checkpoint holds.
    config.toml travels with a run directory and can be edited: 200,000 layers in it would otherwise
    be allocated (50 GB) before the load noticed. First a bound that costs nothing (the parameters in
    fp32 cannot outweigh the checkpoint's files), then every tensor's shape against DCP's metadata."""
    from pretrain.train.safe_dcp import checkpoint_bytes, read_metadata

    shape = resolve_shape(cfg.model)
    need, have = 4 * shape.params(), checkpoint_bytes(path)
    if need > have:
        raise UserError(f"{where}: describes a model of {shape.params():,} parameters ({need:,} bytes in "
                        f"fp32), more than {path}'s files hold ({have:,} bytes); it is not this run's config")
    # The rotary tables are not in the checkpoint but are allocated from model.seq_len: 10^12 in a
    # received config.toml asked for 4 TB (a traceback), 10^8 for ~19 GB. Bounded as an imported HF
    # folder's (hf_io.HFCheckpoint.check_holds): one byte of checkpoint per number.
    numbers = 0 if shape.learned_pos else shape.seq_len * shape.head_dim
    if numbers > have:
        raise UserError(f"{where}: model.seq_len {shape.seq_len:,} needs rotary tables of {numbers:,} "
                        f"numbers, more than {path}'s files hold in bytes ({have:,}); "
                        "it is not this run's config")
    held = read_metadata(ck.as_root(path) / ".metadata").state_dict_metadata
    model = build_model(shape, cfg.model, "meta")
    for key, t in model.state_dict().items():
        there = getattr(held.get(f"model.{key}"), "size", None)
        if there is None or tuple(there) != tuple(t.shape):
            saved = "no such tensor" if there is None else f"shape {tuple(there)}"
            raise UserError(f"{where}: describes {key} as {tuple(t.shape)}, {path} holds {saved}; "
                            "it is not this run's config")
    return model


def _allocated(cfg: RunConfig, path, where: Path) -> torch.nn.Module:
    """The run's model with storage and rotary tables but no random init: the checkpoint overwrites
    every parameter, and initializing 1.2 B of them first took a third of an export's time."""
    shape = resolve_shape(cfg.model)
    model = _check_held(cfg, path, where).to_empty(device="cpu")
    if not shape.learned_pos:
        model.rope_cos, model.rope_sin = rope_tables(shape.head_dim, shape.seq_len,
                                                     cfg.model.rope_theta, scaling=model.rope_scaling)
    return model


def export_safetensors(run: str | Path, out: str | Path, dtype: str = "fp32",
                       step: int | None = None, storage: str | None = None) -> tuple[Path, int]:
    from safetensors.torch import save_file

    model, cfg, step = load_run_model(run, step, storage)
    tensors = {k: v.detach().to(DTYPES[dtype]).contiguous() for k, v in model.state_dict().items()}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    save_file(tensors, str(tmp), metadata={"config": cfgmod.dumps(cfg), "step": str(step), "format": "pt"})
    _as_new_file(tmp)
    tmp.replace(out)
    return out, sum(t.numel() for t in tensors.values())


def _as_new_file(path: Path) -> None:
    """Give `path` the mode open() gives a new file (0666 less the umask), as the hf export's files
    have: safetensors 0.8's `save_file` writes 0600, so a model exported for others to load on a
    shared machine was readable by its owner only."""
    mask = os.umask(0)
    os.umask(mask)
    path.chmod(0o666 & ~mask)


def load_exported(path: str | Path, cfg: RunConfig) -> torch.nn.Module:
    """A model filled from an exported safetensors file (the inverse of export_safetensors)."""
    from safetensors.torch import load_file

    model = materialize(build_model(resolve_shape(cfg.model), cfg.model, "meta"), "cpu", 0)
    sd = {k: v.float() for k, v in load_file(str(path)).items()}
    model.load_state_dict(sd)
    return model.eval()
