"""The planner: pure arithmetic (no torch) over a model shape, a cluster and a budget.

The single source of FLOPs and memory numbers for the project. Modules:
shapes (ModelShape, presets, exact parameter counts), memory (training state, ZeRO, activations),
compute (FLOPs, MFU, Chinchilla, GPU-hours), parallel (collectives, bubble), hardware (GPU table),
reliability (MTBF, Young, Daly, waste), search (layout search), report (the plan as a dict),
render (rich tables), figures (PNG, matplotlib imported lazily).

The functions the lesson's walkthrough needs are re-exported here.
"""

from pretrain.plan.compute import (
    chinchilla_tokens,
    flops_per_token,
    gpu_hours,
    mfu,
    training_flops,
)
from pretrain.plan.memory import (
    activation_bytes_per_layer,
    inference_weight_bytes,
    training_state_bytes,
    zero_memory_per_gpu,
)
from pretrain.plan.parallel import pipeline_bubble, pipeline_schedule, ring_allreduce_bytes
from pretrain.plan.reliability import daly_interval, waste_fraction, young_interval
from pretrain.plan.shapes import PRESETS, ModelShape, get_shape

__all__ = [
    "PRESETS", "ModelShape", "activation_bytes_per_layer", "chinchilla_tokens", "daly_interval",
    "flops_per_token", "get_shape", "gpu_hours", "inference_weight_bytes", "mfu", "pipeline_bubble",
    "pipeline_schedule", "ring_allreduce_bytes", "training_flops", "training_state_bytes",
    "waste_fraction", "young_interval", "zero_memory_per_gpu",
]
