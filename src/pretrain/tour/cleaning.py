"""Section 1a-1c and 1i of the tour: the seven-page crawl (written for the project) through the real
belt (`curate.pipeline`), the Gopher rules on a navigation bar (`curate.rules`), stop-word language
ID (`curate.language`) and the naive Bayes classifier (`curate.classifier`) on the lesson's counts."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from pretrain.tour.parts import Part, Section, Table

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


PARTS: list[Part] = [
    (("pretrain.curate.pipeline", "pretrain.curate.rules", "pretrain.curate.dedup"), _belt),
    (("pretrain.curate.rules", "pretrain.curate.rule_values"), _gopher_nav_bar),
    (("pretrain.curate.language",), _stop_words),
    (("pretrain.curate.classifier",), _naive_bayes),
]
