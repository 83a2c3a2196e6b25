"""Write the demo crawl that ships with pretrain: src/pretrain/data/demo/crawl.warc.gz.

Bulk prose comes from Python's own documentation (`pydoc_data.topics`, in every CPython install,
PSF licence), wrapped in web-page boilerplate (navigation, cookie banner, footer). Around it, the
junk a real crawl has, written for this project: re-crawled exact copies, scrapers' edited copies,
navigation-only pages, hashtag and keyword spam, pages in other languages, a lorem-ipsum template,
a page that repeats itself, binary bodies and a revisit record. Deterministic: run it twice, get
the same bytes.

    python scripts/make_demo_crawl.py [OUT]
"""

from __future__ import annotations

import gzip
import html
import importlib
import inspect
import io
import pydoc_data.topics
import random
import re
import sys
import uuid
import warnings
from pathlib import Path

DATE = "2026-11-01T12:00:00Z"
SITE = "https://docs.example.org"
NAV = ["Home", "Tutorial", "Library", "Language", "Downloads", "Community", "About", "Log in"]

OTHER_LANGUAGES = {
    "fr": "Le fleuve transporte chaque année des millions de tonnes de sable et de limon vers la mer. "
    "Quand le courant ralentit près de la côte, ces sédiments se déposent et forment peu à peu "
    "un delta, une plaine basse et fertile où les agriculteurs cultivent le riz depuis des siècles. "
    "Les bras du fleuve se déplacent au gré des crues, et les villages doivent parfois suivre "
    "l'eau. Aujourd'hui, les barrages retiennent une grande partie des sédiments en amont, et "
    "certains deltas commencent à reculer devant la mer.",
    "de": "Der Fluss trägt jedes Jahr Millionen Tonnen Sand und Schlamm in Richtung Meer. Wenn die "
    "Strömung an der Küste langsamer wird, lagern sich diese Sedimente ab und bilden nach und "
    "nach ein Delta, eine flache und fruchtbare Ebene, auf der seit Jahrhunderten Reis angebaut "
    "wird. Die Arme des Flusses verlagern sich mit jedem Hochwasser, und die Dörfer müssen dem "
    "Wasser manchmal folgen. Heute halten Staudämme einen großen Teil der Sedimente zurück.",
    "es": "El río arrastra cada año millones de toneladas de arena y limo hacia el mar. Cuando la "
    "corriente pierde fuerza cerca de la costa, esos sedimentos se depositan y forman poco a "
    "poco un delta, una llanura baja y fértil donde los agricultores cultivan arroz desde hace "
    "siglos. Los brazos del río cambian de lugar con cada crecida, y los pueblos a veces tienen "
    "que seguir al agua. Hoy las presas retienen gran parte de los sedimentos río arriba.",
    "it": "Ogni anno il fiume trasporta verso il mare milioni di tonnellate di sabbia e di limo. "
    "Quando la corrente rallenta vicino alla costa, questi sedimenti si depositano e formano a "
    "poco a poco un delta, una pianura bassa e fertile dove da secoli si coltiva il riso. I "
    "rami del fiume si spostano a ogni piena e i villaggi a volte devono seguire l'acqua.",
    "pt": "Todos os anos o rio leva para o mar milhões de toneladas de areia e de lodo. Quando a "
    "corrente perde força perto da costa, esses sedimentos depositam-se e formam aos poucos um "
    "delta, uma planície baixa e fértil onde os agricultores cultivam arroz há séculos. Os braços "
    "do rio mudam de lugar a cada cheia, e as aldeias às vezes precisam de seguir a água.",
    "nl": "Elk jaar voert de rivier miljoenen tonnen zand en slib naar zee. Waar de stroming bij de "
    "kust vertraagt, zakken die sedimenten uit en vormen ze langzaam een delta, een lage en "
    "vruchtbare vlakte waar boeren al eeuwenlang rijst verbouwen. De rivierarmen verleggen zich "
    "bij elk hoogwater, en dorpen moeten het water soms volgen.",
}

SPAM = [
    "#deal #sale #cheap #discount #buy #now #free #shipping #best #price #offer #today #win "
    "#promo #limited #hot #trending #viral #follow #like #share",
    "cheap watches cheap watches buy cheap watches online best cheap watches discount watches "
    "cheap replica watches cheap watches sale cheap watches free shipping cheap watches",
    "casino bonus casino free spins casino online casino bonus code casino no deposit casino "
    "jackpot casino slots casino bonus casino bonus casino bonus",
    "SKU-4431 X99 blk/wht 12pk | SKU-4432 X99 red/wht 6pk | SKU-4433 X98 blu 24pk | "
    "SKU-4434 X97 grn 12pk | SKU-4435 X96 blk 6pk",
    "#followme #instagood #photooftheday #love #tbt #beautiful #cute #happy #fashion #selfie "
    "#summer #art #nature #girl #fun #style #smile #food #instadaily",
    "best loans fast loans payday loans online loans no credit check loans instant loans "
    "loans loans loans apply now loans",
]

LOREM = (
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt "
    "ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco "
    "laboris nisi ut aliquip ex ea commodo consequat."
)

SCRAPER_SENTENCES = [
    "Read more articles like this one on our partner site.",
    "This article was shared by a reader and lightly edited for our audience.",
    "Subscribe to our newsletter for weekly programming tips.",
]


def record_id(key: str) -> str:
    return f"<urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, key)}>"


def warc_record(rtype: str, url: str, payload: bytes, extra: dict | None = None, key: str = "") -> bytes:
    headers = {
        "WARC-Type": rtype,
        "WARC-Record-ID": record_id(key or (rtype + url)),
        "WARC-Date": DATE,
        "WARC-Target-URI": url,
        "Content-Type": "application/http; msgtype=response"
        if rtype in ("response", "revisit")
        else "application/warc-fields",
        **(extra or {}),
        "Content-Length": str(len(payload)),
    }
    head = "WARC/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    raw = head.encode() + payload + b"\r\n\r\n"
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:  # one gzip member per record
        gz.write(raw)
    return buf.getvalue()


def http_response(body: bytes, content_type: str = "text/html; charset=utf-8") -> bytes:
    head = (
        f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
        "Server: demo\r\n\r\n"
    )
    return head.encode() + body


def page(title: str, paragraphs: list[str], lang: str = "en", boiler: bool = True) -> bytes:
    nav = "".join(f'<li><a href="/{n.lower().replace(" ", "-")}">{n}</a></li>' for n in NAV)
    body = "".join(_block(p) for p in paragraphs)
    cookie = (
        (
            '<div class="cookie">This site uses cookies. By continuing you agree to our '
            '<a href="/privacy">Privacy policy</a>. <button>Accept</button></div>'
        )
        if boiler
        else ""
    )
    footer = (
        '<footer><p>© 2026 Example Docs · <a href="/terms">Terms of use</a> · '
        '<a href="/privacy">Privacy policy</a> · <a href="/contact">Contact</a></p></footer>'
        if boiler
        else ""
    )
    doc = (
        f'<!DOCTYPE html><html lang="{lang}"><head><meta charset="utf-8"><title>{html.escape(title)}'
        f"</title></head><body>{cookie}<header><nav><ul>{nav}</ul></nav></header>"
        f"<main><article><h1>{html.escape(title)}</h1>{body}</article></main>"
        f'<aside><h3>Related</h3><ul><li><a href="/a">Previous topic</a></li>'
        f'<li><a href="/b">Next topic</a></li></ul></aside>{footer}</body></html>'
    )
    return doc.encode("utf-8")


def _block(p: str) -> str:
    if p.startswith("   "):
        return f"<pre>{html.escape(p)}</pre>"
    return f"<p>{html.escape(' '.join(p.split()))}</p>"


def _clean(p: str) -> str:
    """Docs markup (quotes around names, *emphasis*) out of prose paragraphs; code stays as is."""
    if p.startswith("   "):
        return p
    p = re.sub(r"[\"*`“”()\[\]|;=]", "", p)
    return re.sub(r"\b__(\w+)__\b", r"\1", p)


def topic_pages() -> list[tuple[str, str, list[str]]]:
    """(slug, title, paragraphs) from the Python docs, long topics split into parts of ~4 KB."""
    out = []
    for key in sorted(pydoc_data.topics.topics):
        text = pydoc_data.topics.topics[key]
        lines = text.split("\n")
        title = lines[0].strip().replace('"', "")
        paras = [
            _clean(p.strip("\n"))
            for p in "\n".join(lines[2:]).split("\n\n")
            if p.strip() and not p.lstrip().startswith(("+-", "|", "="))
        ]
        out += _pages(key, title, paras, single=key)
    return out


def _pages(slug: str, title: str, paras: list[str], single: str) -> list[tuple[str, str, list[str]]]:
    """Paragraphs cut into pages of ~4 KB; a text that fits one page gets the slug `single`."""
    out, part, size, n = [], [], 0, 0
    for p in paras:
        part.append(p)
        size += len(p)
        if size > 4000:
            out.append((f"{slug}-{n}", f"{title} (part {n + 1})", part))
            part, size, n = [], 0, n + 1
    if part:
        out.append((f"{slug}-{n}" if n else single, title if not n else f"{title} (part {n + 1})", part))
    return out


STDLIB_SKIP = {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "test", "lib2to3",
               "ensurepip", "venv", "pydoc_data"}


def stdlib_pages() -> list[tuple[str, str, list[str]]]:
    """(slug, title, paragraphs) from the docstrings of the standard library's modules."""
    out = []
    for name in sorted(sys.stdlib_module_names):
        if name in STDLIB_SKIP or name.startswith("_"):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mod = importlib.import_module(name)
        except Exception:  # noqa: BLE001 - platform-specific modules
            continue
        docs = [inspect.getdoc(mod) or ""]
        for key, obj in sorted(vars(mod).items()):
            if key.startswith("_") or getattr(obj, "__module__", "") != name:
                continue
            if inspect.isclass(obj) or inspect.isfunction(obj):
                d = inspect.getdoc(obj) or ""
                if len(d) > 200:
                    docs.append(f"{key}\n\n{d}")
        paras = [_clean(p.strip()) for d in docs for p in d.split("\n\n") if p.strip()]
        paras = [p for p in paras if not p.startswith((">>>", "..."))]
        if sum(map(len, paras)) < 1500:
            continue
        out += _pages(f"lib-{name}", f"The {name} module", paras, single=f"lib-{name}-0")
    return out


def build(out: Path) -> dict:
    rng = random.Random(20261130)
    records: list[bytes] = []
    counts: dict[str, int] = {}

    def add(kind: str, rec: bytes) -> None:
        records.append(rec)
        counts[kind] = counts.get(kind, 0) + 1

    # Most pages of our docs site are prose; every sixth keeps its code and grammar blocks (which
    # the Gopher rules reject as mostly symbols, as they would on a real crawl).
    topics = [
        (slug, title, paras if k % 6 == 0 else [p for p in paras if not p.startswith("   ")])
        for k, (slug, title, paras) in enumerate(topic_pages())
    ]
    topics = [t for t in topics if t[2]]
    topics += stdlib_pages()
    for slug, title, paras in topics:
        url = f"{SITE}/reference/{slug}.html"
        add("article", warc_record("response", url, http_response(page(title, paras))))
    for slug, title, paras in rng.sample(topics, 12):  # re-crawled: same page, another URL
        url = f"{SITE}/reference/{slug}.html?utm_source=feed"
        add("exact_copy", warc_record("response", url, http_response(page(title, paras))))
    for i, (slug, title, paras) in enumerate(rng.sample(topics, 12)):  # scrapers' edited copies
        edited = list(paras)
        j = next((k for k, p in enumerate(edited) if not p.startswith("   ") and len(p) > 200), 0)
        words = edited[j].split()
        words[len(words) // 2] = "really"
        edited[j] = " ".join(words)
        edited.append(SCRAPER_SENTENCES[i % len(SCRAPER_SENTENCES)])
        url = f"https://mirror{i % 3}.example.net/{slug}"
        add("near_copy", warc_record("response", url, http_response(page(title, edited))))
    for i in range(8):  # navigation-only pages
        links = rng.sample(topics, 10)
        items = " | ".join(t for _, t, _ in links)
        add(
            "navigation",
            warc_record(
                "response",
                f"{SITE}/index-{i}.html",
                http_response(page("Index", [f"Home | {items} | Log in"])),
            ),
        )
    for i, text in enumerate(SPAM):
        add(
            "spam",
            warc_record(
                "response",
                f"https://spam{i}.example.com/",
                http_response(page("Best deals", [text], boiler=False)),
            ),
        )
    for lang, text in OTHER_LANGUAGES.items():
        add(
            f"lang_{lang}",
            warc_record(
                "response",
                f"https://{lang}.example.org/delta",
                http_response(page("Delta", [text, text[: len(text) // 2]], lang)),
            ),
        )
    add(
        "lorem",
        warc_record("response", f"{SITE}/template.html", http_response(page("New page", [LOREM] * 4))),
    )
    rep = topics[3][2][0]
    add("repetitive", warc_record("response", f"{SITE}/loop.html", http_response(page("Loop", [rep] * 12))))
    png = b"\x89PNG\r\n\x1a\n" + bytes(rng.randrange(256) for _ in range(512))
    add("image", warc_record("response", f"{SITE}/logo.png", http_response(png, "image/png")))
    add(
        "pdf",
        warc_record(
            "response", f"{SITE}/manual.pdf", http_response(b"%PDF-1.4\n% demo\n", "application/pdf")
        ),
    )
    add(
        "revisit",
        warc_record(
            "revisit",
            f"{SITE}/reference/{topics[0][0]}.html",
            b"HTTP/1.1 304 Not Modified\r\n\r\n",
            {
                "WARC-Profile": "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest",
                "WARC-Refers-To": record_id("response" + f"{SITE}/reference/{topics[0][0]}.html"),
            },
            key="revisit",
        ),
    )
    order = list(range(len(records)))
    rng.shuffle(order)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(b"".join(records[i] for i in order))
    return counts


if __name__ == "__main__":
    target = (
        Path(sys.argv[1])
        if len(sys.argv) > 1
        else (Path(__file__).resolve().parents[1] / "src" / "pretrain" / "data" / "demo" / "crawl.warc.gz")
    )
    c = build(target)
    print(f"wrote {target} ({target.stat().st_size:,} bytes): {sum(c.values())} records {c}")
