"""HTML -> main text: one interface over resiliparse and trafilatura, with a time and size bound.

The `extract` step acts only on documents whose `cache["html"]` is set (WARC responses, .html
files); it replaces `doc.text` with the page's main text or drops the page with a reason:

- `html_too_large`  the page is over `max_html_bytes` (checked before any parsing);
- `html_nested_lists` resiliparse would indent its lines inside lists by more than
                    `max_html_bytes` spaces (lists nested thousands deep render in the square of
                    their depth: 144 KB of them were 256 MB of text); resiliparse and blocks only;
- `extract_timeout` the extractor ran past `timeout_s`;
- `extract_error`   the extractor raised or its worker died;
- `extract_empty`   nothing was left after extraction.

Backends: `resiliparse` (`extract_plain_text(main_content=True)`, C++ on lexbor),
`trafilatura` (with `favor_precision` and its within-page dedup, as FineWeb ran it, but with no
memory of earlier pages: see extract_text) and `blocks` (resiliparse's main content
cut into blocks, each kept or dropped by a small model: curate/extract_blocks.py; where the main
content is under 500 characters, a whole-page render lets a second model bring the article back,
`rescue`: curate/extract_rescue.py; with `strict`, the strict trees decide each page with a
per-page fallback to the shipped ones). The step's default is `blocks` with `strict` (since
2026-12-03); `extract_text`'s arguments stay explicit (resiliparse, strict off) for the callers
that compare backends. Numbers behind the default are in docs/extraction.md and docs/decisions.md.

The time bound. A SIGALRM timer only fires in the main thread and only between Python bytecodes,
so it cannot stop a regular expression backtracking inside C (how trafilatura hangs) nor run in a
worker thread. We therefore run the extractor in a child process (`_Worker`) that speaks a small
length-prefixed protocol over pipes (no pickle: bytes in, UTF-8 text out); the parent waits with
`select` until the deadline, then kills and restarts the child. The child costs a pipe round trip
per page. `isolation="auto"` uses it for trafilatura and runs resiliparse in-process.

resiliparse in-process is bounded by a depth check instead of a deadline. lexbor's parser and the
whole-page extractor are linear, but main-content extraction is quadratic in the nesting depth
(measured, 2026-12-01: 1,000 nested <div> 0.07 s, 4,000 0.59 s, 8,000 2.4 s, 100,000 (1.1 MB, under
the size cap) did not end in 300 s). A page with more than `DEPTH_SCAN_FROM` tags (1.8% of the 679
trafilatura-eval pages) has its depth measured (a regex pass, ~0.7 s per million tags); one deeper than
`extract.max_depth` is extracted whole-page (main_content=False: 100,000 deep in 0.18 s) and counted
as `deep_whole_page`. A page with fewer tags cannot be deeper than its tag count: at most ~0.35 s.
The tag count is an upper bound only for end tags that really close something; an end tag lexbor
ignores (a stray `</span>`, one in a comment, script or attribute) fooled it, so a page the count
finds shallow has lexbor's tree measured too (`tree_depth`: 400,000 elements in ~1.4 s). That walk
costs ~5 us an element in Python, so floods of tags are bounded without it (session 14): a page whose
start tags bound its depth under `max_depth` (`depth_bound`: 20,000 <br> are 8 deep at most) is not
walked; the walk stops at WALK_ELEMENTS (unproven: deep); a page of more than MAIN_CONTENT_TAGS tags
goes whole-page unmeasured, as main content costs resiliparse and `blocks` 4-40 us a tag.

In-process backends take their pages in batches (`BATCH_PAGES`, `BATCH_CHARS`): each stage runs over
the whole batch, then the pages go on one by one, in order, with the texts and drop reasons that
page-by-page extraction gives; only the CPU caches see the difference (docs/extraction.md).
"""

from __future__ import annotations

import os
import re
import select
import struct
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from pretrain.config import bounded, choice
from pretrain.curate.document import Document
from pretrain.curate.step import Step

BACKENDS = ("resiliparse", "trafilatura", "blocks")
ISOLATIONS = ("auto", "process", "inline")


@dataclass
class ExtractConfig:
    """HTML extraction (TOML section `[extract]`)."""

    # blocks with strict trees by default since 2026-12-03 (issue 19, session 14: the first backend
    # to meet the goals on both axes, docs/extraction.md); resiliparse and trafilatura selectable.
    backend: str = choice("blocks", BACKENDS)
    timeout_s: float = bounded(10.0, gt=0, hi=3600, why="seconds per page; a page needing an hour is hostile")
    max_html_bytes: int = bounded(5_000_000, lo=1, why="bytes of one page; 0 would extract nothing")
    # "auto": a child process for trafilatura, in-process for resiliparse and blocks; "process" or "inline".
    isolation: str = choice("auto", ISOLATIONS)
    favor_precision: bool = True  # trafilatura only
    main_content: bool = True  # resiliparse only; False keeps the whole page's text (as CC's WET does)
    # resiliparse only: a page nested deeper is extracted whole-page (linear time; see the docstring).
    max_depth: int = bounded(1000, lo=1, hi=100_000, why="nesting of HTML elements")
    # blocks only: on a page whose main content is under 500 characters, also render the whole page
    # and let the rescue trees bring back the article resiliparse dropped (curate/extract_rescue.py).
    # false: the main-content blocks alone (the output before 2026-12-01; 0-19% less CPU).
    rescue: bool = True
    # blocks only, on by default since 2026-12-03 (issue 19, session 14, docs/extraction.md): the
    # strict trees decide each page, falling back per page to the shipped trees' decision when the
    # strict one keeps under 0.85 x its characters or drops a long block it keeps
    # (extract_blocks.Strict). More dropped boilerplate on the benchmarks at the same keep; about
    # 0.95x the pages/s. false: the shipped trees alone (the blocks output before 2026-12-03).
    strict: bool = True

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"extract.backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if self.isolation not in ISOLATIONS:
            raise ValueError(f"extract.isolation must be auto, process or inline, got {self.isolation!r}")


def extract_text(
    html: str,
    backend: str = "resiliparse",
    favor_precision: bool = True,
    main_content: bool = True,
    rescue: bool = True,
    strict: bool = False,
) -> str:
    """Main text of one page, in this process, with no time bound."""
    if backend == "blocks":
        from pretrain.curate.extract_blocks import MIN_MAIN_CHARS, extract_blocks_text, strict_model

        return extract_blocks_text(html, strict_model() if strict else None,
                                   min_main_chars=MIN_MAIN_CHARS if rescue else 0)
    if backend == "resiliparse":
        from resiliparse.extract.html2text import extract_plain_text

        # Main content only, no alt texts, links or form fields; keep paragraph breaks, which the
        # line-based quality rules (Gopher, C4, FineWeb) need.
        return extract_plain_text(
            html,
            main_content=main_content,
            alt_texts=False,
            links=False,
            form_fields=False,
            noscript=False,
            list_bullets=True,
            preserve_formatting=True,
            comments=False,  # reader comments are not the page's text (trafilatura: include_comments=False)
            post_meta=False,  # "Posted by X on <date>" lines; AEB F1 0.915 -> 0.937 (docs/extraction.md)
        )
    import trafilatura
    from trafilatura.deduplication import LRU_TEST

    # As FineWeb ran it (datatrove's Trafilatura extractor): favor_precision, no comments, deduplicate.
    # deduplicate=True drops a >100-character segment seen more than twice in a process-wide LRU
    # that outlives the call, so a page's text depended on the pages extracted before it (8 of the
    # 58 crawl pages with text differ between two orders): an answer that changed with --workers.
    # Emptying that one cache first keeps the within-page dedup and forgets other pages
    # (docs/extraction.md); trafilatura's other caches memoise pure functions and stay.
    LRU_TEST.clear()
    out = trafilatura.extract(
        html, favor_precision=favor_precision, include_comments=False, deduplicate=True, with_metadata=False
    )
    return out or ""


# Tags that do not deepen the tree: void elements, and those HTML closes implicitly (a run of
# unclosed <p> or <li> is flat, not nested), so counting them would overstate a page's depth.
_FLAT_TAGS = frozenset(
    "area base br col embed hr img input link meta param source track wbr p li dt dd tr td th option "
    "optgroup rb rp rt rtc thead tbody tfoot colgroup caption head body html".split()
)
_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9]*)")
# Below this many '<' a page cannot be nested deep enough to matter (2,000 deep: 0.18 s).
DEPTH_SCAN_FROM = 3000
# Below this many '<' the tag count is trusted when it finds a page shallow: fooled, such a page is
# at most this deep (4,000: 0.35-0.6 s). Above it lexbor's tree is measured (~3 us an element: 5-14
# ms for a page of 3,000-4,000 tags, 2-5x resiliparse's own time there, so not for those pages).
TREE_SCAN_FROM = 4000
# The most elements `tree_depth` walks (~5 us each in Python: 0.5 s); a page it cannot prove shallow
# by then is treated as deep (whole-page, linear). The largest of the 990 real pages has 9,888
# elements; 500,000 flat `<div></div>` (5 MB) cost 2.5-10 s of walk before (session 14, brbomb).
# Not lower: an article beside a 60,000-link sidebar (120,000 elements) must keep its main content.
WALK_ELEMENTS = 250_000
# Above this many '<' a page goes whole-page whatever its depth: main content (resiliparse's C++, then
# for `blocks` our Python per line and the rescue's second render) costs ~4-40 us a tag, 4-22 s on
# 980,000 <br> or 500,000 <p>; the whole-page render is one linear C++ pass (~1 s). 5x the largest
# of the 990 real pages (19,252) would do, but an article beside a sidebar of 60,000 links (180,000
# '<', tests/test_extract_rescue.py) gets its main content in < 10 s, its whole page is 60,000 links of
# boilerplate; every bomb measured has more (900,000-980,000). Counted as `deep_whole_page`.
MAIN_CONTENT_TAGS = 250_000

# `depth_bound`'s tags. Outside svg/math (foreign content, where any start tag nests) these start
# tags never open an element that stays open around the next one: void elements (HTML spec 13.1.2);
# `p` (a new <p> closes an open one unless a scope boundary - a counted tag, or a td/th/caption of a
# counted <table> - is between); the table parts (they close their siblings, and are ignored outside
# a table or template); head/body/html (merged into the existing ones). Unlike `_FLAT_TAGS` this
# leaves out li/dd/dt, option/optgroup and the ruby tags: `<li><dd>` x N nests 2N deep in lexbor.
_SHALLOW_TAGS = frozenset(
    "area base basefont bgsound br col embed frame hr img input keygen link meta param source track wbr "
    "p td th tr thead tbody tfoot caption colgroup head body html".split()
)
_START_TAG = re.compile(r"<([A-Za-z][^\t\n\f\r />]*)")  # the tokenizer's tag name (13.2.5.8)
# The adoption agency (13.2.6.4.7; run by formatting end tags, and by <a>/<nobr> start tags) adds at
# most one element per outer loop, and runs that loop at most 8 times.
_FORMATTING_TAG = re.compile(
    r"</?(?:a|b|big|code|em|font|i|nobr|s|small|strike|strong|tt|u)(?=[\t\n\f\r />])", re.IGNORECASE
)
_FOREIGN = re.compile(r"<(?:svg|math)", re.IGNORECASE)


def nesting_depth(html: str) -> int:
    """The deepest element nesting of a page, counted from its tags (an upper bound on lexbor's)."""
    depth = deepest = 0
    for close, name in _TAG.findall(html):
        name = name.lower()
        if name in _FLAT_TAGS:
            continue
        if close:
            depth -= depth > 0
        else:
            depth += 1
            deepest = max(deepest, depth)
    return deepest


def depth_bound(html: str) -> int:
    """An upper bound on the nesting of lexbor's tree for the page, from its start tags alone (no
    end tag can fool it: ignored ones only make it looser). Each start tag outside `_SHALLOW_TAGS`
    holds at most 5 levels open (a <table> with the tbody, tr and td the parser adds, and a <p> in
    the cell); each formatting tag, start or end, 10 more (a clone from the reconstruction of
    active formatting elements, 13.2.4.3, and the adoption agency's 8), plus html, head and body.
    Checked against lexbor on the 990 real pages and on random tag soup (tests/test_extract.py).
    A page of 20,000 <br> is bounded at 8 levels: no tree walked."""
    foreign = _FOREIGN.search(html) is not None
    deepening = sum(
        n for name, n in Counter(_START_TAG.findall(html)).items()
        if foreign or not (name.isascii() and name.lower() in _SHALLOW_TAGS)
    )
    return 8 + 5 * deepening + 10 * len(_FORMATTING_TAG.findall(html))


def tree_depth(html: str, limit: int, max_elements: int | None = None) -> int:
    """The element nesting of lexbor's own tree for the page (what main-content extraction walks),
    counted until it passes `limit`. The tag count above can be fooled: an end tag the parser
    ignores (`</span>` with no open span), or one inside a comment, a script or an attribute value
    (`<div><!--</div>-->`), closes nothing, so 400,000 such pairs counted 1 deep and took hours.
    After `max_elements` elements the walk stops and says `limit + 1`: not proven shallow."""
    from resiliparse.parse.html import HTMLTree

    depth = deepest = 0
    for seen, (_, step) in enumerate(_elements(HTMLTree.parse(html).document.document_element), 1):
        depth += step or (seen == 1)  # the root is level 1
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                return deepest
        if max_elements is not None and seen > max_elements:
            return limit + 1
    return deepest


def _elements(root):
    """(element, step) for `root` and every element under it in document order: step is +1 into a
    first child, else minus the levels climbed before the next sibling (0 for a sibling, and the root).
    One walk for `tree_depth` and `list_indent` (lexbor's tree, no recursion: pages nest 10^5 deep)."""
    node, step = root, 0
    while node is not None:
        yield node, step
        child = node.first_element_child
        if child is not None:
            node, step = child, 1
            continue
        step = 0
        while node is not None:  # the next element: a sibling, or an ancestor's
            sibling = node.next_element
            if sibling is not None:
                node = sibling
                break
            node, step = node.parent, step - 1


# resiliparse indents each line inside a list by two spaces per enclosing <ul>/<ol>, so nested lists
# render in the square of their depth: 16,000 nested `<ul><li>x` (144 KB) are 256 MB of text whole-
# page, 4.9 MB of them ~300 GB (main content, blocks' rescue and the deep-page fallback render it).
_LIST_OPEN = re.compile(r"<(?:ul|ol)[\s/>]", re.IGNORECASE)


def lists_too_deep(html: str, limit: int) -> bool:
    """Whether a whole-page render of `html` would write more than `limit` spaces of list
    indentation. Cheap bounds first: every element (at most ~3 a tag, with the ones the parser
    adds) is inside at most as many lists as the page has list tags, so a page with few lists or
    few tags is not parsed; else lexbor's tree is walked until the count passes `limit`."""
    tags = html.count("<")
    if 2 * (3 * tags + 3) * tags <= limit or 2 * (3 * tags + 3) * len(_LIST_OPEN.findall(html)) <= limit:
        return False
    from resiliparse.parse.html import HTMLTree

    return list_indent(HTMLTree.parse(html), limit) > limit


def list_indent(tree, limit: int | None = None) -> int:
    """Two spaces per list (`<ul>`, `<ol>`) enclosing each element of a parsed page, summed (until
    past `limit`): the indentation resiliparse writes for the lines inside lists, about."""
    depth, total = [0], 0  # lists around the current element's parent, and around each ancestor's
    for node, step in _elements(tree.document.document_element):
        if step > 0:
            depth.append(depth[-1] + (node.parent.tag in ("ul", "ol")))
        elif step < 0:
            del depth[step:]
        total += 2 * depth[-1]
        if limit is not None and total > limit:
            return total
    return total


def too_deep(html: str, max_depth: int) -> bool:
    """Whether the page goes whole-page. Cheap first: a page with few tags cannot be deep; one with
    more than MAIN_CONTENT_TAGS tags goes whole-page anyway; one whose tags nest deeper is deep;
    else, on a page of more than TREE_SCAN_FROM tags whose start tags do not bound its depth under
    `max_depth`, the parser's tree is measured (up to WALK_ELEMENTS elements; past them, deep)."""
    tags = html.count("<")
    if tags <= max(DEPTH_SCAN_FROM, max_depth):
        return False
    if tags > max(MAIN_CONTENT_TAGS, max_depth):
        return True
    if nesting_depth(html) > max_depth:
        return True
    if tags <= max(TREE_SCAN_FROM, max_depth) or depth_bound(html) <= max_depth:
        return False
    return tree_depth(html, max_depth, WALK_ELEMENTS) > max_depth


# `blocks` in-process runs a batch of pages at a time, each stage over the whole batch, so that
# resiliparse's C++ and our Python each find their caches warm (AEB, 2026-12-01: 1.40 -> 1.25 ms
# per page at 16 pages); the batch also ends at BATCH_CHARS of HTML, which bounds its memory.
BATCH_PAGES, BATCH_CHARS = 16, 4_000_000
_DEEP = object()  # a batch's mark for a page too deep for main-content extraction
_LISTS = object()  # ... and for one whose nested lists would render in the square of their depth


class ExtractTimeout(Exception):
    pass


class ExtractFailed(Exception):
    pass


# --------------------------------------------------------------------------- child process

_HDR = struct.Struct("<BI")  # status (0 ok, 1 error, 2 ok and rescued; | 4 titled), payload length
_TITLE = struct.Struct("<I")  # a titled payload: the title's length, the title, then the text (UTF-8)
_OK, _ERROR, _RESCUED, _TITLED = 0, 1, 2, 4


class _Worker:
    """A child process that extracts pages; killed and restarted when a page runs too long."""

    def __init__(self, backend: str, favor_precision: bool, main_content: bool = True, rescue: bool = True,
                 strict: bool = False):
        self.args = [
            sys.executable,
            "-m",
            "pretrain.curate.extract",
            backend,
            str(int(favor_precision)),
            str(int(main_content)),
            str(int(rescue)),
            str(int(strict)),
        ]
        self.proc: subprocess.Popen | None = None
        self.rescued = 0  # pages the child's rescue gave blocks back (the step's stats read it)
        self.title = ""  # the last page's title (`blocks`: the headline left out of its text)

    def _start(self) -> subprocess.Popen:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen([*self.args, str(os.getpid())], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, bufsize=0)
        return self.proc

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            for f in (self.proc.stdin, self.proc.stdout):
                if f is not None:
                    f.close()
            self.proc = None

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        try:
            self.close()
        except Exception:
            pass

    def extract(self, html: str, timeout_s: float) -> str:
        proc = self._start()
        data = html.encode("utf-8", "surrogatepass")
        try:
            msg = memoryview(struct.pack("<I", len(data)) + data)
            while msg:  # an unbuffered pipe write may be partial
                msg = msg[proc.stdin.write(msg) :]
        except (BrokenPipeError, OSError) as e:
            self.close()
            raise ExtractFailed(f"worker died: {e}") from e
        deadline = time.monotonic() + timeout_s
        try:
            status, n = _HDR.unpack(self._read_exact(_HDR.size, deadline))
            payload = self._read_exact(n, deadline)
        except ExtractTimeout:
            self.close()
            raise
        if status == _ERROR:
            raise ExtractFailed(payload.decode("utf-8", "replace"))
        self.title, at = "", 0
        if status & _TITLED:
            (m,) = _TITLE.unpack_from(payload)
            at = _TITLE.size + m
            self.title = payload[_TITLE.size : at].decode("utf-8", "replace")
        self.rescued += (status & ~_TITLED) == _RESCUED
        return payload[at:].decode("utf-8", "replace")

    def _read_exact(self, n: int, deadline: float) -> bytes:
        fd = self.proc.stdout.fileno()
        buf = bytearray()
        while len(buf) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise ExtractTimeout()
            part = os.read(fd, min(n - len(buf), 1 << 20))
            if not part:
                self.close()
                raise ExtractFailed("worker died")
            buf += part
        return bytes(buf)


def _serve(backend: str, favor_precision: bool, main_content: bool, rescue: bool,
           strict: bool = False) -> None:
    """Child side: read length-prefixed pages from stdin, write status + text to stdout."""
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    while True:
        head = inp.read(4)
        if len(head) < 4:
            return
        (n,) = struct.unpack("<I", head)
        html = inp.read(n).decode("utf-8", "replace")
        try:
            text, rescued, title = _child_extract(html, backend, favor_precision, main_content, rescue,
                                                  strict)
            payload, status = text.encode("utf-8", "replace"), _RESCUED if rescued else _OK
            if title:
                head = title.encode("utf-8", "replace")
                payload, status = _TITLE.pack(len(head)) + head + payload, status | _TITLED
        except Exception as e:  # any failure inside the extractor is reported, never fatal
            payload, status = f"{type(e).__name__}: {e}".encode("utf-8", "replace"), _ERROR
        out.write(_HDR.pack(status, len(payload)) + payload)
        out.flush()


def _child_extract(html: str, backend: str, favor_precision: bool, main_content: bool,
                   rescue: bool, strict: bool = False) -> tuple[str, bool, str]:
    """extract_text, whether the rescue gave the page blocks back and the page's title (blocks
    backend only: the headline it leaves out of the text, as in the step's batches)."""
    if backend != "blocks":
        return extract_text(html, backend, favor_precision, main_content, rescue), False, ""
    from pretrain.curate.extract_blocks import MIN_MAIN_CHARS, strict_model
    from pretrain.curate.extract_body import main_page
    from pretrain.curate.extract_rescue import page_texts

    rescued: list[int] = []
    titles: list[str] = []
    tree, bs, cols = main_page(html)
    text = page_texts([html], [bs], strict_model() if strict else None,
                      min_main_chars=MIN_MAIN_CHARS if rescue else 0, rescued=rescued,
                      cols=[cols], titles=titles, trees=[tree])[0]
    return text, bool(rescued), titles[0]


# --------------------------------------------------------------------------- the step


class ExtractStep(Step):
    """HTML documents -> main text; other documents pass through untouched."""

    name = "extract"

    def __init__(self, cfg: ExtractConfig):
        super().__init__()
        self.cfg = cfg
        isolate = cfg.isolation == "process" or (cfg.isolation == "auto" and cfg.backend == "trafilatura")
        args = (cfg.backend, cfg.favor_precision, cfg.main_content, cfg.rescue, cfg.strict)
        self.worker = _Worker(*args) if isolate else None
        self.batched = self.worker is None and cfg.backend in ("resiliparse", "blocks")
        self._ready: dict[int, str | Exception | object] = {}  # id(doc) -> its batch's result
        self._titles: dict[int, str] = {}  # id(doc) -> the headline `blocks` left out of its text
        if cfg.backend == "blocks":  # stats.json says 0 rather than nothing, in a child or not
            self.stats["rescued"] = 0

    def __call__(self, docs: Iterable[Document]) -> Iterator[Document]:
        if not self.batched:
            yield from super().__call__(docs)
            return
        it = iter(docs)
        while batch := self._next_batch(it):
            t0 = time.perf_counter()
            self.prepare(batch)
            self.stats["seconds"] += time.perf_counter() - t0
            yield from super().__call__(batch)

    def _next_batch(self, it: Iterator[Document]) -> list[Document]:
        batch, chars = [], 0
        for doc in it:
            batch.append(doc)
            chars += len(doc.text)
            if len(batch) >= BATCH_PAGES or chars >= BATCH_CHARS:
                break
        return batch

    def prepare(self, batch: list[Document]) -> None:
        """`blocks`, a batch at a time: resiliparse's pass over every page, then our cutting,
        features and one walk of the trees over all of them, then the rescue of the pages whose
        main content is short (one more walk); `process` then picks up each text."""
        from pretrain.curate.extract_blocks import MIN_MAIN_CHARS
        from pretrain.curate.extract_body import main_page

        self._ready.clear()
        self._titles.clear()
        todo: list[tuple[Document, tuple]] = []
        for doc in batch:
            if not doc.cache.get("html") or self._too_large(doc.text):
                continue
            if self._lists_too_deep(doc.text):
                self._ready[id(doc)] = _LISTS
                continue
            if self.cfg.backend != "blocks":
                try:
                    self._ready[id(doc)] = self._extract(doc.text)
                except ExtractFailed as e:
                    self._ready[id(doc)] = e
                continue
            if too_deep(doc.text, self.cfg.max_depth):
                self._ready[id(doc)] = _DEEP
                continue
            try:
                tree, bs, cols = main_page(doc.text)
                # the tree is kept only for the rescue's whole-page render (short main content)
                short = self.cfg.rescue and sum(len(b.text) for b in bs) < MIN_MAIN_CHARS
                todo.append((doc, (bs, cols, tree if short else None)))
            except Exception as e:  # a parser bug on hostile HTML drops the page, not the batch
                self._ready[id(doc)] = ExtractFailed(f"{type(e).__name__}: {e}")
        try:
            texts: list[str | Exception] = list(self._texts(todo))
        except Exception:  # page by page, so that only the page that fails is dropped
            texts = [self._text(doc, main) for doc, main in todo]
        for (doc, _), text in zip(todo, texts):
            self._ready[id(doc)] = text

    def _texts(self, todo: list[tuple[Document, tuple]]) -> list[str]:
        from pretrain.curate.extract_blocks import MIN_MAIN_CHARS, strict_model
        from pretrain.curate.extract_rescue import page_texts

        gate = MIN_MAIN_CHARS if self.cfg.rescue else 0
        rescued: list[int] = []
        titles: list[str] = []
        model = strict_model() if self.cfg.strict else None
        out = page_texts([doc.text for doc, _ in todo], [bs for _, (bs, _, _) in todo], model,
                         min_main_chars=gate,
                         rescued=rescued, cols=[c for _, (_, c, _) in todo], titles=titles,
                         trees=[t for _, (_, _, t) in todo])
        self.stats["rescued"] += len(rescued)  # pages that got blocks back (a child counts its own)
        self._titles.update((id(doc), t) for (doc, _), t in zip(todo, titles, strict=True) if t)
        return out

    def _text(self, doc: Document, main: tuple) -> str | Exception:
        try:
            return self._texts([(doc, main)])[0]
        except Exception as e:
            return ExtractFailed(f"{type(e).__name__}: {e}")

    def _too_large(self, html: str) -> bool:
        # len(str) <= UTF-8 bytes <= 4 * len(str): encode only when the cheap bounds disagree.
        limit = self.cfg.max_html_bytes
        if len(html) > limit:
            return True
        return 4 * len(html) > limit and len(html.encode("utf-8", "surrogatepass")) > limit

    def _lists_too_deep(self, html: str) -> bool:
        # resiliparse renders nested lists in the square of their depth (`lists_too_deep`); a page
        # may add at most its own size bound in indentation. trafilatura runs under its deadline.
        return self.cfg.backend != "trafilatura" and lists_too_deep(html, self.cfg.max_html_bytes)

    def process(self, doc: Document) -> Document | None:
        if not doc.cache.get("html"):
            return doc
        html = doc.text
        if self._too_large(html):
            self.drop(doc, "html_too_large")
            return None
        text = self._ready.pop(id(doc), None)  # extracted with its batch, else now
        if text is _LISTS or (text is None and self._lists_too_deep(html)):
            self.drop(doc, "html_nested_lists")
            return None
        try:
            if isinstance(text, Exception):
                raise text
            if not isinstance(text, str):
                text = self._extract(html, deep=text is _DEEP or None)
                if self.worker is not None and self.worker.title:
                    self._titles[id(doc)] = self.worker.title
        except ExtractTimeout:
            self.drop(doc, "extract_timeout")
            return None
        except ExtractFailed:
            self.drop(doc, "extract_error")
            return None
        if not text.strip():
            self.drop(doc, "extract_empty")
            return None
        doc.text = text
        doc.cache.clear()  # the text changed: any cached split of the HTML is stale
        title = self._titles.pop(id(doc), "")  # the headline is metadata, not text (blocks)
        if title or self.cfg.backend == "blocks":  # "" when none: one schema for every shard
            doc.metadata.setdefault("title", title)  # a title the record brought stays
        return doc

    def _extract(self, html: str, deep: bool | None = None) -> str:
        """`deep`: whether the page is too deep for main-content extraction, when already known."""
        if self.worker is not None:
            before = self.worker.rescued
            text = self.worker.extract(html, self.cfg.timeout_s)
            if self.worker.rescued != before:
                self.stats["rescued"] += self.worker.rescued - before
            return text
        main, backend = self.cfg.main_content, self.cfg.backend
        # blocks always starts from resiliparse's main content, whatever main_content says
        if (main or backend == "blocks") and backend in ("resiliparse", "blocks"):
            if deep if deep is not None else too_deep(html, self.cfg.max_depth):
                # main-content extraction is quadratic in depth: see the docstring
                main, backend = False, "resiliparse"
                self.stats["deep_whole_page"] += 1
        try:
            return extract_text(html, backend, self.cfg.favor_precision, main, self.cfg.rescue,
                                self.cfg.strict)
        except Exception as e:  # a parser bug on hostile HTML drops the page, not the run
            raise ExtractFailed(f"{type(e).__name__}: {e}") from e

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()


def build_extract_step(cfg: ExtractConfig) -> Step:
    """The `extract` step for a config."""
    return ExtractStep(cfg)


if __name__ == "__main__":
    from pretrain.lifeline import init_worker

    # A page can run for minutes (the reason for this child): it must not outlive its parent.
    init_worker(int(sys.argv[6]))
    _serve(sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1", sys.argv[4] == "1", sys.argv[5] == "1")
