"""Exceptions shared by the whole package."""


class UserError(Exception):
    """An error the user can fix (missing input, bad config, unwritable output).

    The CLI prints it as one line without a traceback and exits non-zero.
    """


class DataError(ValueError):
    """A bad record or file: names the file, the record and the reason."""

    def __init__(self, path: str, record: object, reason: str):
        self.path, self.record, self.reason = str(path), record, reason
        super().__init__(f"{path}: record {record}: {reason}")
