"""The lesson's walkthrough (`pretrain tour`): every worked example of sections 1-5, computed by the
project's real modules, as named values and printable tables.

This module owns only the examples' *inputs* (a seven-page crawl written for the project, a small
bigram corpus, the lesson's counts and shapes) and the glue that feeds them to the library:
the belt (`pretrain.curate.pipeline`), MinHash/LSH (`curate.minhash`), the classifier
(`curate.classifier`), the mixture arithmetic (`tokens.mixture`), the planner (`plan.*`), the float
formats (`numerics`) and the trainer's pieces (`train.precision`, `train.stability`).

`run_all()` returns {section: {name: value}}; `build_sections()` also returns the tables.
A part whose module is not installed is left out and listed in `Section.missing`.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# ----------------------------------------------------------------------------- the crawl

_GLACIER = (
    "A glacier is a river of ice that moves so slowly that nobody can watch it happen. Snow piles up "
    "in the mountains year after year, and its own weight presses the lower layers into solid ice. "
    "Once the ice is thick enough, gravity pulls it down the valley at a few metres a day. Rocks "
    "frozen into its base scrape the ground like the teeth of a giant file, and over thousands of "
    "years they turn a narrow valley with steep sides into a broad one with a flat floor. When the "
    "climate warms and the glacier melts back, it leaves behind lakes, loose gravel and boulders that "
    "were carried far from their home. Much of the scenery of Norway and Scotland was shaped this way."
)

CRAWL: list[tuple[str, str]] = [
    ("clean English page: glaciers", _GLACIER),
    (
        "the same idea in German",
        "Ein Gletscher ist ein Fluss aus Eis, der sich so langsam bewegt, dass niemand es sehen kann. "
        "Jahr für Jahr fällt Schnee in den Bergen, und sein eigenes Gewicht presst die unteren Schichten "
        "zu festem Eis. Steine im Eis schleifen den Boden ab, und über Jahrtausende wird aus einem engen "
        "Tal ein breites Tal mit flachem Boden. Wenn der Gletscher schmilzt, bleiben Seen und Geröll zurück.",
    ),
    ("navigation bar", "Home | About the shop | Contact us | Terms | Sign in to your account"),
    (
        "page 0 re-crawled (capitals, spacing)",
        _GLACIER.lower().replace(". ", ".   ").replace(", ", ",\t") + "\n",
    ),
    ("hashtag spam", " ".join(["#sale #deal #free grab the lowest price in town today"] * 10)),
    (
        "scraper's copy of page 0 (edited)",
        _GLACIER.replace("a giant file", "a huge rasp") + " Read more on our website.",
    ),
    (
        "clean English page: honey bees",
        "Honey bees turn the nectar of flowers into honey through a patient process of sharing and drying. "
        "A forager sucks nectar into a special stomach and flies it back to the hive, where she passes it "
        "to a younger worker. That worker adds enzymes and spreads the liquid thinly over the wax cells of "
        "the comb. Thousands of bees then fan their wings to blow warm air across the cells until most of "
        "the water has gone. When the honey is thick enough, the bees seal each cell with a cap of fresh "
        "wax. A strong colony can store more honey in one summer than it needs to survive the winter.",
    ),
]

# The bigram corpus of section 1h (our own lines). Counted after each word of the boilerplate:
# tap -> below 1 of 2, below -> to 1 of 2, to -> join 1 of 3, join -> our 2 of 2, our -> mailing
# 1 of 3, mailing -> list 1 of 2: the same fractions as the lesson's line, so 1/72 once.
BOILERPLATE = "tap below to join our mailing list"
OTHER_LINES = [
    "tap the screen twice to open it",
    "scroll below the map to see our shop",
    "join our club today",
    "the mailing address is on the box",
    "rain fell all night",
]

# ----------------------------------------------------------------------------- results


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[Any]]


@dataclass
class Section:
    number: str
    title: str
    values: dict[str, Any] = field(default_factory=dict)
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


TITLES = {
    "1": "Where the data comes from, and how it is cleaned",
    "2": "Why one GPU is not enough: the memory bill",
    "3": "Parallelism: many GPUs, one model",
    "4": "Mixed precision: doing the maths in fewer bits",
    "5": "Stability at scale: spikes, clipping, checkpoints",
}


def module_available(name: str) -> bool:
    """True when `name` (e.g. "pretrain.curate.rules") can be imported in this install."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _part(sec: Section, needs: tuple[str, ...], fn: Callable[[Section], None]) -> None:
    """Run one worked example; leave it out (and say so) when a module it needs is not built yet."""
    absent = [m for m in needs if not module_available(m)]
    if absent:
        sec.missing.append(f"{fn.__name__.lstrip('_')}: needs {', '.join(absent)}")
        return
    fn(sec)


# ----------------------------------------------------------------------------- section 1


def belt_verdicts(pages: list[str] | None = None) -> list[str]:
    """Run the real belt (`pretrain.curate.pipeline.curate`) over the crawl; one verdict per page.

    Verdicts read "kept", "<step>: <reason>", or "<step>: <reason> of page N" for duplicates.
    The text input needs no URL filter or HTML extraction, so those two steps are switched off.
    """
    from pretrain.curate import io
    from pretrain.curate.executor import LocalExecutor
    from pretrain.curate.pipeline import CurateConfig, curate

    pages = [t for _, t in CRAWL] if pages is None else pages
    cfg = CurateConfig()
    cfg.url_filter.enabled = False
    cfg.extract.enabled = False
    with tempfile.TemporaryDirectory(prefix="pretrain-tour-") as tmp:
        src = Path(tmp) / "crawl.jsonl"
        io.write_bytes_atomic(
            src, b"".join(io.dumps_line({"id": f"page-{i}", "text": t}) for i, t in enumerate(pages))
        )
        curate([str(src)], Path(tmp) / "out", cfg, executor=LocalExecutor(1))
        verdicts = {}
        for path in sorted((Path(tmp) / "out" / "rejects").glob("*.jsonl.zst")):
            for rec in io.read_jsonl_zst(path):
                twin = f" of page {rec['kept_id'].split('-')[1]}" if rec.get("kept_id") else ""
                verdicts[rec["id"]] = f"{rec['step']}: {rec['reason']}{twin}"
    return [verdicts.get(f"page-{i}", "kept") for i in range(len(pages))]


def rule_failures(text: str) -> list[str]:
    """Every quality-rule family's verdict on one page, each family run on its own (the belt stops
    at the first), as "family: reason"; empty when all pass."""
    from pretrain.curate.document import Document
    from pretrain.curate.rules import RulesConfig, build_rule_steps, verdicts

    out = []
    for step in build_rule_steps(RulesConfig()):
        v = verdicts([Document(id="page", text=text)], [step])[0]
        if v is not None:
            out.append(f"{v[0]}: {v[1]}")
    return out


def _belt(sec: Section) -> None:
    verdicts = belt_verdicts()
    sec.values["verdicts"] = verdicts
    sec.values["kept_pages"] = [i for i, v in enumerate(verdicts) if v == "kept"]
    sec.values["rule_failures"] = [rule_failures(text) for _, text in CRAWL]
    sec.tables.append(
        Table(
            "1i. The belt on a seven-page crawl",
            ["page", "what it is", "verdict", "every quality rule it breaks"],
            [
                [i, role, v, ", ".join(f.split(": ")[1] for f in fails) or "-"]
                for i, ((role, _), v, fails) in enumerate(zip(CRAWL, verdicts, sec.values["rule_failures"]))
            ],
        )
    )
    sec.notes.append(f"{len(sec.values['kept_pages'])} of {len(CRAWL)} pages survive the belt.")


NAV_BAR = "Home | About us | Contact | Privacy policy | Log in"  # the lesson's 1b example


def gopher_on_nav_bar() -> dict[str, Any]:
    """1b: the Gopher quality rules on the navigation bar, measured by our rules' own tokenizer and
    thresholds (curate/rules.py; the values as curate/rule_values.py records them on rejects).

    The lesson counts each "|" as a word (12 words, mean length 3.3); datatrove's rules, which ours
    follow, leave symbol-only tokens out of the length and the mean (8 words, 4.5): same verdicts."""
    from pretrain.curate.document import Document
    from pretrain.curate.rule_values import measure
    from pretrain.curate.rules import GopherQualityFilter, RulesConfig, words_of

    step = GopherQualityFilter(RulesConfig())
    doc, cfg = Document(id="nav", text=NAV_BAR), step.cfg
    w = words_of(doc, cfg.profile)
    value = {r: measure(step, doc, r)["value"] for r in (
        "gopher_short_doc", "gopher_below_avg_threshold", "gopher_too_many_hashes",
        "gopher_below_alpha_threshold", "gopher_enough_stop_words")}
    letters = round(value["gopher_below_alpha_threshold"] * len(w.words))
    ok = {
        "length": cfg.min_doc_words <= value["gopher_short_doc"] <= cfg.max_doc_words,
        "mean word length": cfg.min_avg_word_length <= value["gopher_below_avg_threshold"]
        <= cfg.max_avg_word_length,
        "symbols per word": value["gopher_too_many_hashes"] <= cfg.max_symbol_word_ratio,
        "words containing a letter": value["gopher_below_alpha_threshold"] >= cfg.max_non_alpha_words_ratio,
        "common English words": value["gopher_enough_stop_words"] >= cfg.min_stop_words,
    }
    return {"tokens": len(w.words), "words": int(value["gopher_short_doc"]),
            "mean_word_length": float(w.lens.sum()) / len(w.words),
            "mean_word_length_rule": value["gopher_below_avg_threshold"],
            "symbols_per_word": value["gopher_too_many_hashes"], "letter_words": letters,
            "stop_words": int(value["gopher_enough_stop_words"]),
            "verdicts": {k: "pass" if v else "fail" for k, v in ok.items()}}


def _gopher_nav_bar(sec: Section) -> None:
    from pretrain.curate.rules import RulesConfig

    d, cfg = gopher_on_nav_bar(), RulesConfig()
    sec.values["gopher_nav_bar"] = d
    shown = [
        f"{d['tokens']} ({d['words']} without the '|')",
        f"{d['mean_word_length']:.1f} ({d['mean_word_length_rule']:.1f} without the '|')",
        f"{d['symbols_per_word']:g}",
        f"{d['letter_words']} of {d['tokens']} = {d['letter_words'] / d['tokens']:.0%}",
        "none" if not d["stop_words"] else str(d["stop_words"])]
    limits = [f"{cfg.min_doc_words} to {cfg.max_doc_words:,} words",
              f"{cfg.min_avg_word_length:g} to {cfg.max_avg_word_length:g} characters",
              f"at most {cfg.max_symbol_word_ratio:g}", f"at least {cfg.max_non_alpha_words_ratio:.0%}",
              f"at least {cfg.min_stop_words}"]
    rows = [[r, lim, v, ok] for (r, ok), lim, v in zip(d["verdicts"].items(), limits, shown)]
    sec.tables.append(Table(f"1b. Gopher quality rules on '{NAV_BAR}'",
                            ["rule", "keep only if", "the navigation bar", "verdict"], rows))


def _stop_words(sec: Section) -> None:
    from pretrain.curate.language import stopword_language

    lang, share = stopword_language("the cat is in the garden and it was happy")
    sec.values["stopword_example"] = (lang, share)
    sec.values["stopword_product_codes"] = stopword_language("SKU-4431 X99 blk/wht 12pk")[0]
    sec.notes.append(
        f"1a. Stop words: 'the cat is in the garden...' -> {lang} (share {share:.1f}); "
        f"'SKU-4431 X99 blk/wht 12pk' -> {sec.values['stopword_product_codes']}."
    )


# The lesson's worked example for the classifier (1c): six sentences of reference text and six of
# spam; the counts they give (77 good words, 45 bad, 80 distinct) are the ones its formulas use.
NB_GOOD = [
    "the river deposits sand at its mouth and over many years builds a delta",
    "a delta is formed where a river meets the sea and slows down",
    "the cell is the basic unit of life and every organism is made of cells",
    "light travels faster than sound which is why we see lightning before thunder",
    "the history of the city begins with a small settlement on the river",
    "photosynthesis converts light into chemical energy stored in sugar",
]
NB_BAD = [
    "click here buy now limited offer best price",
    "free free free win a prize click now",
    "best deals cheap price buy buy buy",
    "subscribe now click the link for free coupons",
    "hot singles best price click here now",
    "lose weight fast buy now free shipping",
]
NB_SENTENCES = ("the delta is formed when the river deposits sand over many years",
                "click here buy now best price free free free")


def _naive_bayes(sec: Section) -> None:
    from pretrain.curate.classifier import NaiveBayes

    nb = NaiveBayes.train(NB_GOOD, NB_BAD)
    sec.values["nb_counts"] = (nb.n_good, nb.n_bad, nb.vocab_size)
    sec.values["nb_vote_river"] = nb.vote("river")
    sec.values["nb_vote_click"] = nb.vote("click")
    sec.values["nb_sentence_scores"] = [nb.score(text) for text in NB_SENTENCES]
    sec.tables.append(
        Table(
            "1c. Naive Bayes votes, N_good=77, N_bad=45, V=80",
            ["word", "good", "bad", "vote"],
            [["river", 3, 0, f"{nb.vote('river'):+.3f}"], ["click", 0, 4, f"{nb.vote('click'):+.3f}"]],
        )
    )
    sec.tables.append(
        Table(
            "1c. Sentence scores (sum of the votes of known words)",
            ["sentence", "score"],
            [[text, f"{score:+.2f}"] for text, score in zip(NB_SENTENCES, sec.values["nb_sentence_scores"])],
        )
    )


def _jaccard_and_minhash(sec: Section) -> None:
    from pretrain.curate.minhash import MinHasher, estimate_jaccard, jaccard, shingles

    a, b = shingles("the cat sat on the mat", 2), shingles("the cat sat on a mat", 2)
    sec.values["jaccard_shared_union"] = (len(a & b), len(a | b))
    sec.values["jaccard_cat_mat"] = jaccard(a, b)
    # Every ordering of {a, b, c, d} as a hash ranking: A's and B's minima agree in J of them.
    sa, sb = {"a", "b", "c"}, {"b", "c", "d"}
    orders = list(itertools.permutations("abcd"))
    agree = sum(min(sa, key=o.index) == min(sb, key=o.index) for o in orders)
    sec.values["minhash_orders"] = (agree, len(orders))
    # Standard error of the k = 128 estimate: formula, and measured with the real MinHasher.
    sec.values["minhash_stderr_k128"] = math.sqrt(0.5 * 0.5 / 128)
    # Random 64-bit values stand in for shingle hashes (which are mixed, hence random-looking).
    pool = np.random.default_rng(0).integers(0, 2**63, 400, dtype=np.int64).astype(np.uint64)
    A, B = pool[:300], pool[100:]  # J(A, B) = 200 / 400
    est = [
        estimate_jaccard(h.signature(A), h.signature(B))
        for h in (MinHasher(bands=16, rows=8, seed=s) for s in range(200))
    ]
    sec.values["minhash_k128_measured_std"] = float(np.std(est))
    sec.values["minhash_k128_measured_mean"] = float(np.mean(est))
    sec.notes.append(
        f"1e-f. Jaccard('the cat sat on the mat', 'the cat sat on a mat') = {len(a & b)}/{len(a | b)}"
        f" = {jaccard(a, b):.2f}; the minima agree in {agree} of {len(orders)} orders; "
        f"k=128 error {sec.values['minhash_stderr_k128']:.3f} (measured over 200 seeds: "
        f"{sec.values['minhash_k128_measured_std']:.3f})."
    )


def _lsh(sec: Section) -> None:
    from pretrain.curate.minhash import (
        MinHasher,
        candidate_probability,
        estimate_jaccard,
        jaccard,
        shingle_hashes,
        shingles,
        threshold,
    )

    sec.values["lsh_p_0.8"] = float(candidate_probability(0.8, 20, 5))
    sec.values["lsh_p_0.3"] = float(candidate_probability(0.3, 20, 5))
    sec.values["lsh_threshold_20x5"] = threshold(20, 5)
    sec.values["lsh_p_0.8_fineweb_14x8"] = float(candidate_probability(0.8, 14, 8))
    sec.values["scraper_copy_jaccard"] = jaccard(shingles(CRAWL[0][1]), shingles(CRAWL[5][1]))
    sec.tables.append(
        Table(
            "1g. P(candidate) = 1 - (1 - s^r)^b",
            ["s", "20 bands x 5 rows", "14 x 8 (FineWeb)"],
            [
                [
                    s,
                    f"{float(candidate_probability(s, 20, 5)):.4f}",
                    f"{float(candidate_probability(s, 14, 8)):.4f}",
                ]
                for s in (0.3, 0.5, 0.7, 0.8, 0.9)
            ],
        )
    )
    # The scraper's copy against page 0: MinHash estimates with k hashes (real MinHasher, one row per band).
    ha, hb = shingle_hashes(CRAWL[0][1]), shingle_hashes(CRAWL[5][1])
    est = {
        k: estimate_jaccard(MinHasher(k, 1, seed=0).signature(ha), MinHasher(k, 1, seed=0).signature(hb))
        for k in (8, 32, 128, 512)
    }
    sec.values["scraper_copy_minhash_estimates"] = est
    sec.tables.append(
        Table(
            "1f. Page 0 vs the scraper's copy: MinHash estimates",
            ["hashes k", "true Jaccard", "estimate"],
            [[k, f"{sec.values['scraper_copy_jaccard']:.3f}", f"{e:.3f}"] for k, e in est.items()],
        )
    )
    sec.notes.append(
        f"1g. Steepest near (1/b)^(1/r) = {threshold(20, 5):.2f}; the scraper's copy shares "
        f"{sec.values['scraper_copy_jaccard']:.0%} of page 0's 5-word shingles."
    )


def bigram_verbatim_probability(copies: int) -> float:
    """P(a bigram model continues the boilerplate's first word into the whole line), trained on
    OTHER_LINES plus `copies` of BOILERPLATE (maximum-likelihood counts)."""
    pairs: Counter[tuple[str, str]] = Counter()
    for line in OTHER_LINES + [BOILERPLATE] * copies:
        ws = line.split()
        pairs.update(zip(ws, ws[1:]))
    after: Counter[str] = Counter()
    for (w, _), c in pairs.items():
        after[w] += c
    ws = BOILERPLATE.split()
    return math.prod(pairs[(x, y)] / after[x] for x, y in zip(ws, ws[1:]))


def _bigram(sec: Section) -> None:
    sec.values["bigram_once"] = bigram_verbatim_probability(1)
    sec.values["bigram_100"] = bigram_verbatim_probability(100)
    sec.tables.append(
        Table(
            f"1h. A bigram model reciting '{BOILERPLATE}'",
            ["copies", "P(whole line)"],
            [[c, f"{bigram_verbatim_probability(c):.3f}"] for c in (1, 10, 100, 1000)],
        )
    )


def _mixture_and_budget(sec: Section) -> None:
    from pretrain.plan.compute import chinchilla_tokens, gpu_hours, training_flops
    from pretrain.tokens.mixture import epochs_per_source

    weights = {"web": 0.80, "wiki": 0.05, "code": 0.15}
    epochs = epochs_per_source(weights, {"web": 900e9, "wiki": 20e9, "code": 150e9}, 1000e9)
    sec.values["mixture_epochs"] = epochs
    sec.tables.append(
        Table(
            "1j. Mixture over a 1,000B-token budget",
            ["source", "weight", "passes"],
            [[k, w, f"{epochs[k]:.2f}"] for k, w in weights.items()],
        )
    )
    d = chinchilla_tokens(7e9)
    c = training_flops(7e9, d)
    sec.values["chinchilla_tokens_7b"] = d
    sec.values["training_flops_7b"] = c
    sec.values["gpu_hours_7b_400tflops"] = gpu_hours(c, 400e12)
    sec.notes.append(
        f"1k. 7B: {d / 1e9:.0f}B tokens, {c:.3g} FLOPs, "
        f"{sec.values['gpu_hours_7b_400tflops']:,.0f} GPU-hours at 400 TFLOP/s."
    )


def refit_spreads(generations: int = 200, n: int = 20, seed: int = 0) -> list[float]:
    """Model collapse in miniature: fit a Gaussian by maximum likelihood, sample n from the fit, repeat."""
    rng = np.random.default_rng(seed)
    mu, sigma, out = 0.0, 1.0, []
    for _ in range(generations):
        x = rng.normal(mu, sigma, n)
        mu, sigma = float(x.mean()), float(x.std())  # ML variance divides by n: E = (n-1)/n * sigma^2
        out.append(sigma)
    return out


def _collapse(sec: Section) -> None:
    n, gens = 20, 200
    shrink = (n - 1) / n
    sec.values["collapse_shrink_per_generation"] = shrink
    sec.values["collapse_variance_after_200"] = shrink**gens
    sec.values["collapse_spread_after_200"] = math.sqrt(shrink**gens)
    runs = [refit_spreads(gens, n, seed)[-1] for seed in range(5)]
    sec.values["collapse_simulated_spreads"] = runs
    sec.notes.append(
        f"1l. Refit on 20 samples: variance x{shrink:.2f} per generation, "
        f"{shrink**gens:.4%} of it after 200 (spread {math.sqrt(shrink**gens):.4f}); "
        f"five simulated runs end at spreads {', '.join(f'{r:.1e}' for r in runs)}."
    )


def section_1() -> Section:
    sec = Section("1", TITLES["1"])
    _part(sec, ("pretrain.curate.pipeline", "pretrain.curate.rules", "pretrain.curate.dedup"), _belt)
    _part(sec, ("pretrain.curate.rules", "pretrain.curate.rule_values"), _gopher_nav_bar)
    _part(sec, ("pretrain.curate.language",), _stop_words)
    _part(sec, ("pretrain.curate.classifier",), _naive_bayes)
    _part(sec, ("pretrain.curate.minhash",), _jaccard_and_minhash)
    _part(sec, ("pretrain.curate.minhash",), _lsh)
    _part(sec, (), _bigram)
    _part(sec, ("pretrain.tokens.mixture", "pretrain.plan.compute"), _mixture_and_budget)
    _part(sec, (), _collapse)
    return sec


# ----------------------------------------------------------------------------- section 2


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
             *[[k, f"{v:.2f}"] for k, v in acts.items()]],
        )
    )
    sec.tables.append(
        Table(
            "3b. ZeRO: state per GPU, 7.5B parameters on 64 GPUs",
            ["stage", "GB"],
            [[st, f"{v:.1f}"] for st, v in enumerate(zero)],
        )
    )


def section_2() -> Section:
    sec = Section("2", TITLES["2"])
    _part(sec, ("pretrain.plan.memory",), _memory)
    return sec


# ----------------------------------------------------------------------------- section 3


def _mse_grad(xs: list[float], ys: list[float], w: float = 1.0) -> float:
    """d/dw of mean((w x - y)^2), by torch autograd."""
    import torch

    wt = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    x, y = torch.tensor(xs, dtype=torch.float64), torch.tensor(ys, dtype=torch.float64)
    torch.mean((wt * x - y) ** 2).backward()
    return float(wt.grad)


def _data_parallel(sec: Section) -> None:
    # 3a: the gradient of the whole batch equals the average of equal shards' gradients, which is
    # why data parallelism only needs an all-reduce (a mean) of the gradients.
    full = _mse_grad([1, 2, 3, 4], [2, 4, 6, 8])
    shards = (_mse_grad([1, 2], [2, 4]), _mse_grad([3, 4], [6, 8]))
    sec.values["dp_grad_full"] = full
    sec.values["dp_grad_shards"] = shards
    sec.values["dp_grad_shard_mean"] = sum(shards) / 2
    sec.notes.append(
        f"3a. Shard gradients {shards[0]:g} and {shards[1]:g} average to {sum(shards) / 2:g}, "
        f"the full batch's {full:g}."
    )


def _allreduce(sec: Section) -> None:
    from pretrain.plan.parallel import ring_allreduce_bytes

    sec.values["allreduce_4gpus_x"] = ring_allreduce_bytes(1.0, 4)
    sec.values["allreduce_14gb_8gpus_gb"] = ring_allreduce_bytes(14e9, 8) / 1e9
    sec.values["allreduce_14gb_1000gpus_gb"] = ring_allreduce_bytes(14e9, 1000) / 1e9
    sec.tables.append(
        Table(
            "3a. Ring all-reduce: each GPU sends 2(G-1)/G of the gradient",
            ["GPUs", "gradient", "sent per GPU"],
            [
                [4, "1 x", f"{sec.values['allreduce_4gpus_x']:.2f} x"],
                [8, "14 GB", f"{sec.values['allreduce_14gb_8gpus_gb']:.2f} GB"],
                [1000, "14 GB", f"{sec.values['allreduce_14gb_1000gpus_gb']:.2f} GB"],
            ],
        )
    )


def _tensor_parallel(sec: Section) -> None:
    # 3c: the two exact splits of X @ W. A sum of integer products: numpy is the reference here;
    # the trainer's TP (torch DTensor) is tested against a single process in tests/test_train_*.
    X, W = np.array([[1, 2]]), np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    by_cols = np.concatenate([X @ W[:, :2], X @ W[:, 2:]], axis=1)
    by_rows = X[:, :1] @ W[:1] + X[:, 1:] @ W[1:]
    sec.values["tp_full"] = (X @ W)[0].tolist()
    sec.values["tp_by_columns"] = by_cols[0].tolist()
    sec.values["tp_by_rows"] = by_rows[0].tolist()
    cols, rows = (X @ W[:, :2])[0].tolist(), (X @ W[:, 2:])[0].tolist()
    sec.notes.append(f"3c. X.W = {sec.values['tp_full']}: by columns {cols} next to {rows}; by rows "
                     f"{(X[:, :1] @ W[:1])[0].tolist()} + {(X[:, 1:] @ W[1:])[0].tolist()}: the same.")


def _pipeline(sec: Section) -> None:
    from pretrain.plan.parallel import idle_cells, pipeline_bubble, pipeline_schedule

    sec.values["bubble_4_stages"] = {m: pipeline_bubble(4, m) for m in (1, 8, 32)}
    grid = pipeline_schedule(4, 8)
    sec.values["schedule_4x8_idle_cells"] = (idle_cells(grid), len(grid) * len(grid[0]))
    sec.tables.append(
        Table(
            "3d. Pipeline bubble (p-1)/(m+p-1), 4 stages",
            ["micro-batches", "bubble"],
            [[m, f"{v:.3f}"] for m, v in sec.values["bubble_4_stages"].items()],
        )
    )
    idle, cells = sec.values["schedule_4x8_idle_cells"]
    sec.notes.append(f"3d. GPipe schedule, 4 stages x 8 micro-batches: {idle} of {cells} cells idle.")


def section_3() -> Section:
    sec = Section("3", TITLES["3"])
    _part(sec, ("torch",), _data_parallel)
    _part(sec, ("pretrain.plan.parallel",), _allreduce)
    _part(sec, (), _tensor_parallel)
    _part(sec, ("pretrain.plan.parallel",), _pipeline)
    return sec


# ----------------------------------------------------------------------------- section 4


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
        "4c. 1,000 updates of 1e-4 to 1.0: " + ", ".join(f"{k} ends at {v:.4f}" for k, v in acc.items())
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


def section_4() -> Section:
    sec = Section("4", TITLES["4"])
    _part(sec, ("pretrain.numerics",), _formats)
    _part(sec, ("pretrain.train.precision",), _loss_scaler)
    return sec


# ----------------------------------------------------------------------------- section 5


def _spikes(sec: Section) -> None:
    from pretrain.train.stability import detect_spikes

    losses = [3.0, 2.9, 2.8, 2.8, 2.7, 8.5, 4.0, 2.7]
    sec.values["spikes"] = detect_spikes(losses, factor=2.0, window=4)
    sec.notes.append(
        f"5a. Losses {losses}: spikes flagged at steps {sec.values['spikes']} (median rule, w=4, f=2)."
    )


def _clipping(sec: Section) -> None:
    import torch

    from pretrain.train.stability import clip_grad_norm_

    # Two "GPUs'" shards (1, 2) and (2, 4) of one gradient, as two parameters.
    params = [torch.zeros(2, requires_grad=True), torch.zeros(2, requires_grad=True)]
    for p, g in zip(params, ([1.0, 2.0], [2.0, 4.0])):
        p.grad = torch.tensor(g)
    norm = clip_grad_norm_(params, 1.0)
    sec.values["clip_norm"] = float(norm)
    sec.values["clip_shards_after"] = [[round(float(x), 6) for x in p.grad] for p in params]
    sec.notes.append(
        f"5b. Shards (1, 2) and (2, 4): norm {float(norm):g}; clipped at 1 -> "
        f"{sec.values['clip_shards_after']}."
    )


def bad_batch_losses(clip: float | None, steps: int = 60, bad_step: int = 30, lr: float = 0.1) -> list[float]:
    """SGD on y = 3x with one corrupted batch (labels -300x) at `bad_step`, clipped by the trainer's
    `clip_grad_norm_` when `clip` is set; the clean held-out loss after every step.

    Data come from numpy's default_rng(0) in the lesson's order (256 held-out x, then 32 per step),
    so the peak is the lesson's.
    """
    import torch

    from pretrain.train.stability import clip_grad_norm_

    rng = np.random.default_rng(0)
    x_eval = torch.from_numpy(rng.standard_normal(256))
    w = torch.tensor([2.5], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.SGD([w], lr=lr)
    losses = []
    for t in range(steps):
        x = torch.from_numpy(rng.standard_normal(32))
        y = -300 * x if t == bad_step else 3 * x
        opt.zero_grad()
        torch.mean((w * x - y) ** 2).backward()
        if clip is not None:
            clip_grad_norm_([w], clip)
        opt.step()
        with torch.no_grad():
            losses.append(float(torch.mean((w * x_eval - 3 * x_eval) ** 2)))
    return losses


def _bad_batch(sec: Section) -> None:
    free, clipped = bad_batch_losses(None), bad_batch_losses(1.0)
    sec.values["bad_batch_peak_no_clip"] = max(free[30:])
    sec.values["bad_batch_peak_clip_1"] = max(clipped[30:])
    sec.notes.append(
        f"5b. One corrupted batch at step 30: peak held-out loss {max(free[30:]):,.0f} without "
        f"clipping, {max(clipped[30:]):.4f} with the global norm clipped at 1."
    )


def _checkpoint_interval(sec: Section) -> None:
    from pretrain.plan.reliability import waste_fraction, young_interval

    rows = []
    for cost in (5.0, 1.0, 1 / 6):
        t = young_interval(cost, 180.0)
        rows.append((cost, t, waste_fraction(t, cost, 180.0)))
    sec.values["young_1min_180"] = rows[1][1:]
    sec.values["young_10s_180"] = rows[2][1:]
    sec.tables.append(
        Table(
            "5d. Checkpoint every sqrt(2CM), failures every 180 min",
            ["save time (min)", "best interval (min)", "time wasted"],
            [[f"{c:.3g}", f"{t:.2f}", f"{w:.1%}"] for c, t, w in rows],
        )
    )


def section_5() -> Section:
    sec = Section("5", TITLES["5"])
    _part(sec, ("pretrain.train.stability",), _spikes)
    _part(sec, ("pretrain.train.stability",), _clipping)
    _part(sec, ("pretrain.train.stability",), _bad_batch)
    _part(sec, ("pretrain.plan.reliability",), _checkpoint_interval)
    return sec


# ----------------------------------------------------------------------------- entry points

SECTIONS: dict[str, Callable[[], Section]] = {
    "1": section_1,
    "2": section_2,
    "3": section_3,
    "4": section_4,
    "5": section_5,
}


def build_sections(only: list[str] | None = None) -> list[Section]:
    """Compute the requested sections (all by default), in the lesson's order."""
    keys = list(SECTIONS) if not only else only
    return [SECTIONS[k]() for k in keys]


def run_all(only: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """{section number: {value name: value}} for every worked example of the lesson."""
    return {s.number: dict(s.values) for s in build_sections(only)}
