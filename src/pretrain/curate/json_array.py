"""JSON records as other tools frame them: a file that is one array of records (`[{...}, {...}]`),
read one element at a time (`read_json_array`); a first line's UTF-8 BOM or UTF-16/32 encoding
(`first_line`); ids that are not strings (`record_id`). Used by `readers._read_jsonl`.

HF `datasets`' `Dataset.to_json(..., lines=False)` and pandas' `to_json(orient="records")` write
the whole array on one line, often far larger than `max_record_bytes`: read as JSON Lines, such a
file was one oversized "line" and no document came out. `read_json_array` parses the stream
element by element with the stdlib's `raw_decode`, holding at most one element (bounded by
`max_record_bytes`) and 1 MiB of lookahead, so a 10 GB array costs what a 10 GB JSONL file does.
An element over the bound is stepped over unparsed (quotes, escapes and brackets only) and reading
goes on. So is a malformed object or array (a trailing comma, a bare word, a number past 4,300
digits, nesting past the recursion limit): skipped and counted with its index, the elements after
it kept, when its quotes and brackets balance and a ',' or ']' follows it. Otherwise where the next
element starts is unknown: it is reported with its index and the rest of the file is skipped, as
for a truncated stream. `readers._read_jsonl` calls it when a file's first character is `[`.
"""

from __future__ import annotations

import codecs
import json
import lzma
import re
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import zstandard

from pretrain.curate.document import Document
from pretrain.untrusted import lone_surrogate

CHUNK = 1 << 20
_DECODER = json.JSONDecoder()
_WS = " \t\r\n"
STREAM_ERRORS = (OSError, EOFError, zlib.error, zstandard.ZstdError, lzma.LZMAError)


class _Buffer:
    """Decoded text of the stream from the current element on; refilled 1 MiB at a time."""

    def __init__(self, head: bytes, stream):
        self.dec = codecs.getincrementaldecoder("utf-8")()
        self.stream, self.eof = stream, False
        self.text, self.pos = self.dec.decode(head), 0

    def more(self) -> None:
        chunk = self.stream.readline(CHUNK)  # readline(n) returns at most n bytes: a bounded read
        self.text = self.text[self.pos:] + self.dec.decode(chunk, final=not chunk)
        self.pos, self.eof = 0, not chunk

    def skip_ws(self) -> str:
        """The next non-blank character ("" at the end of the stream), not consumed."""
        while True:
            while self.pos < len(self.text) and self.text[self.pos] in _WS:
                self.pos += 1
            if self.pos < len(self.text) or self.eof:
                return self.text[self.pos] if self.pos < len(self.text) else ""
            self.more()


def _incomplete(e: json.JSONDecodeError, text: str) -> bool:
    """True when the parse failed because the buffer ended inside the element (more bytes may
    complete it), not because of a syntax error before the end."""
    return e.msg.startswith("Unterminated string") or e.pos >= len(text) - 16


_SPECIAL = re.compile(r'["{}\[\]]')
_IN_STRING = re.compile(r'["\\]')


def _skip_value(buf: _Buffer) -> bool:
    """Consume one object or array from `buf.pos` without parsing it, holding 1 MiB at a time
    (quotes, escapes and brackets only: an oversized element is stepped over, whatever its size);
    False when the stream ends inside it or a closing bracket does not match its opening one."""
    opened, in_string = [], False  # the closers owed, innermost last
    while True:
        text, i = buf.text, buf.pos
        while True:
            m = (_IN_STRING if in_string else _SPECIAL).search(text, i)
            if m is None:
                i = len(text)
                break
            c, i = m.group(), m.end()
            if in_string:
                if c == "\\":
                    if i == len(text):  # the escaped character is in the next chunk
                        i -= 1
                        break
                    i += 1
                else:
                    in_string = False
            elif c == '"':
                in_string = True
            elif c in "{[":
                opened.append("}" if c == "{" else "]")
            elif not opened or opened.pop() != c:
                buf.pos = i
                return False
            elif not opened:
                buf.pos = i
                return True
        buf.pos = i  # all of the chunk is consumed, but for an escape cut at its end
        if buf.eof:
            return False
        buf.more()


MakeDoc = Callable[[dict, int, Callable[[str], None]], "Document | None"]


def read_json_array(head: bytes, stream, path: Path, max_bytes: int, on_error: Callable,
                    make: MakeDoc) -> Iterator[Document]:
    """Documents of a JSON array whose first bytes are `head` (the rest comes from `stream`'s
    bounded `readline`); `make(obj, index, err)` builds one. Errors go to `on_error` as
    (path, "element N", reason)."""
    index = 0
    try:
        buf = _Buffer(head, stream)
        buf.skip_ws()
        buf.pos += 1  # the "["
        while True:
            c = buf.skip_ws()
            if c == "]":
                buf.pos += 1
                if buf.skip_ws():  # JSON Lines of arrays, or two arrays: nothing after the first is read
                    on_error(str(path), f"element {index}",
                             "data after the JSON array's closing ']': skipped")
                return
            if index and c == ",":
                buf.pos += 1
                c = buf.skip_ws()
            elif index and c:
                on_error(str(path), f"element {index}",
                         f"malformed JSON array: expected ',' or ']', got {c!r}; "
                         "the rest of the file is skipped")
                return
            if not c:
                on_error(str(path), f"element {index}", "JSON array ends without ']' (truncated file?)")
                return
            obj = _element(buf, path, index, max_bytes, on_error)
            if obj is None:
                return
            if obj is not False:
                doc = make(obj, index, lambda reason, i=index: on_error(str(path), f"element {i}", reason))
                if doc is not None:
                    yield doc
            index += 1
    except UnicodeDecodeError as e:
        on_error(str(path), f"element {index}",
                 f"invalid UTF-8 ({e.reason}); the rest of the file is skipped")
    except STREAM_ERRORS as e:
        on_error(str(path), f"element {index}", f"unreadable or truncated compressed stream: {e}")


def _element(buf: _Buffer, path: Path, index: int, max_bytes: int, on_error: Callable):
    """The next element as a dict; False when it is not an object (reported, reading goes on);
    None when the array cannot be read further (reported)."""
    where = f"element {index}"
    while True:
        try:
            obj, end = _DECODER.raw_decode(buf.text, buf.pos)
            break
        except json.JSONDecodeError as e:
            if buf.eof or not _incomplete(e, buf.text):
                return _step_over_malformed(buf, path, index, e.msg, on_error)
            if len(buf.text) - buf.pos > max_bytes:  # stepped over unparsed, then reading goes on
                if not _skip_value(buf):
                    on_error(str(path), where, "JSON array ends inside an element (truncated file?), or its "
                             "brackets do not match")
                    return None
                on_error(str(path), where, f"record larger than max_record_bytes={max_bytes}")
                return False
            buf.more()
        except RecursionError:
            return _step_over_malformed(buf, path, index, "nested too deeply", on_error)
        except ValueError as e:  # an integer past Python's 4300-digit limit
            return _step_over_malformed(buf, path, index, str(e), on_error)
    text, buf.pos = buf.text[buf.pos:end], end
    if len(text) > max_bytes:
        on_error(str(path), where, f"record larger than max_record_bytes={max_bytes}")
        return False
    if not isinstance(obj, dict):
        on_error(str(path), where, f"expected a JSON object, got {type(obj).__name__}")
        return False
    if (why := lone_surrogate(text, obj)) is not None:
        on_error(str(path), where, why)
        return False
    return obj


def _step_over_malformed(buf: _Buffer, path: Path, index: int, why: str, on_error: Callable):
    """False (reported: element `index` skipped, reading goes on) when the malformed element at
    `buf.pos` is an object or array whose quotes and brackets balance and a ',' or ']' follows it;
    else None (reported: the rest of the file is skipped, where the next element starts is unknown)."""
    where = f"element {index}"
    if buf.text[buf.pos:buf.pos + 1] in ("{", "[") and _skip_value(buf) and buf.skip_ws() in (",", "]"):
        on_error(str(path), where, f"malformed JSON in element {index}: {why}; that element is skipped")
        return False
    on_error(str(path), where, f"malformed JSON in element {index}: {why}; the rest of the file is skipped")
    return None


# Byte order marks, and how UTF-16/32 JSON starts without one ('{' then NUL, or NUL then '{').
_WIDE_STARTS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
                (b"\xfe\xff", "UTF-16"), (b"{\x00", "UTF-16"), (b"\x00{", "UTF-16"), (b"[\x00", "UTF-16"),
                (b"\x00[", "UTF-16"))


def first_line(line: bytes) -> tuple[bytes, str | None]:
    """A file's first line less a UTF-8 BOM (Notepad, PowerShell and Python's utf-8-sig write one;
    json.loads refuses it, so the first record was lost), or the reason a UTF-16/32 file (Windows
    tools' "Unicode") is refused whole: every line of it would fail, one error each."""
    if line.startswith(b"\xef\xbb\xbf"):
        return line[3:], None
    for start, codec in _WIDE_STARTS:
        if line.startswith(start):
            return line, f"{codec} text, not UTF-8: convert it first (iconv -f {codec} -t UTF-8)"
    return line, None


def record_id(rid: object) -> str | None:
    """A record's own id as a string, or None (derive one): strings and integers as written; a
    float that holds an integer as that integer (pandas stores an integer column with a gap as
    float64: to_json writes 7.0, to_parquet a double), another finite float as Python spells it."""
    import math

    if isinstance(rid, bool) or rid is None or rid == "":
        return None
    if isinstance(rid, (str, int)):
        return str(rid)
    if isinstance(rid, float) and math.isfinite(rid):
        return str(int(rid)) if rid.is_integer() else repr(rid)
    return None
