"""GENAI_RESPONSES_DB, checked at start: a SQLite file's path, or a PostgreSQL URL libpq can
read. A value that looks like a URL (``scheme://``, any case) is never taken as a path: a
near-miss (``postgresql+psycopg://``, ``mysql://``, ``sqlite:///x.db``) would otherwise open a
SQLite file in a folder named after the URL, its password in the path, and replicas would
silently keep separate stores.

The value holds a password, so no message here quotes it, nor libpq's reading of it (libpq
quotes the part it could not read): a refusal says what is wrong in words of its own.
"""

from __future__ import annotations

import re

import psycopg
from psycopg.conninfo import conninfo_to_dict

POSTGRES_SCHEMES = ("postgresql", "postgres")  # what libpq reads as a URL
_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*)://")
_POSTGRES_WITHOUT_SLASHES = re.compile(r"(?i)postgres(ql)?(\+[^:/]*)?:(?!//)")
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")


def served_location(value: str) -> str:
    """``value`` as the store takes it (a PostgreSQL URL's scheme in lower case), or a
    ValueError saying why it cannot be served, without quoting it."""
    if value != value.strip():
        raise ValueError(
            "starts or ends with whitespace; remove it (it would be part of the file's name "
            "or the URL)"
        )
    if _POSTGRES_WITHOUT_SLASHES.match(value):
        raise ValueError("a PostgreSQL URL starts with postgresql:// (two slashes)")
    found = _URL.match(value)
    if found is None:
        return value  # a SQLite file's path
    given = found.group(1)
    scheme = given.lower()
    if scheme in POSTGRES_SCHEMES:
        url = scheme + value[found.end(1) :]  # libpq reads the scheme in lower case only
        _check_readable(url)
        return url
    if scheme.startswith(("postgresql+", "postgres+")):
        raise ValueError(
            f"{given}:// is SQLAlchemy's way to name a driver; write postgresql:// (the rest "
            "unchanged)"
        )
    if scheme in ("sqlite", "file"):
        raise ValueError(f"{given}:// is no URL this server reads; give the SQLite file's path")
    raise ValueError(
        f"{given}:// is not a database this server keeps Responses in; give a postgresql:// "
        "URL or a SQLite file's path"
    )


def _check_readable(url: str) -> None:
    """A ValueError, in words that quote nothing of ``url``, when libpq cannot read it."""
    if any(c.isspace() for c in url):  # libpq drops some (a password's last), refuses others
        why = "it has a space; write a space in it as %20"
    elif _readable(url):
        return
    elif _BAD_PERCENT.search(url):
        why = "it has a % not followed by two hex digits; write a % in it as %25"
    elif url.count("[") != url.count("]"):
        why = "an IPv6 host's [ has no matching ]"
    elif "?" in url:
        why = "a query parameter is not one of libpq's connection parameters"
    else:
        why = "libpq cannot read it"
    raise ValueError(
        f"is not a valid PostgreSQL URL ({why}); the form is "
        "postgresql://USER:PASSWORD@HOST:PORT/DATABASE, special characters percent-encoded"
    )


def _readable(url: str) -> bool:
    try:
        conninfo_to_dict(url)
    except psycopg.ProgrammingError:  # its message quotes the URL, or the part it stopped at
        return False
    return True
