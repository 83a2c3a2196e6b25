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
from dataclasses import dataclass
from pathlib import Path

from pretrain.errors import UserError, did_you_mean
from pretrain.untrusted import load_json, load_toml


@dataclass(frozen=True)
class GPU:
    """One accelerator and its node. Bandwidths in GB/s (1e9 bytes), peaks in TFLOP/s (1e12), memory
    in GB, latencies in microseconds, efficiencies as shares of the datasheet figure. The efficiency
    fields are what `pretrain plan --calibrate` refits from measured runs."""

    name: str
    bf16_tflops: float
    fp8_tflops: float  # 0 when the chip has no fp8 tensor cores
    memory_gb: float
    hbm_tbps: float
    nvlink_gbps: float  # bidirectional total per GPU (datasheet)
    scaleout_gbps: float = 50.0  # 400 Gb/s NIC per GPU, typical of H100-class clusters
    gpus_per_node: int = 8
    sms: int = 132  # streaming multiprocessors: the GEMM tiles of one wave
    gemm_efficiency: float = 0.80  # share of peak a large, well-shaped bf16 GEMM sustains
    attention_efficiency: float = 0.40  # share of peak a fused (flash) attention kernel sustains, fwd+bwd
    hbm_efficiency: float = 0.80  # share of HBM bandwidth element-wise kernels reach
    nvlink_efficiency: float = 0.80  # NCCL bus bandwidth / one direction of NVLink, large messages
    nic_efficiency: float = 0.85  # NCCL bus bandwidth / NIC line rate across nodes, large messages
    intra_latency_us: float = 10.0  # one collective inside a node, small message
    inter_latency_us: float = 8.0  # one step (tree level) of a collective across nodes
    overlap_sm_share: float = 0.15  # compute slowdown while a collective runs beside it (its SMs)
    launch_us: float = 5.0  # host overhead per kernel launched (eager PyTorch on a GPU)

    @property
    def peak_flops(self) -> float:
        return self.bf16_tflops * 1e12

    @property
    def memory_bytes(self) -> float:
        """HBM sizes are printed in binary units: an "80 GB" A100 or H100 shows 81,920 or 81,559 MiB
        in nvidia-smi, i.e. 80 GiB (85.9e9 bytes)."""
        return self.memory_gb * 2**30

    @property
    def intra_node_bw(self) -> float:
        """Bytes/s one GPU can send to its node peers (one direction of NVLink)."""
        return self.nvlink_gbps * 1e9 / 2

    @property
    def inter_node_bw(self) -> float:
        """Bytes/s one GPU can send across nodes (its NIC)."""
        return self.scaleout_gbps * 1e9


# Sources of the efficiency constants (each a measurement, not a fit to the runs we check against):
# - gemm_efficiency: the largest bf16 GEMM throughput found by a shape sweep ("maximum achievable
#   matmul FLOPS", S. Bekman, Machine Learning Engineering, 2024): A100 SXM ~268 of 312 TFLOP/s
#   (0.86), H100 SXM ~792 of 989 (0.80), MI300X ~782 of 1307 (0.60); H200 is H100's chip, B200 taken
#   at H100's share until measured.
# - attention_efficiency: FlashAttention-2 forward+backward, head dim 128, long sequences (Dao 2023,
#   Fig. 4-6): ~190 of 312 TFLOP/s on A100 (0.60), ~335 of 989 on H100 (0.34).
# - hbm_efficiency: stream-style copy kernels reach ~80% of datasheet HBM bandwidth (NVIDIA
#   Nsight/“bandwidthTest” figures; A100 ~1.6 of 2.0 TB/s, H100 ~2.7 of 3.35 TB/s).
# - nvlink_efficiency: nccl-tests all_reduce bus bandwidth on DGX A100 ~230 GB/s of 300 per direction
#   (0.77), DGX H100 ~360 of 450 (0.80) without NVLink SHARP.
# - nic_efficiency: nccl-tests across nodes on 200/400 Gb/s InfiniBand reach ~85% of line rate.
# - latencies: nccl-tests small-message all_reduce ~10 us inside a DGX node; ~8 us per tree level
#   (or ring step) across InfiniBand nodes.
# - overlap_sm_share: NCCL runs a collective as one thread block per channel, 16-32 channels on
#   A100/H100 across nodes (NCCL_MIN/MAX_NCHANNELS), i.e. ~15-25% of 108/132 SMs taken from the GEMMs
#   it overlaps; we take the low end, 0.15.
# - launch_us: a CUDA kernel launch costs ~5 us of host time (NVIDIA's CUDA best-practices guide);
#   eager PyTorch issues ~60 kernels per transformer block per micro-batch, forward and backward.
#   A CPU "GPU" entry (or a calibrated one) carries its own framework overhead here.
# - h100-hbm2e: Meta's Grand Teton H100 (torchtitan docs/performance.md and its elastic-scaling
#   benchmarks, 2024-25): 96 GB HBM2e at 2.4 TB/s, a 500 W power limit instead of the SXM's 700 W,
#   400 Gb/s RDMA per GPU. torchtitan states its dense peak lies "between SXM and NVL" and is not
#   known; we take the midpoint of the two datasheets' dense bf16 figures, (989 + 835) / 2 = 912.
GPUS: dict[str, GPU] = {
    g.name: g
    for g in (
        # A100 clusters (DGX A100) have a 200 Gb/s HDR NIC per GPU: 25 GB/s.
        GPU("a100-40gb", 312, 0, 40, 1.555, 600, scaleout_gbps=25, sms=108, gemm_efficiency=0.86,
            attention_efficiency=0.60, nvlink_efficiency=0.77),
        GPU("a100-80gb", 312, 0, 80, 2.039, 600, scaleout_gbps=25, sms=108, gemm_efficiency=0.86,
            attention_efficiency=0.60, nvlink_efficiency=0.77),
        GPU("h100", 989, 1979, 80, 3.35, 900, attention_efficiency=0.34),
        GPU("h100-hbm2e", 912, 1824, 96, 2.4, 900, attention_efficiency=0.34),
        GPU("h200", 989, 1979, 141, 4.8, 900, attention_efficiency=0.34),
        GPU("b200", 2250, 4500, 180, 8.0, 1800, sms=148, attention_efficiency=0.34),
        GPU("mi300x", 1307, 2615, 192, 5.3, 896, sms=304, gemm_efficiency=0.60, attention_efficiency=0.30),
    )
}
ALIASES = {"a100": "a100-80gb", "a100-40": "a100-40gb", "a100-80": "a100-80gb", "h100-sxm": "h100",
           "h100-96gb": "h100-hbm2e",
           "grand-teton": "h100-hbm2e"}


def get_gpu(name: str, table: dict[str, GPU] | None = None) -> GPU:
    table = GPUS if table is None else table
    key = ALIASES.get(name.lower(), name.lower())
    if key not in table:
        raise UserError(f"unknown GPU {name!r}{did_you_mean(key, [*table, *ALIASES])}; known: "
                        f"{', '.join(table)} (or pass --hardware FILE)")
    return table[key]


def load_table(path: str | Path) -> dict[str, GPU]:
    """The built-in table updated from a TOML/JSON file (see the module docstring)."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"hardware file not found: {p}")
    data = load_json(p, what="hardware table") if p.suffix == ".json" else load_toml(p, what="hardware table")
    if not isinstance(data, dict):
        raise UserError(f"{p}: expected a table of GPUs")
    table = dict(GPUS)
    fields = {f.name for f in dataclasses.fields(GPU)} - {"name"}
    for name, values in data.items():
        if not isinstance(values, dict):
            raise UserError(f"{p}: entry {name!r} must be a table of fields")
        unknown = set(values) - fields
        if unknown:
            raise UserError(f"{p}: entry {name!r}: unknown fields "
                            f"{', '.join(sorted(unknown))}; known: {', '.join(sorted(fields))}")
        for field, value in values.items():
            ok = isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
            if not ok or (field not in ("fp8_tflops",) and value == 0) or (
                    field.endswith("_efficiency") and value > 1):
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
