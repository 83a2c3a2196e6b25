"""`pretrain report`: one self-contained HTML page about a curate run, tokens, a plan and a training run.

Each argument is recognised by what it holds: a curate output (stats.json + data/), a token
directory (manifest.json), a plan (JSON from `pretrain plan --json`), or a training run
(metrics.jsonl). Plots are drawn with matplotlib and embedded as base64 PNG, so the page needs no
network and no other file to be viewed.
"""

from __future__ import annotations

import base64
import html
import io
import json
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
.kpis{display:flex;gap:14px;flex-wrap:wrap}.kpi{background:#f0f3f8;border-radius:8px;padding:10px 16px}
.kpi b{display:block;font-size:20px}.kpi span{font-size:12px;color:#5b6478}
img{max-width:100%}pre{background:#f0f3f8;padding:10px;border-radius:6px;white-space:pre-wrap;font-size:12px}
.snip{color:#5b6478;font-size:12px}.ev{color:#b3261e}
"""


def _fig_to_img(fig, alt: str) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _table(headers: list[str], rows: list[list[Any]], numeric: set[int] = frozenset()) -> str:
    th = "".join(
        f'<th class="{"n" if i in numeric else ""}">{html.escape(h)}</th>' for i, h in enumerate(headers)
    )
    body = "".join(
        "<tr>"
        + "".join(f'<td class="{"n" if i in numeric else ""}">{_fmt(c)}</td>' for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return f"<table><tr>{th}</tr>{body}</table>"


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.0f}" if 1e3 <= abs(v) < 1e9 else f"{v:,.4g}"
    if isinstance(v, int):
        return f"{v:,}"
    return html.escape(str(v))


def _kpis(items: list[tuple[str, Any]]) -> str:
    return (
        '<div class="kpis">'
        + "".join(f'<div class="kpi"><b>{_fmt(v)}</b><span>{html.escape(k)}</span></div>' for k, v in items)
        + "</div>"
    )


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
    time_, layout, cluster = plan.get("time", {}), plan.get("layout", {}), plan.get("cluster", {})
    head.setdefault("days", time_.get("calendar_days", time_.get("compute_days")))
    head.setdefault("gpu_hours", time_.get("gpu_hours"))
    head.setdefault("layout", layout.get("label"))
    head.setdefault("mfu", time_.get("mfu", layout.get("mfu")))
    head.setdefault("gpus", cluster.get("n_gpus"))
    head.setdefault("gpu", cluster.get("gpu"))
    head.setdefault("model", plan.get("model", {}).get("name"))
    head.setdefault("tokens", plan.get("budget", {}).get("tokens"))
    return head


def headline_text(h: dict) -> str:
    """One line: 'llama-3-8b on 64 h100, 1e+12 tokens: 21.1 days, 32,381 GPU-hours, MFU 53.3%, ...'."""
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


# ----------------------------------------------------------------------------- curate


def curate_section(out: Path) -> str:
    stats = json.loads((out / "stats.json").read_text())
    from pretrain.curate.report import funnel_rows

    rows = funnel_rows(stats)
    d = stats["documents"]
    parts = [
        f"<h2>Curation funnel <span class='snip'>{html.escape(str(out))}</span></h2>",
        _kpis(
            [
                ("documents read", d["read"]),
                ("kept", d["kept"]),
                ("kept share", f"{d['kept'] / max(d['read'], 1):.1%}"),
                ("bad records skipped", stats["errors"]["count"]),
                ("seconds", stats["wall_seconds"]),
            ]
        ),
    ]
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1))
    names = [r[0] for r in rows][::-1]
    ax.barh(names, [r[2] for r in rows][::-1], color="#3a7bd5", label="kept")
    ax.barh(
        names, [r[3] for r in rows][::-1], left=[r[2] for r in rows][::-1], color="#e57373", label="dropped"
    )
    ax.set_xlabel("documents")
    ax.legend(loc="lower right")
    ax.set_title("what each step let through")
    parts.append(_fig_to_img(fig, "curation funnel"))
    parts.append(_table(["step", "in", "kept", "dropped", "top reasons"], [list(r) for r in rows], {1, 2, 3}))
    rejects = _rejects(out)
    order = {name: i for i, name in enumerate(stats.get("step_order", list(stats["steps"])))}
    rejects.sort(key=lambda r: order.get(r["step"], len(order)))
    parts.append("<h3>Examples of rejects</h3>" + _reject_examples(rejects))
    parts.append("<h3>Duplicate clusters</h3>" + _clusters(rejects, out))
    return "<section>" + "".join(parts) + "</section>"


def _rejects(out: Path, limit: int = 20000) -> list[dict]:
    recs = []
    for p in sorted((out / "rejects").glob("*.jsonl.zst")):
        for r in cio.read_jsonl_zst(p):
            recs.append(r)
            if len(recs) >= limit:
                return recs
    return recs


def _snippet(text: str | None, n: int = 160) -> str:
    t = " ".join((text or "").split())
    return t[:n] + ("…" if len(t) > n else "")


def _reject_examples(rejects: list[dict], per_reason: int = 1) -> str:
    seen: dict[tuple[str, str], int] = {}
    rows = []
    for r in rejects:
        key = (r["step"], r["reason"])
        if seen.get(key, 0) >= per_reason:
            continue
        seen[key] = seen.get(key, 0) + 1
        rows.append([r["step"], r["reason"], r.get("url") or r["id"], _snippet(r.get("text"))])
    return _table(["step", "reason", "url / id", "text"], rows)


def _clusters(rejects: list[dict], out: Path, shown: int = 8) -> str:
    clusters: dict[str, list[dict]] = {}
    for r in rejects:
        if r.get("kept_id"):
            clusters.setdefault(r["kept_id"], []).append(r)
    if not clusters:
        return "<p class='snip'>no duplicates found</p>"
    sizes = sorted((len(v) + 1 for v in clusters.values()), reverse=True)
    kept_text = _kept_texts(out, set(list(clusters)[: shown * 4]))
    rows = []
    for kid, members in sorted(clusters.items(), key=lambda kv: -len(kv[1]))[:shown]:
        rows.append(
            [
                kid,
                len(members) + 1,
                _snippet(kept_text.get(kid), 100),
                "; ".join(f"{m['step']}: {m.get('url') or m['id']}" for m in members[:4]),
            ]
        )
    return (
        f"<p>{len(clusters):,} clusters, {sum(sizes) - len(sizes):,} documents removed, "
        f"largest {sizes[0]}</p>" + _table(["kept id", "size", "kept text", "removed"], rows, {1})
    )


def _kept_texts(out: Path, ids: set[str]) -> dict[str, str]:
    found = {}
    for p in sorted((out / "data").glob("*.jsonl.zst")):
        for r in cio.read_jsonl_zst(p):
            if r["id"] in ids:
                found[r["id"]] = r["text"]
    return found


# ----------------------------------------------------------------------------- tokens, plan


def tokens_section(path: Path) -> str:
    m = json.loads((path / "manifest.json").read_text())
    rows = [[k, v if not isinstance(v, (dict, list)) else json.dumps(v)[:120]] for k, v in m.items()]
    head = f"<h2>Tokens <span class='snip'>{html.escape(str(path))}</span></h2>"
    return f"<section>{head}{_table(['field', 'value'], rows)}</section>"


def mixture_section(path: Path) -> str:
    m = json.loads(path.read_text())
    rows = (m.get("sources") or m.get("rows") or m) if isinstance(m, dict) else m
    if isinstance(rows, list) and rows and isinstance(rows[0], dict):
        headers = list(rows[0])
        return (
            "<section><h2>Mixture</h2>"
            + _table(headers, [[r[h] for h in headers] for r in rows], set(range(1, len(headers))))
            + "</section>"
        )
    return f"<section><h2>Mixture</h2><pre>{html.escape(json.dumps(m, indent=2))}</pre></section>"


def plan_section(path: Path) -> str:
    plan = json.loads(path.read_text())
    flat = list(_flatten(plan))
    rows = [[k, v] for k, v in flat[:80]]
    head = f"<h2>Plan <span class='snip'>{html.escape(path.name)}</span></h2>"
    return f"<section>{head}{_table(['quantity', 'value'], rows)}</section>"


def _flatten(d: Any, prefix: str = ""):
    if isinstance(d, dict):
        for k, v in d.items():
            yield from _flatten(v, f"{prefix}{k}.")
    elif isinstance(d, list) and (len(d) > 8 or any(isinstance(x, (dict, list)) for x in d)):
        yield prefix.rstrip("."), f"[{len(d)} items]"
    else:
        text = d if isinstance(d, (int, float, str)) else json.dumps(d)
        yield prefix.rstrip("."), text[:200] if isinstance(text, str) else text


# ----------------------------------------------------------------------------- training run


def run_section(run: Path) -> str:
    steps, events = [], []
    for line in (run / "metrics.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        (events if "event" in rec else steps).append(rec)
    train = [r for r in steps if "loss" in r and r.get("split", "train") == "train"]
    evals = [r for r in steps + events if "eval_loss" in r]  # eval results are "eval" event lines
    events = [e for e in events if e["event"] != "eval"]
    parts = [f"<h2>Training run <span class='snip'>{html.escape(str(run))}</span></h2>"]
    if train:
        last = train[-1]
        tps = [r.get("tokens_per_s") for r in train if r.get("tokens_per_s")]
        mfu = [r.get("mfu") for r in train if r.get("mfu") is not None]
        parts.append(
            _kpis(
                [
                    ("steps", last["step"]),
                    ("final loss", float(last["loss"])),
                    ("tokens/s (median)", float(sorted(tps)[len(tps) // 2]) if tps else "-"),
                    ("MFU (median)", f"{sorted(mfu)[len(mfu) // 2]:.2%}" if mfu else "-"),
                    ("events", len(events)),
                ]
            )
        )
        parts.append(_curves(train, evals, events))
    if events:
        parts.append(
            "<h3>Events</h3>"
            + _table(
                ["step", "event", "detail"],
                [
                    [
                        e.get("step", ""),
                        e["event"],
                        json.dumps({k: v for k, v in e.items() if k not in ("step", "event")})[:160],
                    ]
                    for e in events[:60]
                ],
            )
        )
    samples = run / "samples.txt"
    if samples.exists():
        parts.append(f"<h3>Samples</h3><pre>{html.escape(samples.read_text()[:4000])}</pre>")
    return "<section>" + "".join(parts) + "</section>"


def _curves(train: list[dict], evals: list[dict], events: list[dict]) -> str:
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
    x = [r["step"] for r in train]
    axes[0].plot(x, [r["loss"] for r in train], lw=1, label="train")
    if evals:
        axes[0].plot([r["step"] for r in evals], [r["eval_loss"] for r in evals], "o-", ms=3, label="eval")
    for e in events:
        if e["event"] in ("spike", "rollback", "skip") and "step" in e:
            axes[0].axvline(e["step"], color="#b3261e", ls="--", lw=0.8)
    axes[0].set_title("loss (red: spike / rollback)")
    axes[0].legend()
    axes[1].plot(x, [r.get("lr", 0) for r in train], color="#2e7d32")
    axes[1].set_title("learning rate")
    axes[2].plot(x, [r.get("grad_norm", 0) for r in train], color="#6a1b9a", lw=1)
    axes[2].set_title("gradient norm (before clipping)")
    for a in axes:
        a.set_xlabel("step")
    fig.tight_layout()
    return _fig_to_img(fig, "training curves")


# ----------------------------------------------------------------------------- page


def section_for(path: Path) -> str:
    if path.is_dir() and (path / "stats.json").exists():
        return curate_section(path)
    if path.is_dir() and (path / "metrics.jsonl").exists():
        return run_section(path)
    if path.is_dir() and (path / "manifest.json").exists():
        return tokens_section(path)
    if path.suffix == ".json" and path.name.startswith("mixture"):
        return mixture_section(path)
    if path.suffix == ".json":
        return plan_section(path)
    raise ValueError(f"{path}: not a curate output, token directory, plan JSON or training run")


def build_report(paths: list[Path], title: str = "pretrain report") -> str:
    sections = "".join(section_for(Path(p)) for p in paths)
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{CSS}</style></head><body><header><h1>{html.escape(title)}</h1>"
        f"<p>generated {stamp} by pretrain</p></header><main>{sections}</main></body></html>"
    )


def write_report(paths: list[Path], out: Path, title: str = "pretrain report") -> Path:
    cio.write_bytes_atomic(out, build_report(paths, title).encode("utf-8"))
    return out
