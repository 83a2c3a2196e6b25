"""Exceptions shared by the whole package, and the one line an object store's refusal becomes."""

import difflib
import re


class UserError(Exception):
    """An error the user can fix (missing input, bad config, unwritable output).

    The CLI prints it as one line without a traceback and exits non-zero.
    """


def did_you_mean(name: str, known: list[str]) -> str:
    """' (did you mean 'h100'?)' for a near miss, else '': a typo should not send a newcomer to
    read the whole list."""
    close = difflib.get_close_matches(name.lower(), known, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def not_found(what: str, path: object) -> UserError:
    """"<what> not found: <path>", and for a relative path where it was looked for: paths in a
    --config file are read from the working directory, not the config's folder (a newcomer's
    `model = "quality.json"` beside `belt.toml` was "not found" with no word of where)."""
    from pathlib import Path

    relative = not Path(str(path)).is_absolute()
    where = f" (a relative path, read from the working directory {Path.cwd()})" if relative else ""
    return UserError(f"{what} not found: {path}{where}")


class DataError(ValueError):
    """A bad record or file: names the file, the record and the reason."""

    def __init__(self, path: str, record: object, reason: str):
        self.path, self.record, self.reason = str(path), record, reason
        super().__init__(f"{path}: {'' if record is None else f'record {record}: '}{reason}")


# The client libraries of object stores: an exception of theirs anywhere in an error's chain means
# the store (or the road to it) refused, which the user fixes with an endpoint, a key or a policy.
_STORAGE_CLIENTS = ("botocore", "aiobotocore", "s3fs", "gcsfs", "google.auth", "google.api_core",
                    "adlfs", "azure.core")

# What to check, by the client's exception class name.
_STORAGE_HINTS = {
    "EndpointConnectionError": "is the endpoint up? AWS_ENDPOINT_URL_S3 names it",
    "ConnectTimeoutError": "is the endpoint up? AWS_ENDPOINT_URL_S3 names it",
    "NoCredentialsError": "set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
    "PartialCredentialsError": "set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
}


def storage_error(e: BaseException) -> str | None:
    """One line for an object store's refusal (endpoint down, no or wrong credentials, access
    denied) anywhere in `e`'s chain (s3fs turns botocore's errors into OSErrors caused by them; a
    Ray task's error holds its cause); None when `e` is not one."""
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if type(cur).__module__.startswith(_STORAGE_CLIENTS):
            shown = e
            while getattr(shown, "cause", None) is not None:  # a Ray task's error: its text is a traceback
                shown = shown.cause
            text = str(shown).strip().splitlines()[0] if str(shown).strip() else type(cur).__name__
            text = re.sub(r'\?[^"\s]*', "", text)  # the request's query string says nothing to a user
            hint = _STORAGE_HINTS.get(type(cur).__name__)
            if hint is None and isinstance(e, PermissionError):
                hint = "check the credentials and what they may access"
            return f"object storage: {text}" + (f" ({hint})" if hint else "")
        cur = cur.__cause__ or cur.__context__ or getattr(cur, "cause", None)
    return None
