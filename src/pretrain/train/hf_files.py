"""The files of a Hugging Face folder someone else wrote, read as hostile input.

Owns the checks every reader of such a folder (`model.init_from`, `pretrain eval HF_DIR`) makes
before trusting a byte of it: no symbolic link out of the folder (or out of its repository in
huggingface_hub's cache, whose snapshots link to `../../blobs/`), JSON files that are one bounded
object, and safetensors files whose header safetensors itself accepts (its errors, e.g. an offset
past the end of the file or a 100 MB header, become one line naming the file) holding floating-point
tensors only (int32 weights have the size of float32 ones and would be read as numbers).
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

from pretrain.errors import UserError

MAX_JSON_BYTES = 64 * 2**20  # config.json is ~1 KB, an index ~100 KB for a 400B model
FLOAT_DTYPES = ("F64", "F32", "F16", "BF16")


def _roots(folder: Path) -> list[Path]:
    """Where the folder's files may really live: itself, and for a huggingface_hub snapshot
    (`models--ORG--NAME/snapshots/REV`) the repository's `blobs/`, which its links point into."""
    real = folder.resolve()
    roots = [real]
    if real.parent.name == "snapshots":
        roots.append(real.parent.parent / "blobs")
    return roots


def check_links(folder: str | Path) -> None:
    """Refuse a folder whose entries are symbolic links to files outside it: reading one would read
    whatever file on this machine the folder's author named (a key, another model, /etc/passwd)."""
    folder = Path(folder)
    if not folder.is_dir():
        return  # the caller says what is missing
    roots = _roots(folder)
    for entry in folder.iterdir():
        if entry.is_symlink() and not any(entry.resolve().is_relative_to(r) for r in roots):
            raise UserError(f"{entry}: a symbolic link to {entry.resolve()}, outside the folder; "
                            "copy the file in (links out of a model folder are not followed)")


def read_json_object(path: Path) -> dict:
    """A JSON file that must be one object (config.json, an index), bounded in size and depth."""
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            raise UserError(f"{path}: {path.stat().st_size:,} bytes, more than a model's JSON file holds "
                            f"({MAX_JSON_BYTES:,})")
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as e:  # RecursionError: JSON nested thousands deep
        raise UserError(f"{path}: not JSON ({type(e).__name__}: {str(e)[:120]})") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read it ({e.strerror or e})") from None
    if not isinstance(obj, dict):
        raise UserError(f"{path}: not a JSON object (a {type(obj).__name__})")
    return obj


@contextmanager
def open_safetensors(path: Path):
    """`safe_open` with safetensors' own header checks reported as one line naming the file."""
    from safetensors import SafetensorError, safe_open

    try:
        handle = safe_open(str(path), framework="pt")
    except (SafetensorError, OSError) as e:
        raise UserError(f"{path}: not a readable safetensors file ({e})") from None
    with handle as f:
        yield f


def check_float(path: Path, key: str, dtype: str) -> None:
    """Weights are floating point; other dtypes of the same width would be read as numbers."""
    if dtype not in FLOAT_DTYPES:
        raise UserError(f"{path}: tensor {key!r} is stored as {dtype}, not a floating-point type "
                        f"({', '.join(FLOAT_DTYPES)})")
