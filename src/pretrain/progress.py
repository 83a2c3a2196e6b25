"""Progress bars and summaries on the terminal (rich), quiet when output is not a terminal."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


class Progress:
    """Named phases, each a bar that advances by one per finished unit (shard, partition)."""

    def __init__(self, enabled: bool | None = None):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress

        self.console = Console(stderr=True)
        enabled = sys.stderr.isatty() if enabled is None else enabled
        self._bar = RichProgress(
            TextColumn("[bold]{task.description:<8}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            console=self.console,
            disable=not enabled,
            transient=False,
        )
        self._tasks: dict[str, Any] = {}
        self._docs: dict[str, int] = {}

    def start(self, name: str, total: int) -> Callable[[Any], None]:
        if not self._tasks:
            self._bar.start()
        self._tasks[name] = self._bar.add_task(name, total=total, info="")
        self._docs[name] = 0

        def tick(result: Any = None) -> None:
            if isinstance(result, dict):
                self._docs[name] += int(result.get("read", result.get("in", 0)) or 0)
            self._bar.update(self._tasks[name], advance=1, info=f"{self._docs[name]:,} docs")

        return tick

    def stop(self, name: str) -> None:
        self._bar.refresh()

    def close(self) -> None:
        if self._tasks:
            self._bar.stop()
