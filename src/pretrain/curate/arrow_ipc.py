"""The Arrow IPC reader (`read_arrow`, the `.arrow` entry of `readers.FORMATS`): the shards that HF
`datasets`' `save_to_disk` writes (`data-00000-of-00002.arrow`, IPC stream format) and Arrow IPC
files (`ARROW1` magic), read as the Parquet reader reads a row group: the text, id, url and
metadata columns named by `ReaderConfig`, 64 rows at a time, a row whose strings exceed
`max_record_bytes` reported and skipped before it becomes Python objects.

The file is memory-mapped, so a record batch costs address space, not memory, until its rows are
converted. Arrow's own reader trusts the offsets in the file: each batch is validated in full
(offsets inside their buffers, strings UTF-8) before a value is read, and a batch that fails is
reported (`record batch N`) and skipped. A file that is not Arrow at all is refused in one line
that names the way out (`Dataset.to_parquet`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from pretrain.curate.document import Document
from pretrain.curate.readers import OnError, ReaderConfig

HINT = "save it with Dataset.to_parquet(...) or to_json(...) instead"


def _batches(source, wanted):
    """(schema, record batches) of an IPC file (random access) or stream (what save_to_disk writes),
    the batches holding only the columns `wanted(schema)` names: other columns (images,
    embeddings) are neither decompressed nor validated."""
    import pyarrow as pa

    def options(schema):
        names = wanted(schema)
        return pa.ipc.IpcReadOptions(included_fields=[i for i, n in enumerate(schema.names) if n in names])

    try:
        schema = pa.ipc.open_file(source).schema
        reader = pa.ipc.open_file(source, options=options(schema))
        return schema, (reader.get_batch(i) for i in range(reader.num_record_batches))
    except pa.ArrowInvalid:
        source.seek(0)
        schema = pa.ipc.open_stream(source).schema
        source.seek(0)
        return schema, iter(pa.ipc.open_stream(source, options=options(schema)))


def read_arrow(path: Path, cfg: ReaderConfig, on_error: OnError, src: str,
               _stats: Counter | None = None) -> Iterator[Document]:
    import pyarrow as pa

    from pretrain.curate.parquet import PARQUET_BATCH_ROWS, _parquet_doc, _parquet_rows, read_columns

    def wanted(schema) -> list[str]:
        return read_columns(schema, cfg)[0]

    try:
        source = pa.memory_map(str(path), "r")
        schema, batches = _batches(source, wanted)
    except (pa.ArrowException, OSError, ValueError) as e:
        on_error(str(path), None, f"not a readable Arrow IPC file ({type(e).__name__}: {e}); {HINT}")
        return
    with source:
        if cfg.text_field not in schema.names:
            on_error(str(path), None,
                     f"missing text column {cfg.text_field!r} (columns: {sorted(schema.names)})")
            return
        cols, dated = read_columns(schema, cfg)
        core = [c for c in (cfg.text_field, cfg.id_field, cfg.url_field, cfg.metadata_field) if c in cols]
        row, b = 0, 0
        while True:
            try:
                batch = next(batches, None)
                if batch is None:
                    break
                batch.select(core).validate(full=True)
            except (pa.ArrowException, OSError, ValueError) as e:
                on_error(str(path), f"record batch {b}", f"unreadable ({type(e).__name__}: {e}); the rest of "
                         f"the file is skipped; {HINT}")
                return
            batch = batch.select(core + _valid_extras(batch, core, cols, path, b, on_error))
            for start in range(0, batch.num_rows, PARQUET_BATCH_ROWS):
                for i, obj in _parquet_rows(batch.slice(start, PARQUET_BATCH_ROWS), cfg.max_record_bytes):
                    doc = _parquet_doc(obj, row + start + i, cfg, src, path, on_error, dated)
                    if doc is not None:
                        yield doc
            row, b = row + batch.num_rows, b + 1
    if row == 0:
        on_error(str(path), None, "empty file")


def _valid_extras(batch, core: list[str], cols: list[str], path: Path, b: int,
                  on_error: OnError) -> list[str]:
    """The columns beside text, id, url and metadata (they go to the metadata) that validate in
    full; one that does not is left out of this batch, in one line: the text still comes."""
    import pyarrow as pa

    kept = []
    for name in cols:
        if name in core:
            continue
        try:
            batch.column(name).validate(full=True)
            kept.append(name)
        except (pa.ArrowException, ValueError) as e:
            on_error(str(path), f"record batch {b}", f"column {name!r} unreadable ({type(e).__name__}: {e}): "
                     "left out of the metadata")
    return kept
