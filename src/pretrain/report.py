"""`pretrain report`: one self-contained HTML page about the outputs of the other commands.

This module owns the page: what each argument is (recognised by what it holds), the summary at the
top (what ran, headline numbers, links to the sections), the HTML helpers, and the numbers the
demo shares with the page (`tokens_per_s`, `plan_headline`). The sections themselves live in
report_corpus.py (curation, tokens, mixture) and report_run.py (plan, training run, evaluations).
Plots are matplotlib PNGs embedded as base64, so the page needs no network and no other file.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pretrain.curate import io as cio

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
header{background:#1d2330;color:#fff;padding:18px 32px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;color:#aab3c5;font-size:13px}
main{max-width:1100px;margin:0 auto;padding:16px 32px 48px}
section{background:#fff;border-radius:10px;box-shadow:0 1px 3px rgba(0,0,0,.08);
padding:18px 24px;margin:18px 0}
h2{font-size:18px;margin:0 0 12px}h3{font-size:15px;margin:16px 0 8px}
table{border-collapse:collapse;font-size:13px;width:100%}
th,td{padding:6px 10px;border-bottom:1px solid #e6e8ee;text-align:left;vertical-align:top}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.kpis{display:flex;gap:14px;flex-wrap:wrap;margin:6px 0 10px}
.kpi{background:#f0f3f8;border-radius:8px;padding:10px 16px;min-width:110px}
.kpi b{display:block;font-size:20px}.kpi span{font-size:12px;color:#5b6478}
.kpi.bad{background:#fdecea}.kpi.bad b{color:#b3261e}
img{max-width:100%}pre{background:#f0f3f8;padding:10px;border-radius:6px;white-space:pre-wrap;font-size:12px}
.snip{color:#5b6478;font-size:12px;font-weight:normal}.ev{color:#b3261e}
nav a{margin-right:14px;font-size:13px}.note{color:#5b6478;font-size:13px;margin:6px 0}
.figs{display:flex;flex-wrap:wrap;gap:10px}.figs img{max-width:49%}
td{overflow-wrap:break-word}td.u{overflow-wrap:anywhere;min-width:120px}td:first-child{white-space:nowrap}
.kpi.wide b{font-size:15px}
"""


@dataclass
class Section:
    """One block of the page; `facts` are its headline numbers, repeated in the summary."""

    id: str
    title: str
    kind: str
    source: str
    body: str
    facts: list[tuple[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # what went wrong, for the summary

    def html(self) -> str:
        src = f" <span class='snip'>{esc(self.source)}</span>" if self.source else ""
        return f"<section id='{self.id}'><h2>{esc(self.title)}{src}</h2>{self.body}</section>"


# ----------------------------------------------------------------------------- shared numbers


def tokens_per_s(train: list[dict]) -> float | None:
    """Training throughput, one definition for the report, the demo summary and its status line:
    the median over logged steps of the trainer's per-step figure (tokens in the step / its wall
    time). The median leaves out the slow first steps (allocation, warm-up) a mean would include."""
    tps = sorted(float(r["tokens_per_s"]) for r in train if r.get("tokens_per_s"))
    if not tps:
        return None
    mid = len(tps) // 2
    return tps[mid] if len(tps) % 2 else (tps[mid - 1] + tps[mid]) / 2


def plan_headline(plan: dict) -> dict:
    """Days, GPU-hours, layout and MFU of a `pretrain plan --json` object (its `headline` when it
    has one, else read from its time and layout sections)."""
    head = dict(plan.get("headline") or {})
    time_, layout, cluster = plan.get("time") or {}, plan.get("layout") or {}, plan.get("cluster") or {}
    head.setdefault("days", time_.get("calendar_days", time_.get("compute_days")))
    head.setdefault("gpu_hours", time_.get("gpu_hours"))
    head.setdefault("layout", layout.get("label"))
    head.setdefault("mfu", time_.get("mfu", layout.get("mfu")))
    head.setdefault("gpus", cluster.get("n_gpus"))
    head.setdefault("gpu", cluster.get("gpu"))
    head.setdefault("model", (plan.get("model") or {}).get("name"))
    head.setdefault("tokens", (plan.get("budget") or {}).get("tokens"))
    return head


def headline_text(h: dict) -> str:
    """One line: 'plan: llama-3-8b on 64 h100, 1e+12 tokens: 21.1 days, 32,381 GPU-hours, ...'."""
    parts = []
    if h.get("days") is not None:
        parts.append(f"{h['days']:,.1f} days")
    if h.get("gpu_hours") is not None:
        parts.append(f"{h['gpu_hours']:,.0f} GPU-hours")
    if h.get("mfu") is not None:
        parts.append(f"MFU {h['mfu']:.1%}")
    if h.get("layout"):
        parts.append(f"layout {h['layout']}")
    who = f"{h.get('model') or 'model'} on {h.get('gpus') or '?'} {h.get('gpu') or 'GPUs'}"
    tokens = f", {h['tokens']:.3g} tokens" if h.get("tokens") else ""
    return f"plan: {who}{tokens}: " + (", ".join(parts) or "no layout fits")


# ----------------------------------------------------------------------------- HTML helpers


def esc(v: Any) -> str:
    return html.escape(str(v))


# A cell, card or line of text from someone's file is shown to this many characters: stats.json
# may hold 64 MiB, and a reject reason, file name and record id of 20 MB each made a 70 MB page.
MAX_CELL = 1_000


def clip(text: str, n: int = MAX_CELL) -> str:
    """`text` cut to `n` characters, saying how long it was."""
    return text if len(text) <= n else f"{text[:n]}… ({len(text):,} characters)"


def fmt(v: Any) -> str:
    """A cell: thousands separators, 4 significant digits, '—' for missing."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.0f}" if 1e3 <= abs(v) < 1e9 else f"{v:,.4g}"
    if isinstance(v, int):
        return f"{v:,}"
    return esc(clip(str(v)))


def table(headers: list[str], rows: list[list[Any]], numeric: set[int] = frozenset(),
          wrap: set[int] = frozenset()) -> str:
    """`numeric` columns align right; `wrap` columns (URLs, paths) may break anywhere."""
    def cls(i: int) -> str:
        return ' class="n"' if i in numeric else ' class="u"' if i in wrap else ""

    th = "".join(f"<th{cls(i)}>{esc(h)}</th>" for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(f"<td{cls(i)}>{fmt(c)}</td>" for i, c in enumerate(r)) + "</tr>"
                   for r in rows)
    return f"<table><tr>{th}</tr>{body}</table>"


def kpis(items: list[tuple[str, Any]], bad: set[str] = frozenset()) -> str:
    def cls(k: str, v: Any) -> str:
        return "kpi" + (" bad" if k in bad else "") + (" wide" if len(fmt(v)) > 16 else "")

    cards = "".join(f'<div class="{cls(k, v)}"><b>{fmt(v)}</b><span>{esc(k)}</span></div>' for k, v in items)
    return f'<div class="kpis">{cards}</div>'


def note(text: str) -> str:
    return f"<p class='note'>{esc(clip(text))}</p>"


def plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot

    return pyplot


def fig_to_img(fig, alt: str) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt().close(fig)
    data = base64.b64encode(buf.getvalue()).decode()
    return f'<img alt="{esc(alt)}" src="data:image/png;base64,{data}">'


def snippet(text: str | None, n: int = 160) -> str:
    t = " ".join((text or "").split())
    return t[:n] + ("…" if len(t) > n else "")


# ----------------------------------------------------------------------------- the page


def section_for(path: Path, index: int, remote: str | None = None) -> Section:
    """The section for one argument, recognised by what it holds; a file of it that does not parse
    is a ValueError naming the argument (the command turns it into one line). `remote`: the URL
    `path` was staged from (report_remote), where a corpus job's rejects and data are streamed."""
    try:
        return _section_for(path, index, remote)
    except json.JSONDecodeError as e:
        where = "" if path.suffix == ".json" else " (a JSON file in it)"
        raise ValueError(f"{path}{where}: not valid JSON: {e}") from e
    except RecursionError as e:  # JSON nested deeper than Python's stack: hostile or damaged
        raise ValueError(f"{path}: not valid JSON: nested too deep") from e


def _section_for(path: Path, index: int, remote: str | None = None) -> Section:
    from pretrain import report_corpus as rc
    from pretrain import report_run as rr

    sid = f"s{index}"
    if path.is_dir() and (path / "stats.json").exists():
        return rc.curate_section(path, sid, remote)
    if path.is_dir() and (path / "metrics.jsonl").exists():
        return rr.run_section(path, sid)
    if path.is_dir() and (path / "manifest.json").exists():
        return rc.tokens_section(path, sid)
    if path.suffix == ".json":
        from pretrain.untrusted import load_json

        data = load_json(path)
        if isinstance(data, dict) and "sources" in data and "budget" in data:
            return rc.mixture_section(path, data, sid)
        if isinstance(data, dict) and ("layout" in data or "headline" in data):
            return rr.plan_section(path, data, sid)
        if isinstance(data, dict) and "results" in data:
            return rr.eval_section(path, data, sid)
    if path.is_dir() and (path / "plan.json").exists():  # a corpus job's identity, no stats yet
        job = _job_name(path / "plan.json")
        if job:
            raise ValueError(f"{path}: a pretrain {job} job that has not finished (no stats.json yet); "
                             "rerun its command to finish it, then report it")
    if path.suffix == ".toml":  # a mixture file or a recipe: the report reads what they produced
        raise ValueError(f"{path}: a TOML file; for a mixture report `pretrain mix {path} --json > "
                         "mix.json`, for a recipe the training run directory it wrote (train.out)")
    raise ValueError(f"{path}: not a curate output, token directory, mixture or plan JSON, "
                     "eval result or training run" + _what_it_holds(path))


def _what_it_holds(path: Path) -> str:
    """A hint for the folders a newcomer points at first: the demo's OUT (its parts are the
    arguments) and a run's eval/ folder (its files are)."""
    if path.is_dir() and (path / "demo.json").is_file():
        parts = [path / p for p in ("corpus", "tokens/web", "mixture.json", "plan.json", "run")]
        return (f"; it is a `pretrain demo` folder, whose page is {path / 'report.html'}; its parts are "
                f"the arguments: pretrain report {' '.join(str(p) for p in parts if p.exists())}")
    results = sorted(path.glob("*.json")) if path.is_dir() else []
    if results and path.name == "eval":
        return f"; it is a folder of eval results: give one of its files, e.g. {results[-1]}"
    return ""


def _job_name(plan: Path) -> str | None:
    """The job of an unfinished corpus OUT, for a hint: read, as for the inputs line, only up to
    report_corpus.MAX_INPUTS (a job's plan.json may hold 1 GiB)."""
    from pretrain.report_corpus import MAX_INPUTS
    from pretrain.untrusted import load_json

    try:
        data = load_json(plan, MAX_INPUTS)
    except (OSError, ValueError):
        return None
    return data.get("job") if isinstance(data, dict) and "hash" in data else None


def summary(sections: list[Section]) -> str:
    """What ran, the headline numbers of each part, what went wrong, and links to the sections."""
    nav = "<nav>" + "".join(f"<a href='#{s.id}'>{esc(s.title)}</a>" for s in sections) + "</nav>"
    rows = [[s.kind, s.source, "; ".join(f"{k} {fmt(v)}" for k, v in s.facts[:4])] for s in sections]
    head = [(k, v) for s in sections for k, v in s.facts[:2]]
    problems = [f"{s.title}: {p}" for s in sections for p in s.problems]
    wrong = ("<h3>What went wrong</h3><ul>" + "".join(f"<li>{esc(clip(p))}</li>" for p in problems) + "</ul>"
             if problems else note("Nothing went wrong: no bad records, no loss spikes, every plan fits."))
    ran = table(["part", "from", "headline"], rows, wrap={1})
    body = kpis(head[:8]) + "<h3>What ran</h3>" + ran + wrong + nav
    return f"<section id='summary'><h2>Summary</h2>{body}</section>"


def _section(path: Path | str, index: int, remote: str | None = None) -> Section:
    """`section_for`, with any shape the section did not expect (a list where stats.json holds an
    object, a string where a count belongs: folders travel between people) as one ValueError
    naming the argument, never a traceback. A URL is staged first (report_remote)."""
    if cio.is_url(path):
        return _remote_section(str(path), index)
    path = Path(path)
    try:
        return section_for(path, index, remote)
    except (KeyError, TypeError, AttributeError, IndexError, ValueError, ArithmeticError) as e:
        if isinstance(e, ValueError) and str(e).startswith(str(path)):  # names the file already
            raise
        raise ValueError(f"{path}: not a well-formed pretrain output ({type(e).__name__}: "
                         f"{str(e)[:120]})") from None
    except RecursionError:
        raise ValueError(f"{path}: not a well-formed pretrain output (nested too deeply)") from None


def _remote_section(url: str, index: int) -> Section:
    """The section of a URL: its small files staged in a temporary folder, drawn as a local one,
    every mention of that folder (source, messages) replaced by the URL."""
    from pretrain import report_remote
    from pretrain.errors import UserError

    with tempfile.TemporaryDirectory(prefix="pretrain-report-") as tmp:
        staged = re.compile(re.escape(tmp) + r"/[^/\s:]+")  # the staged copy, in any message

        def named(text: str) -> str:
            return staged.sub(lambda _: url.rstrip("/"), text)

        try:
            local = report_remote.stage(url, Path(tmp))
            s = _section(local, index, None if local.is_file() else url)
        except (ValueError, UserError) as e:
            raise ValueError(named(str(e))) from None
        s.body = staged.sub(lambda _: esc(url.rstrip("/")), s.body)
    s.source, s.problems = url, [named(p) for p in s.problems]
    return s


def build_report(paths: list[Path | str], title: str = "pretrain report") -> str:
    sections = [_section(p, i) for i, p in enumerate(paths)]
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    page = summary(sections) + "".join(s.html() for s in sections)
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{esc(title)}</title>"
        f"<style>{CSS}</style></head><body><header><h1>{esc(title)}</h1>"
        f"<p>generated {stamp} by pretrain from {len(paths)} input{'' if len(paths) == 1 else 's'}</p>"
        "</header>"
        f"<main>{page}</main></body></html>"
    )


def write_report(paths: list[Path | str], out: Path, title: str = "pretrain report") -> Path:
    cio.write_bytes_atomic(out, build_report(paths, title).encode("utf-8"))
    return out
