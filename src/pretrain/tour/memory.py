"""Section 2 of the tour, the memory bill: 16 bytes of training state per parameter, the activations
of a 7B model's layers, and ZeRO's state per GPU (all from `plan.memory`)."""

from __future__ import annotations

from pretrain.tour.parts import Part, Section, Table


def _memory(sec: Section) -> None:
    from pretrain.plan.memory import (
        activation_bytes_per_layer,
        inference_weight_bytes,
        training_state_bytes,
        zero_memory_per_gpu,
    )

    sec.values["state_bytes_per_param"] = training_state_bytes(1)
    sec.values["state_7b_gb"] = training_state_bytes(7e9) / 1e9
    sec.values["inference_7b_gb"] = inference_weight_bytes(7e9) / 1e9
    L, s, b, h, a = 32, 4096, 1, 4096, 32
    acts = {
        "stored naively": activation_bytes_per_layer(s, b, h, a) * L / 1e9,
        "no stored attention scores": activation_bytes_per_layer(s, b, h, a, flash=True) * L / 1e9,
        "activation checkpointing": activation_bytes_per_layer(s, b, h, a, recompute="full") * L / 1e9,
    }
    sec.values["activations_7b_gb"] = acts
    # The lesson rounds s·b·h to 16.8 million before multiplying by 194 bytes: 3.26 GB per layer;
    # unrounded it is 3.2548 GB.
    sbh_rounded = round(s * b * h / 1e5) * 1e5
    per_layer = activation_bytes_per_layer(s, b, h, a)
    sec.values["activations_per_layer_gb"] = per_layer / 1e9
    sec.values["activations_per_layer_lesson_gb"] = per_layer / (s * b * h) * sbh_rounded / 1e9
    zero = [zero_memory_per_gpu(7.5e9, stage, 64) / 1e9 for stage in range(4)]
    sec.values["zero_7.5b_64gpus_gb"] = zero
    sec.tables.append(
        Table(
            "2. Training state of a 7B model (Adam, mixed precision)",
            ["what", "GB"],
            [
                ["weights + gradients + master + Adam (16 B/param)", f"{sec.values['state_7b_gb']:.1f}"],
                ["inference: bf16 weights only", f"{sec.values['inference_7b_gb']:.1f}"],
            ],
        )
    )
    sec.tables.append(
        Table(
            "2. Activations, L=32 s=4096 b=1 h=4096 a=32",
            ["kept for backward", "GB"],
            [["one layer, stored naively (s·b·h rounded to 16.8M as the lesson does)",
              f"{sec.values['activations_per_layer_lesson_gb']:.2f}"],
             ["one layer, exact", f"{sec.values['activations_per_layer_gb']:.4f}"],
             # printed as the lesson rounds them (104.2, 18.3, 1.07): 18.25 read as a mismatch beside 18.3
             *[[k, f"{v:.1f}" if v > 10 else f"{v:.2f}"] for k, v in acts.items()]],
        )
    )
    sec.tables.append(
        Table(
            "3b. ZeRO: state per GPU, 7.5B parameters on 64 GPUs",
            ["stage", "GB"],
            [[st, f"{v:.1f}"] for st, v in enumerate(zero)],
        )
    )


PARTS: list[Part] = [(("pretrain.plan.memory",), _memory)]
