"""Section 4 of the tour: float formats bit by bit, underflow and loss scaling, updates lost to
rounding (`pretrain.numerics`), and the trainer's dynamic loss scaler (`train.precision`)."""

from __future__ import annotations

from pretrain.tour.parts import Part, Section, Table


def _formats(sec: Section) -> None:
    from pretrain.numerics import (
        BF16,
        FORMATS,
        FP16,
        FP32,
        accumulate_updates,
        bit_fields,
        quantize,
        scaled_roundtrip,
    )

    sec.values["bf16_one_third"] = float(quantize(1 / 3, BF16))
    sec.values["bf16_one_third_fields"] = bit_fields(1 / 3, BF16)
    sec.values["format_table"] = {f.name: (f.max_value, f.min_normal, f.epsilon) for f in FORMATS}
    sec.values["fp16_min_subnormal"] = FP16.min_subnormal
    sec.values["fp16_of_1e-8"] = float(quantize(1e-8, FP16))
    sec.values["fp16_of_1e-8_x65536"] = float(quantize(1e-8 * 65536, FP16))
    sec.values["fp16_roundtrip_1e-8_x65536"] = float(scaled_roundtrip(1e-8, 65536, FP16))
    sec.values["bf16_of_1e-8"] = float(quantize(1e-8, BF16))
    sec.values["accumulate_1000x1e-4"] = {
        f.name: float(accumulate_updates(1.0, 1e-4, 1000, f)[-1]) for f in (FP32, BF16, FP16)
    }
    sec.tables.append(
        Table(
            "4a. The formats",
            ["format", "exp", "frac", "largest", "smallest normal", "gap after 1"],
            [
                [
                    f.name,
                    f.exp_bits,
                    f.man_bits,
                    f"{f.max_value:,.0f}" if f.max_value < 1e6 else f"{f.max_value:.2g}",
                    f"{f.min_normal:.2g}",
                    f"{f.epsilon:g}" if f.epsilon >= 0.1 else f"{f.epsilon:.2g}",
                ]
                for f in FORMATS
            ],
        )
    )
    s, e, m = sec.values["bf16_one_third_fields"]
    sec.notes.append(
        f"4a. bf16(1/3) = {sec.values['bf16_one_third']!r}: sign {s}, exponent {e}, fraction {m}."
    )
    sec.notes.append(
        f"4b. fp16(1e-8) = {sec.values['fp16_of_1e-8']}; x65536 stored as "
        f"{sec.values['fp16_of_1e-8_x65536']:.4e}, divided back: "
        f"{sec.values['fp16_roundtrip_1e-8_x65536']:.4e}; bf16(1e-8) = {sec.values['bf16_of_1e-8']:.4e}."
    )
    acc = sec.values["accumulate_1000x1e-4"]
    sec.notes.append(
        "4c. 1,000 updates of 1e-4 to 1.0: " + ", ".join(f"{k} ends at {v:.4f}" for k, v in acc.items()) + "."
    )


def _loss_scaler(sec: Section) -> None:
    from pretrain.train.precision import DynamicLossScaler

    scaler = DynamicLossScaler(enabled=True, init_scale=65536.0, growth_interval=3)
    rows = []
    for finite in (True, True, False, True, True, True):
        applied = scaler.update(finite)
        rows.append(
            ["clean" if finite else "overflow", "applied" if applied else "skipped", f"{scaler.scale:.0f}"]
        )
    sec.values["scaler_events"] = [(r[0], r[1], float(r[2])) for r in rows]
    sec.tables.append(
        Table(
            "4b. Dynamic loss scale (start 65536, double after 3 clean steps)",
            ["gradients", "step", "scale after"],
            rows,
        )
    )


PARTS: list[Part] = [
    (("pretrain.numerics",), _formats),
    (("pretrain.train.precision",), _loss_scaler),
]
