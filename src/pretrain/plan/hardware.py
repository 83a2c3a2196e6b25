"""The hardware table: dense peak FLOP/s, memory, HBM and link bandwidths per accelerator, and a cluster
(GPUs per node, scale-out bandwidth). Overridable from a TOML or JSON file.

Peaks are dense tensor-core numbers from the vendors' datasheets (the 2:4-sparse figures printed
beside them are twice as large). NVLink figures are the datasheet's bidirectional totals; one
direction carries half, which is what a ring collective uses per GPU.

Override file (TOML or JSON), one table per GPU; unknown keys are errors:

    [h100]
    bf16_tflops = 989
    memory_gb = 80

    [my-gpu]          # a new name must give every field
    ...
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

from pretrain.errors import UserError


@dataclass(frozen=True)
class GPU:
    """One accelerator. Bandwidths in GB/s (1e9 bytes), peaks in TFLOP/s (1e12), memory in GB."""

    name: str
    bf16_tflops: float
    fp8_tflops: float  # 0 when the chip has no fp8 tensor cores
    memory_gb: float
    hbm_tbps: float
    nvlink_gbps: float  # bidirectional total per GPU (datasheet)
    scaleout_gbps: float = 50.0  # 400 Gb/s NIC per GPU, typical of H100-class clusters
    gpus_per_node: int = 8

    @property
    def peak_flops(self) -> float:
        return self.bf16_tflops * 1e12

    @property
    def memory_bytes(self) -> float:
        return self.memory_gb * 1e9

    @property
    def intra_node_bw(self) -> float:
        """Bytes/s one GPU can send to its node peers (one direction of NVLink)."""
        return self.nvlink_gbps * 1e9 / 2

    @property
    def inter_node_bw(self) -> float:
        """Bytes/s one GPU can send across nodes (its NIC)."""
        return self.scaleout_gbps * 1e9


GPUS: dict[str, GPU] = {
    g.name: g
    for g in (
        # A100 clusters (DGX A100) have a 200 Gb/s HDR NIC per GPU: 25 GB/s.
        GPU("a100-40gb", 312, 0, 40, 1.555, 600, scaleout_gbps=25),
        GPU("a100-80gb", 312, 0, 80, 2.039, 600, scaleout_gbps=25),
        GPU("h100", 989, 1979, 80, 3.35, 900),
        GPU("h200", 989, 1979, 141, 4.8, 900),
        GPU("b200", 2250, 4500, 180, 8.0, 1800),
        GPU("mi300x", 1307, 2615, 192, 5.3, 896),
    )
}
ALIASES = {"a100": "a100-80gb", "a100-40": "a100-40gb", "a100-80": "a100-80gb", "h100-sxm": "h100"}


def get_gpu(name: str, table: dict[str, GPU] | None = None) -> GPU:
    table = GPUS if table is None else table
    key = ALIASES.get(name.lower(), name.lower())
    if key not in table:
        raise UserError(f"unknown GPU {name!r}; known: {', '.join(table)} (or pass --hardware FILE)")
    return table[key]


def load_table(path: str | Path) -> dict[str, GPU]:
    """The built-in table updated from a TOML/JSON file (see the module docstring)."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"hardware file not found: {p}")
    try:
        text = p.read_text()
        data = json.loads(text) if p.suffix == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{p}: cannot parse hardware table: {e}") from e
    if not isinstance(data, dict):
        raise UserError(f"{p}: expected a table of GPUs")
    table = dict(GPUS)
    fields = {f.name for f in dataclasses.fields(GPU)} - {"name"}
    for name, values in data.items():
        if not isinstance(values, dict):
            raise UserError(f"{p}: entry {name!r} must be a table of fields")
        unknown = set(values) - fields
        if unknown:
            raise UserError(f"{p}: entry {name!r}: unknown fields {sorted(unknown)}; known: {sorted(fields)}")
        for field, value in values.items():
            ok = isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
            if not ok or (field != "fp8_tflops" and value == 0):
                raise UserError(f"{p}: entry {name!r}: {field} must be a positive number, got {value!r}")
        key = name.lower()
        try:
            if key in table:
                table[key] = dataclasses.replace(table[key], **values)
            else:
                table[key] = GPU(name=key, **values)
        except TypeError as e:
            raise UserError(f"{p}: entry {name!r}: {e}") from e
    return table
