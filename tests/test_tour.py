"""`pretrain tour` reproduces every worked number of the lesson (pretraining_lesson_rendered.txt).

Each case names the lesson's section and the value as the lesson prints it, compared at the
lesson's printed rounding. A value whose module is not installed yet is skipped, never faked.
"""

from __future__ import annotations

import json
import math

import pytest

from pretrain import tour
from pretrain.cli import main


@pytest.fixture(scope="module")
def sections() -> dict[str, tour.Section]:
    return {s.number: s for s in tour.build_sections()}


def r(n):
    return lambda v: round(v, n)


def gb1(v):
    return [round(x, 1) for x in v]


# (lesson section, section number, value name, transform, the lesson's number)
CASES = [
    ("1a stop words: 7 of 10 words, English, share 0.7", "1", "stopword_example", None, ("en", 0.7)),
    ("1a product codes match no list: unknown", "1", "stopword_product_codes", None, "unknown"),
    # 1b: the Gopher rules on the lesson's navigation bar (its table: 12, 3.3, 0, 8 of 12, none)
    ("1b navigation bar: 12 words, each '|' counted", "1", "gopher_nav_bar", lambda d: d["tokens"], 12),
    ("1b mean word length 3.3", "1", "gopher_nav_bar", lambda d: round(d["mean_word_length"], 1), 3.3),
    ("1b symbols per word 0", "1", "gopher_nav_bar", lambda d: d["symbols_per_word"], 0),
    ("1b words containing a letter: 8 of 12 = 67%", "1", "gopher_nav_bar",
     lambda d: (d["letter_words"], d["tokens"], f"{d['letter_words'] / d['tokens']:.0%}"), (8, 12, "67%")),
    ("1b common English words: none", "1", "gopher_nav_bar", lambda d: d["stop_words"], 0),
    ("1b verdicts: fail, pass, pass, fail, fail", "1", "gopher_nav_bar",
     lambda d: list(d["verdicts"].values()), ["fail", "pass", "pass", "fail", "fail"]),
    ("1c N_good=77, N_bad=45, V=80", "1", "nb_counts", None, (77, 45, 80)),
    ("1c vote for 'river' +1.158", "1", "nb_vote_river", r(3), 1.158),
    ("1c vote for 'click' -1.837", "1", "nb_vote_click", r(3), -1.837),
    ("1c sentence scores +8.52 and -16.49", "1", "nb_sentence_scores", lambda v: [round(x, 2) for x in v],
     [8.52, -16.49]),
    ("1e 3 shared shingles of 7", "1", "jaccard_shared_union", None, (3, 7)),
    ("1e J = 3/7 = 0.43", "1", "jaccard_cat_mat", r(2), 0.43),
    ("1f 12 of the 24 orders agree", "1", "minhash_orders", None, (12, 24)),
    ("1f error at k=128 about 0.044", "1", "minhash_stderr_k128", r(3), 0.044),
    ("1g P(candidate) at s=0.8, 20x5: 0.9996", "1", "lsh_p_0.8", r(4), 0.9996),
    ("1g P(candidate) at s=0.3, 20x5: 0.0475", "1", "lsh_p_0.3", r(4), 0.0475),
    ("1g steepest at (1/20)^(1/5) = 0.55", "1", "lsh_threshold_20x5", r(2), 0.55),
    ("quality_rules.md: FineWeb 14x8 at 0.8: 0.924", "1", "lsh_p_0.8_fineweb_14x8", r(3), 0.924),
    ("1h kept once: 1/72", "1", "bigram_once", lambda v: round(1 / v), 72),
    ("1h kept once: 0.014", "1", "bigram_once", r(3), 0.014),
    ("1h kept 100 times: 0.93", "1", "bigram_100", r(2), 0.93),
    (
        "1j epochs web 0.89, wiki 2.5, code 1.0",
        "1",
        "mixture_epochs",
        lambda d: {k: round(v, 2) for k, v in d.items()},
        {"web": 0.89, "wiki": 2.5, "code": 1.0},
    ),
    ("1k 140 billion tokens for 7B", "1", "chinchilla_tokens_7b", None, 140e9),
    ("1k 5.88e21 FLOPs", "1", "training_flops_7b", lambda v: f"{v:.2e}", "5.88e+21"),
    ("1k about 4,083 GPU-hours at 400 TFLOP/s", "1", "gpu_hours_7b_400tflops", round, 4083),
    ("1l shrink 0.95 per generation", "1", "collapse_shrink_per_generation", None, 0.95),
    (
        "1l 0.0035% of the variance after 200",
        "1",
        "collapse_variance_after_200",
        lambda v: f"{v:.4%}",
        "0.0035%",
    ),
    ("1l spread about 0.0059", "1", "collapse_spread_after_200", r(4), 0.0059),
    ("2 16 bytes per parameter", "2", "state_bytes_per_param", None, 16),
    ("2 112 GB of state for 7B", "2", "state_7b_gb", r(1), 112.0),
    ("2 14 GB to serve", "2", "inference_7b_gb", r(1), 14.0),
    ("2 3.26 GB of activations per layer", "2", "activations_per_layer_lesson_gb", r(2), 3.26),
    (
        "2 activations naive 104.2, no scores 18.3, checkpointed 1.07 GB",
        "2",
        "activations_7b_gb",
        lambda d: [round(v, 1 if v > 10 else 2) for v in d.values()],
        [104.2, 18.3, 1.07],
    ),
    (
        "3b ZeRO 7.5B on 64 GPUs: 120, 31.4, 16.6, 1.9 GB",
        "2",
        "zero_7.5b_64gpus_gb",
        gb1,
        [120.0, 31.4, 16.6, 1.9],
    ),
    ("3a full-batch gradient -15", "3", "dp_grad_full", None, -15.0),
    ("3a shard gradients -5 and -25", "3", "dp_grad_shards", None, (-5.0, -25.0)),
    ("3a their average -15", "3", "dp_grad_shard_mean", None, -15.0),
    ("3a 4 GPUs send 1.5 gradients' worth", "3", "allreduce_4gpus_x", None, 1.5),
    ("3a 14 GB on 8 GPUs: 24.5 GB", "3", "allreduce_14gb_8gpus_gb", r(2), 24.5),
    ("3a 14 GB on 1,000 GPUs: 27.97 GB", "3", "allreduce_14gb_1000gpus_gb", r(2), 27.97),
    ("3c X.W = [11, 14, 17, 20]", "3", "tp_full", None, [11, 14, 17, 20]),
    ("3c by columns", "3", "tp_by_columns", None, [11, 14, 17, 20]),
    ("3c by rows", "3", "tp_by_rows", None, [11, 14, 17, 20]),
    (
        "3d bubble 0.75, 0.273, 0.086",
        "3",
        "bubble_4_stages",
        lambda d: [round(v, 3) for v in d.values()],
        [0.75, 0.273, 0.086],
    ),
    ("3d 24 of the 88 cells empty", "3", "schedule_4x8_idle_cells", None, (24, 88)),
    ("4a bf16(1/3) = 0.333984375", "4", "bf16_one_third", None, 0.333984375),
    ("4a sign 0, exponent 125, fraction 43", "4", "bf16_one_third_fields", None, (0, 125, 43)),
    (
        "4a table: largest",
        "4",
        "format_table",
        lambda d: [f"{v[0]:.2g}" for v in d.values()],
        ["3.4e+38", "3.4e+38", "6.6e+04", "5.7e+04", "4.5e+02"],
    ),
    (
        "4a table: exact largest of fp16, E5M2, E4M3",
        "4",
        "format_table",
        lambda d: [v[0] for v in list(d.values())[2:]],
        [65504, 57344, 448],
    ),
    (
        "4a table: smallest normal",
        "4",
        "format_table",
        lambda d: [f"{v[1]:.2g}" for v in d.values()],
        ["1.2e-38", "1.2e-38", "6.1e-05", "6.1e-05", "0.016"],
    ),
    (
        "4a table: gap after 1",
        "4",
        "format_table",
        lambda d: [v[2] for v in d.values()],
        [2.0**-23, 0.0078125, 2.0**-10, 0.25, 0.125],
    ),
    ("4b fp16's smallest value 5.96e-8", "4", "fp16_min_subnormal", lambda v: f"{v:.2e}", "5.96e-08"),
    ("4b fp16(1e-8) = 0", "4", "fp16_of_1e-8", None, 0.0),
    ("4b stored as 6.5517e-4", "4", "fp16_of_1e-8_x65536", lambda v: f"{v:.4e}", "6.5517e-04"),
    ("4b divided back: 9.9972e-9", "4", "fp16_roundtrip_1e-8_x65536", lambda v: f"{v:.4e}", "9.9972e-09"),
    ("4b bf16(1e-8) = 1.0012e-8", "4", "bf16_of_1e-8", lambda v: f"{v:.4e}", "1.0012e-08"),
    (
        "4c fp32 ends at 1.1, bf16 and fp16 stay at 1.0",
        "4",
        "accumulate_1000x1e-4",
        lambda d: {k: round(v, 4) for k, v in d.items()},
        {"fp32": 1.1, "bf16": 1.0, "fp16": 1.0},
    ),
    (
        "4b skip and halve on overflow, double after a run of clean steps",
        "4",
        "scaler_events",
        None,
        [
            ("clean", "applied", 65536.0),
            ("clean", "applied", 65536.0),
            ("overflow", "skipped", 32768.0),
            ("clean", "applied", 32768.0),
            ("clean", "applied", 32768.0),
            ("clean", "applied", 65536.0),
        ],
    ),
    ("5a step 5 is flagged, step 6 is not", "5", "spikes", None, [5]),
    ("5b norm 5", "5", "clip_norm", None, 5.0),
    ("5b shards become (0.2, 0.4) and (0.4, 0.8)", "5", "clip_shards_after", None, [[0.2, 0.4], [0.4, 0.8]]),
    ("5b with clipping the loss rises to about 0.01", "5", "bad_batch_peak_clip_1", r(2), 0.01),
    ("5d T* = 18.97 min", "5", "young_1min_180", lambda v: round(v[0], 2), 18.97),
    ("5d waste 10.5%", "5", "young_1min_180", lambda v: round(v[1], 3), 0.105),
    ("5d 10-second save: 7.7 min", "5", "young_10s_180", lambda v: round(v[0], 1), 7.7),
    ("5d 10-second save: 4.3% waste", "5", "young_10s_180", lambda v: round(v[1], 3), 0.043),
]


def _value(sections, num: str, key: str):
    sec = sections[num]
    if key not in sec.values:
        # Only a part whose module is not installed may be absent.
        assert sec.missing, f"section {num} has no {key!r} and left nothing out"
        pytest.skip(f"section {num}: {'; '.join(sec.missing)}")
    return sec.values[key]


@pytest.mark.parametrize("where,num,key,fn,expected", CASES, ids=[c[0] for c in CASES])
def test_lesson_number(sections, where, num, key, fn, expected) -> None:
    v = _value(sections, num, key)
    assert (fn(v) if fn else v) == expected, where


def test_bad_batch_peak_over_6000_without_clipping(sections) -> None:
    # 5b: "the loss jumps to over 6,000 before slowly recovering"
    assert _value(sections, "5", "bad_batch_peak_no_clip") > 6000


def test_minhash_error_measured_with_the_real_hasher(sections) -> None:
    # 1f: sqrt(J(1-J)/k) = 0.044 at k = 128; over 200 seeds the measured spread must agree
    # (the standard error of a standard deviation from 200 draws is about 0.044 / sqrt(400) = 0.0022).
    std = _value(sections, "1", "minhash_k128_measured_std")
    mean = _value(sections, "1", "minhash_k128_measured_mean")
    assert abs(std - 0.044) < 0.008 and abs(mean - 0.5) < 0.01


def test_collapse_simulation_shrinks(sections) -> None:
    # 1l: a single run "collapses all the same": every simulated run ends far below spread 1.
    assert all(s < 0.05 for s in _value(sections, "1", "collapse_simulated_spreads"))


def test_scraper_copy_is_a_near_duplicate_by_jaccard(sections) -> None:
    # 1e: the scraper's edited copy shares most of its 5-word shingles (the lesson's: 78%).
    assert 0.7 < _value(sections, "1", "scraper_copy_jaccard") < 0.95


def test_minhash_estimates_approach_the_true_jaccard(sections) -> None:
    # 1f: "with k = 128 hashes ... typical error about sqrt(J(1 - J)/k)"; allow 4 standard errors.
    true = _value(sections, "1", "scraper_copy_jaccard")
    for k, est in _value(sections, "1", "scraper_copy_minhash_estimates").items():
        if k >= 128:
            assert abs(est - true) < 4 * math.sqrt(true * (1 - true) / k), (k, est, true)


def test_belt_on_the_crawl_keeps_two_of_seven(sections) -> None:
    # 1i: the roles and their verdicts: 0 kept; 1 language; 2 and 4 quality rules; 3 exact
    # duplicate of 0; 5 near duplicate of 0; 6 kept. "Two of seven survive."
    v = _value(sections, "1", "verdicts")
    assert _value(sections, "1", "kept_pages") == [0, 6], v
    assert v[1].startswith("language"), v
    quality = ("gopher", "c4", "fineweb")
    assert v[2].startswith(quality) and v[4].startswith(quality), v
    assert v[3].startswith("exact") and v[3].endswith("of page 0"), v
    assert v[5].startswith("near") and v[5].endswith("of page 0"), v


def test_every_rule_family_on_the_crawl(sections) -> None:
    # 1b/1i: the navigation bar breaks the length rule, the spam the symbols rule; clean pages pass.
    fails = _value(sections, "1", "rule_failures")
    assert "gopher_quality: gopher_short_doc" in fails[2], fails[2]
    assert "gopher_quality: gopher_too_many_hashes" in fails[4], fails[4]
    assert fails[0] == fails[3] == fails[5] == fails[6] == [], fails


def test_bigram_table_matches_exact_fractions() -> None:
    # 1h: (100/101)^3 (100/102)^2 (101/101) kept 100 times; 1/72 kept once.
    assert math.isclose(tour.bigram_verbatim_probability(1), 1 / 72)
    assert math.isclose(tour.bigram_verbatim_probability(100), (100 / 101) ** 3 * (100 / 102) ** 2)


def test_cli_json_one_section(capsys) -> None:
    assert main(["tour", "--section", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["4"]
    assert out["4"]["values"]["bf16_one_third"] == 0.333984375


def test_cli_tables_print(capsys) -> None:
    assert main(["tour", "--section", "3"]) == 0
    text = capsys.readouterr().out
    assert "27.97 GB" in text and "24 of 88 cells idle" in text
    # 3c was computed but printed only by --json
    assert "[11, 14] next to [17, 20]" in text and "[1, 2, 3, 4] + [10, 12, 14, 16]" in text


def test_the_worked_examples_print_numbers_not_python_lists(capsys) -> None:
    # `[5]` and `[[0.2, 0.4], [0.4, 0.8]]` were printed as Python wrote them (session 10's sweep); the
    # lesson says "step 5 is flagged" and writes the shards as (1, 2) and (2, 4)
    assert main(["tour", "--section", "5"]) == 0
    text = capsys.readouterr().out
    assert "5a. Losses 3.0, 2.9, 2.8, 2.8, 2.7, 8.5, 4.0, 2.7 at steps 0 to 7: step 5 is flagged (" in text
    assert "clipped at 1 they become (0.2, 0.4) and (0.4, 0.8)." in text
    assert "[" not in text, text


def test_figures_are_png_files(tmp_path) -> None:
    from pretrain.tour_figures import draw_figures

    written = draw_figures(tmp_path, only=["float_ranges", "master_weights"])
    assert [p.name for p in written] == ["float_ranges.png", "master_weights.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in written)
    assert "fp32 climbs to 1.1" in (tmp_path / "index.md").read_text()


def test_the_activation_table_prints_the_lessons_figures(sections) -> None:
    """Section 2's printed GB are the lesson's own (104.2, 18.3, 1.07), not 104.15 and 18.25, which a
    reader holding the lesson beside the terminal took for other numbers."""
    table = next(t for t in sections["2"].tables if t.title.startswith("2. Activations"))
    printed = {row[0]: row[1] for row in table.rows}
    names = ("stored naively", "no stored attention scores", "activation checkpointing")
    assert [printed[k] for k in names] == ["104.2", "18.3", "1.07"]


def test_the_checkpoint_table_prints_the_lessons_intervals(sections) -> None:
    """5d: the lesson says 18.97 minutes for a 1-minute save and 7.7 for a 10-second one; the table
    printed 7.75, which a newcomer read as a different number."""
    table = next(t for t in sections["5"].tables if t.title.startswith("5d."))
    assert [row[1] for row in table.rows[1:]] == ["18.97", "7.7"]


def test_piped_every_note_is_one_line(capsys, monkeypatch) -> None:
    # newcomer sweep (session 13): `pretrain tour | less` cut 5b's note at 120 columns, leaving
    # "1." alone on a line; each note the section computed is now one line of the output
    monkeypatch.delenv("COLUMNS", raising=False)
    assert main(["tour", "--section", "5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    notes = [n for n in tour.build_sections(["5"])[0].notes if len(n) > 120]
    assert notes, "a note longer than the table width, to be kept whole"
    for note in notes:
        assert f"  {note}" in lines


def test_section_picks_the_figures_too(tmp_path, capsys) -> None:
    # newcomer sweep (session 13): `tour --section 4 --figures DIR` printed section 4 and drew all
    # twelve figures; it draws the mixed-precision section's three (formats, loss scaling, master weights)
    pytest.importorskip("matplotlib")
    from pretrain.tour_figures import FIGURES, SECTION_OF

    assert set(SECTION_OF) == set(FIGURES)
    assert main(["tour", "--section", "4", "--figures", str(tmp_path)]) == 0
    drawn = sorted(p.stem for p in tmp_path.glob("*.png"))
    assert drawn == ["float_ranges", "loss_scaling", "master_weights"]
    assert capsys.readouterr().out.rstrip().endswith(f"3 figures written to {tmp_path}")
