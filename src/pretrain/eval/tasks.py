"""Evaluation tasks read from local files: llm-foundry's ICL formats, MMLU and GSM8K, and k-shot prompts.

A file's format is recognized by its keys (one JSON object per line, .jsonl or .jsonl.gz):

| kind     | keys                                   | scored by                                     |
|----------|----------------------------------------|-----------------------------------------------|
| `mc`     | query, choices, gold                   | log-likelihood of " " + each choice: acc, acc_norm |
| `mmlu`   | subject, question, choices, answer (A-D) | the harness's MMLU prompt, choices " A".." D" |
| `schema` | context_options, continuation, gold    | the continuation after each context: acc      |
| `lm`     | context, continuation                  | greedy match of the continuation: acc; perplexity |
| `gsm8k`  | question, answer ("... #### 18")       | greedy generation, exact match of the number  |
|          | (or context, chain_of_thought, answer) |                                               |
| `qa`     | context, answer, aliases               | greedy generation, exact match of an alias    |

Names such as `arc_easy` or `mmlu` resolve to files of a benchmarks folder laid out like
../shared/data/benchmarks; any path to such a file works as a task too. Few-shot examples are drawn
from the other examples of the same file (MMLU: the dev split of the same subject) with a fixed
seed, so a rerun builds the same prompts. A record that is not valid JSON or lacks a key is skipped
and counted, never fatal.
"""

from __future__ import annotations

import gzip
import os
import random
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pretrain.errors import UserError

# task name -> file under the benchmarks folder
KNOWN = {
    "arc_easy": "llm-foundry/arc_easy.jsonl", "arc_challenge": "llm-foundry/arc_challenge.jsonl",
    "boolq": "llm-foundry/boolq.jsonl", "commonsense_qa": "llm-foundry/commonsense_qa.jsonl",
    "copa": "llm-foundry/copa.jsonl", "openbook_qa": "llm-foundry/openbook_qa.jsonl",
    "piqa": "llm-foundry/piqa.jsonl", "siqa": "llm-foundry/siqa.jsonl",
    "winogrande": "llm-foundry/winogrande.jsonl", "winograd_wsc": "llm-foundry/winograd_wsc.jsonl",
    "lambada_openai": "llm-foundry/lambada_openai.jsonl", "jeopardy": "llm-foundry/jeopardy_all.jsonl",
    "triviaqa": "llm-foundry/triviaqa_sm_sub.jsonl", "gsm8k": "gsm8k/test.jsonl",
    "hellaswag_small": "llm-foundry/tests-small/hellaswag_small.jsonl",
    "mmlu": "mmlu/mmlu-val.jsonl", "mmlu_test": "mmlu/mmlu-test.jsonl.gz",
}
MMLU_DEV = "mmlu/mmlu-dev.jsonl"
# Where each file comes from (nothing is downloaded: a missing one is named with its origin). The
# llm-foundry files are MosaicML's ICL sets as published; MMLU is hendrycks/test's CSVs as JSON lines.
_FOUNDRY = "github.com/mosaicml/llm-foundry, scripts/eval/local_data/"
_FOUNDRY_DIRS = {"world_knowledge": ("arc_easy", "arc_challenge", "triviaqa_sm_sub", "jeopardy_all"),
                 "commonsense_reasoning": ("piqa", "commonsense_qa", "openbook_qa", "copa", "siqa"),
                 "language_understanding": ("winogrande", "lambada_openai", "winograd_wsc"),
                 "reading_comprehension": ("boolq",)}
_MMLU = ("github.com/hendrycks/test, data/{split}/*.csv as JSON lines of subject, question, choices, "
         "answer (docs/evaluation.md)")
ORIGINS = {
    **{f"llm-foundry/{n}.jsonl": f"{_FOUNDRY}{d}/{n}.jsonl" for d, ns in _FOUNDRY_DIRS.items() for n in ns},
    "llm-foundry/tests-small/hellaswag_small.jsonl":
        "github.com/mosaicml/llm-foundry, tests/eval/local_data/hellaswag_small.jsonl",
    "gsm8k/test.jsonl": "github.com/openai/grade-school-math, grade_school_math/data/test.jsonl",
    "mmlu/mmlu-val.jsonl": _MMLU.format(split="val"), "mmlu/mmlu-test.jsonl.gz": _MMLU.format(split="test")
    + ", gzipped", MMLU_DEV: _MMLU.format(split="dev"),
}


def _missing(spec: str, benchmarks: str | Path, rel: str, why: str = "", note: str = "") -> UserError:
    """A named task's file is not under the benchmarks folder: the file, and where it comes from."""
    return UserError(f"task {spec!r}{why}: {Path(benchmarks) / rel}: no such file{note}; it is "
                     f"{ORIGINS[rel]}: save it there, or pass --benchmarks DIR laid out like "
                     "../shared/data/benchmarks")
LETTERS = "ABCD"
SHOT_SEP = "\n\n"  # the harness's default fewshot_delimiter
DELIM = " "  # the harness's default target_delimiter


@dataclass
class Task:
    """Examples of one file, normalized to their kind's fields, plus what was skipped and why."""

    name: str
    kind: str
    path: str
    docs: list[dict]
    shots_pool: list[dict] = field(default_factory=list)  # MMLU: the dev split
    skipped: dict[str, int] = field(default_factory=dict)
    # shots_pool by subject, in its order, built once: a filter per example was quadratic
    by_subject: dict[str | None, list[dict]] = field(default_factory=dict, repr=False, compare=False)


def _kind_of(rec: dict) -> str:
    keys = set(rec)
    if {"subject", "question", "choices", "answer"} <= keys:
        return "mmlu"
    if {"query", "choices", "gold"} <= keys:
        return "mc"
    if {"context_options", "continuation", "gold"} <= keys:
        return "schema"
    if {"context", "chain_of_thought", "answer"} <= keys or {"question", "answer"} <= keys:
        return "gsm8k"
    if {"context", "answer", "aliases"} <= keys:
        return "qa"
    if {"context", "continuation"} <= keys:
        return "lm"
    raise KeyError(f"unknown record keys {', '.join(sorted(map(str, keys)))}")


# Choices (or contexts) of one example scored at most: each is a forward pass of its own. The
# harness's tasks hold 2-5 (../shared/data/benchmarks: at most 5); an 8 MiB line of a task file
# someone sent holds 2 million, which would be hours of scoring for one example.
MAX_CHOICES = 1000


class TooManyChoices(ValueError):
    pass


def _options(values: object, what: str) -> list[str]:
    if not isinstance(values, list):
        raise TypeError(f"{what} is not a list")
    if len(values) > MAX_CHOICES:
        raise TooManyChoices(f"{len(values):,} {what}, over {MAX_CHOICES:,}")
    return [str(c) for c in values]


def _normalize(rec: dict, kind: str) -> dict:
    """The fields each kind uses; raises KeyError/ValueError/TypeError on a malformed record."""
    if kind == "mc":
        choices = _options(rec["choices"], "choices")
        gold = int(rec["gold"])
        if not 0 <= gold < len(choices):
            raise ValueError(f"gold {gold} outside {len(choices)} choices")
        return {"query": str(rec["query"]), "choices": choices, "gold": gold}
    if kind == "mmlu":
        gold = LETTERS.index(str(rec["answer"]).strip())
        choices = _options(rec["choices"], "choices")
        if len(choices) != 4:
            raise ValueError(f"{len(choices)} choices, expected 4")
        return {"subject": str(rec["subject"]), "question": str(rec["question"]), "options": choices,
                "choices": list(LETTERS), "gold": gold}
    if kind == "schema":
        ctxs = _options(rec["context_options"], "context options")
        gold = int(rec["gold"])
        if not 0 <= gold < len(ctxs):
            raise ValueError(f"gold {gold} outside {len(ctxs)} contexts")
        return {"contexts": ctxs, "continuation": str(rec["continuation"]), "gold": gold}
    if kind == "lm":
        return {"context": str(rec["context"]), "continuation": str(rec["continuation"])}
    if kind == "gsm8k":
        if "chain_of_thought" in rec:  # llm-foundry's split of the same test set
            q, cot, ans = str(rec["context"]), str(rec["chain_of_thought"]), str(rec["answer"])
        else:
            q, full = str(rec["question"]), str(rec["answer"])
            cot, _, ans = full.rpartition("####")
        return {"prompt": f"Question: {q.strip()}\nAnswer:", "solution": f"{cot.strip()}\n#### {ans.strip()}",
                "answers": [ans.strip().replace(",", "")]}
    if kind == "qa":  # llm-foundry's context is already "Question: ...\nAnswer:"
        return {"prompt": str(rec["context"]), "solution": str(rec["answer"]),
                "answers": [str(rec["answer"]), *_options(rec["aliases"], "aliases")]}
    raise ValueError(kind)


MAX_TASK_LINE = 8 * 1024 * 1024  # one example; the largest lm-eval ones are kilobytes
MAX_TASK_BYTES = 1 << 30  # decompressed bytes of one task file (a .gz bomb stops here)
# Examples of one task file, held as Python objects (~900 bytes each for a small one: 64 MiB of
# 45-byte lines, a 195 KB .gz, took 1.35 GB and 42 s; 1 GiB of them ~21 GB). ../shared/data's
# largest file holds 14,079 (MMLU test); lm-eval's largest sets ~100,000.
MAX_TASK_EXAMPLES = 500_000


def read_jsonl(path: Path, skipped: dict[str, int]) -> Iterator[dict]:
    """Records of a .jsonl(.gz) file, one at a time; bad lines (not JSON, nested too deep, not an
    object, over MAX_TASK_LINE: read through, never held) are skipped and counted by reason into
    `skipped`. A caller keeps what it needs of each record, never the record: an 8 MiB line of
    `{}` parses to ~200 MB of Python objects (held, 40 such lines in a 317 KB .gz took 7.7 GB)."""
    from pretrain import untrusted

    def bad(lineno: int, reason: str) -> None:
        key = "too_large" if reason.startswith(("line over", "stopped")) else "bad_json"
        skipped[key] = skipped.get(key, 0) + 1

    untrusted.check_file(path)  # not a FIFO or a device
    n = 0
    try:
        with open(path, "rb") as raw, (gzip.open(raw) if path.suffix == ".gz" else raw) as f:
            for lineno, line in untrusted.lines(f, MAX_TASK_LINE, bad, MAX_TASK_BYTES):
                try:  # invalid UTF-8 becomes U+FFFD, as before: one odd byte does not cost the example
                    rec = untrusted.json_line(line.decode("utf-8", errors="replace"))
                except ValueError:
                    rec = None
                del line
                if isinstance(rec, dict):
                    if n == MAX_TASK_EXAMPLES:
                        raise UserError(f"{path}: more than {MAX_TASK_EXAMPLES:,} examples "
                                        "(tasks.MAX_TASK_EXAMPLES; the largest benchmarks hold ~100,000): "
                                        "not a task file this reads whole; split it")
                    n += 1
                    yield rec
                else:
                    bad(lineno, "not a JSON object")
                rec = None  # not held while the next line is parsed
    except (OSError, EOFError, zlib.error) as e:  # a truncated or corrupt .gz: keep what was read
        skipped[f"unreadable: {str(e)[:60]}"] = 1


def load_file(path: str | Path, name: str | None = None, kind: str | None = None) -> Task:
    """The examples of one task file, each normalized as it is read (only its kind's fields kept)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"task file not found: {path}")
    skipped: dict[str, int] = {}
    docs = []
    for rec in read_jsonl(path, skipped):
        try:
            k = kind or _kind_of(rec)
            kind = k
            docs.append(_normalize(rec, k))
        except (KeyError, ValueError, TypeError) as e:
            reason = ("missing_key" if isinstance(e, KeyError) else
                      "too_many_choices" if isinstance(e, TooManyChoices) else "bad_value")
            skipped[reason] = skipped.get(reason, 0) + 1
        del rec
    if not docs:
        why = ", ".join(f"{n} {reason.replace('_', ' ')}" for reason, n in sorted(skipped.items()))
        raise UserError(f"{path}: no readable example ({sum(skipped.values())} skipped: {why or 'empty'})")
    return Task(name or path.name.split(".")[0], kind, str(path), docs, skipped=skipped)


def benchmark_places() -> list[tuple[str, str | None]]:
    """Where a benchmarks folder is looked for when none is given, in order: (the place as a user
    writes it, its path or None when the variable is unset). PRETRAIN_SHARED_DATA is honoured as
    by the rest of the project (tests, bench/): a git worktree has no ../shared beside it."""
    shared = os.environ.get("PRETRAIN_SHARED_DATA")
    return [("$PRETRAIN_BENCHMARKS", os.environ.get("PRETRAIN_BENCHMARKS") or None),
            ("$PRETRAIN_SHARED_DATA/benchmarks", str(Path(shared) / "benchmarks") if shared else None),
            ("../shared/data/benchmarks", "../shared/data/benchmarks")]


def _no_folder(spec: str, benchmarks: str | Path | None) -> UserError:
    """The folder a named task needs is missing: the one given, or every place looked."""
    if benchmarks is not None:
        return UserError(f"task {spec!r} needs the benchmarks folder: --benchmarks {benchmarks}: no such "
                         "folder (give one laid out like ../shared/data/benchmarks)")
    looked = "; ".join(f"{name} (unset)" if path is None else f"{name} (no such folder)" if path == name
                       else f"{name} = {path} (no such folder)" for name, path in benchmark_places())
    return UserError(f"task {spec!r} needs the benchmarks folder, found in none of: {looked}; "
                     f"pass --benchmarks DIR holding {KNOWN[spec]} ({ORIGINS[KNOWN[spec]]})")


def check_spec(spec: str, benchmarks: str | Path | None, shots: int = 0) -> None:
    """A task that cannot run says so before a model is loaded (a missing file is one line, not a
    traceback after the tasks before it were scored). MMLU with shots needs its dev split: without
    it the examples came from the scored split itself, which is not the harness's task."""
    kind, _, path = spec.partition(":") if spec[:4] in ("ppl:", "mem:") else ("", "", spec)
    if kind and not path.strip():  # Path("") is the working directory, read as a token folder
        raise UserError(f"task {spec!r} names no file: write {kind}:PATH (a text file or a token directory)")
    if kind or Path(spec).suffix in (".jsonl", ".gz"):
        if not Path(path).exists():
            raise UserError(f"task {spec!r}: {path}: no such file or directory{_nearest_file(Path(path))}")
    elif spec not in KNOWN:
        raise _unknown(spec)
    elif benchmarks is None or not Path(benchmarks).is_dir():
        raise _no_folder(spec, benchmarks)
    elif not (Path(benchmarks) / KNOWN[spec]).is_file():
        raise _missing(spec, benchmarks, KNOWN[spec])
    elif shots > 0 and spec.startswith("mmlu") and not (Path(benchmarks) / MMLU_DEV).is_file():
        raise _missing(spec, benchmarks, MMLU_DEV, f" with {shots} shots",
                       " (MMLU draws its few-shot examples from the dev split)")


def load_task(spec: str, benchmarks: str | Path | None) -> Task:
    """A task by name (under `benchmarks`) or by path to a .jsonl file."""
    if spec in KNOWN:
        if benchmarks is None or not Path(benchmarks).is_dir():
            raise _no_folder(spec, benchmarks)
        task = load_file(Path(benchmarks) / KNOWN[spec], spec)
        if task.kind == "mmlu" and (Path(benchmarks) / MMLU_DEV).is_file():  # check_spec: needed with shots
            task.shots_pool = load_file(Path(benchmarks) / MMLU_DEV, "mmlu_dev").docs
        return task
    if Path(spec).suffix in (".jsonl", ".gz"):
        return load_file(spec)
    raise _unknown(spec)


def _nearest_file(path: Path) -> str:
    """A file of that folder with a close name (`next_word.jsonl` -> next_words.jsonl), as a task
    name's typo gets the nearest name; the first 1,000 entries only, a folder may be huge."""
    import difflib
    import itertools

    try:
        names = [p.name for p in itertools.islice(path.parent.iterdir(), 1000)]
    except OSError:
        return ""
    near = difflib.get_close_matches(path.name, names, n=1, cutoff=0.8)
    return f" (did you mean {path.parent / near[0]}?)" if near else ""


def _unknown(spec: str) -> UserError:
    """A name outside KNOWN: the nearest one (a typo, or lm-evaluation-harness's `hellaswag` for the
    shipped `hellaswag_small`), and that nothing is downloaded."""
    import difflib

    near = difflib.get_close_matches(spec, KNOWN, n=1, cutoff=0.6)
    hint = f" (did you mean {near[0]}?)" if near else ""
    return UserError(f"unknown task {spec!r}{hint}: one of {', '.join(sorted(KNOWN))}, or a .jsonl path "
                     "(nothing is downloaded: lm-evaluation-harness's other tasks do not ship)")


# --- prompts --------------------------------------------------------------------------------------

def mmlu_prompt(doc: dict) -> str:
    """The harness's MMLU question (lm_eval/tasks/mmlu/default/_default_template_yaml)."""
    opts = "".join(f"\n{L}. {o.strip()}" for L, o in zip(LETTERS, doc["options"]))
    return f"{doc['question'].strip()}{opts}\nAnswer:"


def gen_prompt(doc: dict) -> str:
    return doc["prompt"]


def context_of(task: Task, doc: dict) -> str | list[str]:
    """The text the model reads before the scored part (schema: one per option)."""
    return {"mc": lambda: doc["query"], "mmlu": lambda: mmlu_prompt(doc), "schema": lambda: doc["contexts"],
            "lm": lambda: doc["context"], "gsm8k": lambda: gen_prompt(doc),
            "qa": lambda: gen_prompt(doc)}[task.kind]()


def solved(task: Task, doc: dict) -> str:
    """A worked example for few-shot prompts: the context followed by its right answer."""
    k = task.kind
    if k in ("mc", "mmlu"):
        return context_of(task, doc) + DELIM + doc["choices"][doc["gold"]]
    if k == "schema":
        return doc["contexts"][doc["gold"]] + DELIM + doc["continuation"]
    if k == "lm":
        return doc["context"] + DELIM + doc["continuation"]
    return gen_prompt(doc) + DELIM + doc["solution"]


def fewshot_prefix(task: Task, i: int, k: int, seed: int) -> str:
    """k solved examples other than example i, drawn with a generator seeded by (seed, i)."""
    if k <= 0:
        return ""
    doc = task.docs[i]
    rng = random.Random(f"{seed}:{i}")
    if task.shots_pool:
        if not task.by_subject:
            for d in task.shots_pool:
                task.by_subject.setdefault(d.get("subject"), []).append(d)  # a string (_normalize)
        pool = task.by_subject.get(doc.get("subject")) or task.shots_pool
        shots = rng.sample(pool, min(k, len(pool)))
    else:  # the other examples, unsliced: a copy per example was quadratic (500,000 examples: ~1.6 h).
        # random.sample picks positions from the length alone, so positions in range(n - 1) mapped
        # past i are the very draws of `rng.sample(docs[:i] + docs[i + 1:], k)`.
        n = len(task.docs) - 1
        shots = [task.docs[j + (j >= i)] for j in rng.sample(range(n), min(k, n))]
    head = ""
    if task.kind == "mmlu":  # the harness's description line
        head = f"The following are multiple choice questions (with answers) about " \
               f"{doc['subject'].replace('_', ' ')}.\n\n"
    return head + SHOT_SEP.join(solved(task, s) for s in shots) + SHOT_SEP


# --- answers of generation tasks -----------------------------------------------------------------

NUMBER = re.compile(r"-?[$0-9.,]{2,}|-?[0-9]+")


def gsm8k_answer(text: str) -> str:
    """The number a generation commits to: after '####' when present, else its last number."""
    m = re.search(r"#### (\-?[0-9\.\,]+)", text)
    found = m.group(1) if m else (NUMBER.findall(text) or [""])[-1]
    return found.replace(",", "").replace("$", "").rstrip(".")


def normalize_answer(s: str) -> str:
    """SQuAD's normalization: lower case, no punctuation, no articles, single spaces."""
    s = re.sub(r"[^\w\s]", "", s.lower())
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())
