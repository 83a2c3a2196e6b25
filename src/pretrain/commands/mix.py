"""`pretrain mix`: what a mixture implies: tokens drawn and passes (epochs) over each source."""

from __future__ import annotations

import argparse

from pretrain.bounds import Number

HELP = "show a data mixture: tokens available, weight, tokens drawn, epochs per source"
DESCRIPTION = """\
Read mixture.toml and print, per source: tokens available, weight, tokens drawn and epochs, the
number of passes the mixture makes over the source: epochs_i = w_i * D / N_i (w_i its weight,
D the token budget, N_i its tokens). Small, valuable sources are often read more than once (said
"repeated" on their row); past about 4 epochs repeated data starts to be memorized, and the source
is flagged. With seq_len in the file, a source shorter than one sequence is refused, as the sampler
refuses it. Sources tokenized with different tokenizers are refused, as `pretrain train` refuses
them (their ids mean other strings).

mixture.toml:
  budget = 1e12            # training tokens D
  seq_len = 2048           # optional, for the trainer's sampler
  seed = 0                 # optional
  [sources.web]
  path = "tokens/web"      # a directory written by `pretrain tokenize` (relative to this file)
  weight = 0.80
  [sources.wiki]
  path = "tokens/wiki"
  weight = 0.05

After the table, the `--set` options that train on this mixture (`data.sources` and
`data.weights` from the file, paths as seen from here; `model.vocab_size` from the tokens;
`model.seq_len` and `data.seed` when the file sets them): `pretrain train` reads its data from the
recipe, not from this file, and the budget D is its train.steps x data.batch_size x model.seq_len
x processes.

Example:
  pretrain mix mixture.toml
  pretrain mix mixture.toml --json
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("mixture", metavar="MIXTURE.toml", help="the mixture file (layout above)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.add_argument("--warn-epochs", type=Number(float, gt=0, hi=1e6, why="epochs of a source"),
                   default=4.0, help="flag sources read more often (default 4)")


def run(args: argparse.Namespace) -> int:
    from pretrain.errors import DataError, UserError
    from pretrain.jsonout import dumps
    from pretrain.tokens.mixture import load_mixture, mixture_table

    mix = load_mixture(args.mixture)
    same_tokenizer(mix.sources)
    try:
        rows = mixture_table(mix, args.warn_epochs)
    except DataError as e:
        raise UserError(str(e)) from e
    total = sum(mix.weights.values())
    if args.json:
        print(dumps({"budget": mix.budget, "weights_sum": total, "sources": rows}, indent=2))
        return 0
    print(table_text(mix.budget, total, rows, args.warn_epochs))
    print(train_hint(mix))
    return 0


def train_hint(mix) -> str:
    """The `pretrain train` options that train on this mixture: the trainer reads `data.sources` and
    `data.weights` from its recipe, and a newcomer who wrote mixture.toml for `pretrain mix` had no
    line joining the two (the README's path trained on the shipped text)."""
    import shlex

    from pretrain.tokens.mixture import open_source

    sets = ["data.kind=tokens"]
    for name in mix.sources:
        sets += [f"data.sources.{name}={mix.sources[name]}", f"data.weights.{name}={mix.weights[name]:g}"]
    sets.append(f"model.vocab_size={max(open_source(n, p).vocab_size for n, p in mix.sources.items())}")
    if mix.seq_len_given:
        sets.append(f"model.seq_len={mix.seq_len}")
    if mix.seed:
        sets.append(f"data.seed={mix.seed}")
    options = " ".join(f"--set {shlex.quote(x)}" for x in sets)
    return (f"train on it: pretrain train RECIPE.toml {options}\n"
            f"(a budget of {mix.budget:,.0f} tokens is train.steps x data.batch_size x model.seq_len"
            " x processes)")


def table_text(budget: float, total: float, rows: list[dict], warn_epochs: float = 4.0) -> str:
    """The table `pretrain mix` prints (also what `pretrain demo` shows of `mix --json`). Source
    names are a mixture file's keys, anyone's: printed without their escape sequences."""
    from pretrain.untrusted import one_line

    lines = [f"budget D = {budget:,.0f} tokens"]
    if abs(total - 1) > 1e-9:  # the weight column is normalized: say so, or 3 and 1 read as a typo
        lines.append(f"weights sum to {total:g}, not 1: each source's share is its weight / {total:g}")
    lines.append(f"{'source':<16}{'available':>18}{'weight':>9}{'drawn':>20}{'epochs':>9}")
    for r in rows:
        repeated = f"  repeated: each token drawn {r['epochs']:.1f} times on average"
        flag = (f"  WARNING: over {warn_epochs:g} epochs, expect memorization" if r["warning"] else
                repeated if r.get("repeated") else "")
        lines.append(f"{one_line(r['source']):<16}{r['available']:>18,}{r['weight']:>9.3f}{r['drawn']:>20,.0f}"
                     f"{r['epochs']:>9.2f}{flag}")
    return "\n".join(lines)


def same_tokenizer(sources: dict) -> None:
    """Refuse sources whose manifests name different tokenizers, with train's message."""
    from pretrain.errors import UserError
    from pretrain.tokens.mixture import open_source

    shas = {n: open_source(n, p).tokenizer_sha256 for n, p in sorted(sources.items())}
    if len(set(shas.values())) > 1:
        detail = ", ".join(f"{n}={sha[:12]}" for n, sha in shas.items())
        raise UserError(f"mixture sources were tokenized with different tokenizers: {detail}")
