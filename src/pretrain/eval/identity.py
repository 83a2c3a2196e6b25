"""What a recorded score was computed from: the model's identity and each task's input digest.

A rerun of `pretrain eval` reuses a task's score from the result file only when nothing that
changes the number changed (`resume.plan`); this module says what "the same" means:
- a run: its absolute path, the checkpoint's step, and `checkpoint`, a digest of the checkpoint's
  marker (COMPLETE.json lists each file's size and xxh3-128 digest, so the marker names the
  checkpoint's bytes without reading them; a run trained again into the same folder, or a step
  directory copied in from elsewhere, is another checkpoint);
- a Hugging Face folder: its path and `digest`, an xxh3-128 of its files' bytes (a link: its target,
  size and modification time; a file over 128 MiB that is not safetensors, which the load never
  reads, such as a pickled .bin beside them: its size and modification time). `files` (name,
  size, modification time, inode) is the shortcut: a rerun whose folder shows the same `files`
  takes the recorded digest without reading the weights (the folder is then not read at all
  before the load's checks; a changed one is digested after the load accepted it);
- `--tokenizer PATH`: its path and `tokenizer_digest`;
- a task: `tasks[T].inputs`, the xxh3 of its file's bytes (MMLU: the scored split and the dev split;
  a text over 64 MiB: its first 64 MiB, size and modification time, as no reader goes further; a
  token directory: its files' names, sizes, modification times).
- a task's settings: `tasks[T].settings`, those of shots, seed, limit and ppl_tokens that change
  its numbers (`read_settings`), so another --limit for one task leaves the others' scores standing
  (until session 14 the file had one `settings` block: any change replaced every task);
- the code: `tasks[T].code`, pretrain's version and `SCORING`, so an upgrade that scores differently
  does not pass off a score of the old code as its own.
A file written before these digests (or by the trainer's in-loop evaluation, which has no
checkpoint yet) is compared on the model keys it has; its tasks, without `code`, are scored again.
"""

from __future__ import annotations

from pathlib import Path

import xxhash

CHUNK = 8 << 20
TEXT_READ = 64 << 20  # suite.MAX_TEXT_BYTES: no task reads a text past this
SMALL = 128 << 20  # a folder's file read for its digest when not safetensors (tokenizer files' bound)
MEMO = ("files",)  # a shortcut to `digest`, not part of the identity when both sides have a digest
DIGESTS = ("checkpoint", "digest", "tokenizer_digest")
# The format of the numbers a task records: bump it with any change that alters a recorded score
# beyond float rounding (a metric's definition, a prompt, a tokenization rule) or the records'
# layout, so that files written by the old code are scored again rather than taken as this code's.
# 1: session 14 (examples scored in fixed chunks, eval/partial.py).
SCORING = 1


def file_digest(path: str | Path, cap: int | None = None) -> str:
    """xxh3-128 of a file's bytes (its first `cap` bytes, then its size and modification time)."""
    p, h, left = Path(path), xxhash.xxh3_128(), cap
    with open(p, "rb") as f:
        while left is None or left > 0:
            chunk = f.read(CHUNK if left is None else min(CHUNK, left))
            if not chunk:
                break
            h.update(chunk)
            left = None if left is None else left - len(chunk)
    if cap is not None and p.stat().st_size > cap:
        st = p.stat()
        h.update(f"\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return h.hexdigest()[:32]


def folder_digest(folder: str | Path) -> str:
    """The bytes of a Hugging Face folder's files (not its subfolders: eval/ holds the results). A
    link is hashed by its target, size and modification time, not read (a snapshot in the HF cache
    is links to blobs named by their hash)."""
    h = xxhash.xxh3_128()
    for f in sorted(Path(folder).iterdir()):
        if f.is_symlink():
            try:
                st = f.stat()
            except OSError:
                continue
            h.update(f"{f.name}\0->{f.resolve()}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        elif f.is_file():
            st = f.stat()
            # weights in formats never loaded (a pickled .bin beside the safetensors, .onnx, .gguf)
            # are named by size and time, not read: the digest reads what the load read
            small = st.st_size <= SMALL or f.suffix == ".safetensors"
            h.update(f"{f.name}\0{file_digest(f) if small else f'{st.st_size}:{st.st_mtime_ns}'}\n".encode())
    return h.hexdigest()[:32]


def task_files(spec: str, benchmarks: str | None) -> list[Path]:
    """The files a task spec reads (MMLU: the scored split and the dev split of its few-shot examples)."""
    from pretrain.eval.tasks import KNOWN, MMLU_DEV

    if spec in KNOWN:
        files = [Path(benchmarks or "") / KNOWN[spec]]
        return files + ([Path(benchmarks or "") / MMLU_DEV] if spec.startswith("mmlu") else [])
    return [Path(spec[4:] if spec[:4] in ("ppl:", "mem:") else spec)]


def task_inputs(specs: list[str], benchmarks: str | None) -> dict[str, str]:
    """{spec: digest of the bytes it reads}; "" for a file that is not there."""
    from pretrain.eval.report import folder_fingerprint

    def one(p: Path) -> str:
        try:
            if p.is_dir():  # a token directory may hold billions of tokens; only --ppl-tokens are read
                return "stat:" + folder_fingerprint(p)
            return file_digest(p, TEXT_READ) if p.is_file() else ""
        except OSError:
            return ""

    return {s: "+".join(one(p) for p in task_files(s, benchmarks)) for s in specs}


def task_name(spec: str) -> str:
    """The name a spec's result is filed under (as suite/tasks name them)."""
    from pretrain.eval.tasks import KNOWN

    if spec[:4] in ("ppl:", "mem:"):
        return spec[:4] + Path(spec[4:]).name
    return spec if spec in KNOWN else Path(spec).name.split(".")[0]


def checkpoint_digest(path) -> str | None:
    """A digest of a checkpoint's marker (its files' sizes and xxh3 digests); None without one."""
    from pretrain.train import checkpoint as ck

    text = ck.marker_text(path)
    return None if text is None else xxhash.xxh3_128(text.encode()).hexdigest()[:32]


def run_checkpoint(run: str | Path, step: int | None, storage: str | None):
    """(step, checkpoint path, checkpoints root) that `load_run_model(run, step, storage)` loads,
    found without loading it; None where that load would fail (it then says why)."""
    from pretrain import config as cfgmod
    from pretrain.errors import UserError
    from pretrain.train import checkpoint as ck
    from pretrain.train.config import RunConfig
    from pretrain.train.runs import placed, saved_storage

    run = Path(run)
    try:
        cfg = placed(run, cfgmod.load(RunConfig, run / "config.toml"))
        root = ck.as_root(saved_storage(run, cfg, storage) or run / "checkpoints")
        if step is None:
            found = ck.latest_complete(root)
            return None if found is None else (*found, root)
        path = ck.step_dir(root, step)
        return (step, path, root) if ck.is_complete(path) else None
    except (UserError, OSError, ValueError):
        return None


def model_identity(model: str, step: int | None, tokenizer: str, storage: str | None,
                   old: dict | None = None, read: bool = True) -> dict | None:
    """The `model` block of the result file. `old`: the earlier file's block, whose digest a folder
    with the same `files` reuses; `read=False` (before the load) gives None rather than read a
    folder's weights. A run: the checkpoint at `step` (None: the newest)."""
    from pretrain.eval.report import folder_fingerprint

    path = str(Path(model).resolve())
    if (Path(model) / "config.toml").is_file():
        found = run_checkpoint(model, step, storage)
        if found is None and not read:
            return None
        # after the load (`read`), a checkpoint not found again (rotated out by a live run) has no digest
        info = {"path": path, "kind": "run", "step": found[0] if found else step,
                "checkpoint": checkpoint_digest(found[1]) if found else None}
    else:
        info = {"path": path, "kind": "hf", "step": None, "files": folder_fingerprint(model)}
        old = old if isinstance(old, dict) else {}
        same_files = old.get("path") == path and old.get("files") == info["files"]
        if same_files and isinstance(old.get("digest"), str):
            info["digest"] = old["digest"]
        elif not read:
            return None
        else:
            info["digest"] = folder_digest(model)
    if tokenizer:  # another tokenizer scores other ids
        info["tokenizer"] = tokenizer
        try:
            info["tokenizer_digest"] = file_digest(tokenizer)
        except OSError:
            info["tokenizer_digest"] = ""
    return info


def same_model(old: object, new: dict) -> bool:
    """Whether a recorded `model` block names this model (see the module docstring)."""
    if not isinstance(old, dict):
        return False
    a, b = dict(old), dict(new)
    if isinstance(a.get("digest"), str) and isinstance(b.get("digest"), str):
        for k in MEMO:  # the same bytes under another export's timestamps or inodes: the same model
            a.pop(k, None)
            b.pop(k, None)
    for k in DIGESTS:  # a file from before the digests, or the trainer's: compared on what it records
        if k not in a:
            b.pop(k, None)
    return a == b


def model_change(old: object, new: dict) -> str:
    """How a recorded model differs from this one, for the line that replaces its results."""
    old = old if isinstance(old, dict) else {}
    if old.get("path") != new.get("path"):
        return f"another model ({old.get('path')})"
    if old.get("step") != new.get("step"):
        return f"another model (step {old.get('step')}; this is step {new.get('step')})"
    if old.get("checkpoint") != new.get("checkpoint"):
        return f"another checkpoint of step {new.get('step')} (its files differ: trained again or copied in)"
    if any(old.get(k) != new.get(k) for k in ("tokenizer", "tokenizer_digest")):
        return f"another tokenizer (it was {old.get('tokenizer') or 'the model' + chr(39) + 's own'})"
    return "another model (the folder's files differ: exported or saved again)"


def read_settings(spec: str) -> set[str]:
    """The settings that change a spec's numbers: a ppl: text is read whole up to ppl_tokens; a mem:
    probe draws --limit windows (seed) of its first ppl_tokens; a benchmark prompts with shots drawn
    by seed from its first limit examples."""
    if spec.startswith("ppl:"):
        return {"ppl_tokens"}
    return {"limit", "seed", "ppl_tokens"} if spec.startswith("mem:") else {"shots", "seed", "limit"}


def task_settings(spec: str, settings: dict) -> dict:
    """The settings a spec's numbers depend on (`limit` 0 and None both mean every example)."""
    return {k: (settings.get(k) or None) if k == "limit" else settings.get(k)
            for k in sorted(read_settings(spec))}


def code_version() -> dict:
    """What computed a score: the package's version and the scoring format (`SCORING`)."""
    from pretrain import __version__

    return {"pretrain": __version__, "scoring": SCORING}


def code_change(old: object) -> str:
    """Why a score recorded by other code is scored again (the file may be someone else's)."""
    from pretrain.untrusted import one_line

    now = code_version()
    if not isinstance(old, dict):
        return "its score predates the code version in the key, session 14"
    was = ", ".join(f"{k} {one_line(str(old.get(k)))[:20]}" for k in now)
    return f"scored by other code ({was}; this is {', '.join(f'{k} {v}' for k, v in now.items())})"


def settings_of(specs: list[str], settings: dict, old: object) -> dict:
    """This command's settings, with the earlier file's values for those none of its tasks reads:
    `--tasks ppl:v.txt` (where --limit is refused) after `--tasks copa,ppl:v.txt --limit 50` is the
    same settings, so copa's score stays and v.txt's is taken; it replaced the file."""
    read = set().union(*(read_settings(s) for s in specs)) | {"world_size"}
    old = old if isinstance(old, dict) else {}
    return {k: v if k in read or k not in old else old[k] for k, v in settings.items()}


def settings_change(old: object, new: dict) -> str:
    """The settings that differ, `limit 500 -> 200`, for the line that replaces a file's results."""
    old = old if isinstance(old, dict) else {}

    def norm(k: str, v):  # limit 0 and no limit both mean every example
        return (v or None) if k == "limit" else v

    def shown(k: str, v) -> str:  # the file may be someone else's: a short value
        return "all" if k == "limit" and not v else str(v)[:40]

    diff = [f"{k} {shown(k, old.get(k))} -> {shown(k, v)}" for k, v in new.items()
            if k != "world_size" and norm(k, old.get(k)) != norm(k, v)]
    return f"other settings ({', '.join(diff)})" if diff else "other settings"
