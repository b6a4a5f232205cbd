"""GENAI_RESPONSES_DB read at start: a SQLite file's path or a PostgreSQL URL libpq can read;
a URL of any other scheme is refused, never taken as a path, and no refusal quotes the value
(its password)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from config.responses_db import served_location
from config.settings import ServerSettings
from tests.leaks import assert_not_leaked

pytestmark = pytest.mark.unit

PASSWORD = "Pw-9f8e7d6c5b4a"


@pytest.mark.parametrize(
    ("given", "served"),
    [
        ("responses.db", "responses.db"),
        ("/var/lib/genai/responses.db", "/var/lib/genai/responses.db"),
        ("~/responses.db", "~/responses.db"),
        ("postgresql://app@db:5432/genai", "postgresql://app@db:5432/genai"),
        (f"postgres://app:{PASSWORD}@db/genai", f"postgres://app:{PASSWORD}@db/genai"),
        ("postgresql://app@db/genai?sslmode=require", "postgresql://app@db/genai?sslmode=require"),
        ("postgresql://app:p%40ss@[::1]:5432/genai", "postgresql://app:p%40ss@[::1]:5432/genai"),
        # A scheme is read in any case (RFC 3986); libpq reads it in lower case only.
        ("PostgreSQL://app@db/genai", "postgresql://app@db/genai"),
        ("POSTGRES://app@db/genai", "postgres://app@db/genai"),
    ],
)
def test_paths_and_postgresql_urls_are_served(given: str, served: str) -> None:
    assert ServerSettings(responses_db=given).responses_db == served


def test_a_path_object_is_a_path() -> None:
    assert ServerSettings(responses_db=Path("/data/r.db")).responses_db == "/data/r.db"


def refusal(value: str) -> str:
    """The one message a refused GENAI_RESPONSES_DB gets (pydantic's own, less its input)."""
    with pytest.raises(ValidationError) as caught:
        ServerSettings(responses_db=value)
    (error,) = caught.value.errors()
    assert error["loc"] == ("responses_db",)
    message = error["msg"]
    assert "\n" not in message
    assert_not_leaked(message, PASSWORD)
    return message


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (f"postgresql://app:{PASSWORD[:7]}%zz{PASSWORD[7:]}@db/genai", "% not followed by two"),
        (f"postgresql://app:{PASSWORD[:7]} {PASSWORD[7:]}@db/genai", "it has a space"),
        (f"postgresql://app:{PASSWORD}@[::1:5432/genai", "[ has no matching ]"),
        (f"postgresql://app:{PASSWORD}@db/genai?{PASSWORD}=1", "a query parameter"),
    ],
)
def test_a_postgresql_url_libpq_cannot_read_is_refused_without_quoting_it(
    value: str, words: str
) -> None:
    message = refusal(value)
    assert "is not a valid PostgreSQL URL" in message and words in message


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("postgresql+psycopg://app:{pw}@db/genai", "postgresql+psycopg:// is SQLAlchemy's"),
        ("postgres+psycopg2://app:{pw}@db/genai", "postgres+psycopg2:// is SQLAlchemy's"),
        ("mysql://app:{pw}@db/genai", "mysql:// is not a database this server keeps"),
        ("HTTPS://app:{pw}@db/genai", "HTTPS:// is not a database"),
        ("sqlite:///var/{pw}/r.db", "give the SQLite file's path"),
        ("file:///var/{pw}/r.db", "give the SQLite file's path"),
        ("postgresql:/app:{pw}@db/genai", "starts with postgresql:// (two slashes)"),
        ("PostgreSQL:app:{pw}@db/genai", "starts with postgresql:// (two slashes)"),
        (" postgresql://app:{pw}@db/genai", "starts or ends with whitespace"),
        ("postgresql://app:{pw}@db/genai\n", "starts or ends with whitespace"),
        (" responses.db", "starts or ends with whitespace"),
    ],
)
def test_a_url_of_another_scheme_is_refused_not_taken_as_a_path(value: str, words: str) -> None:
    assert words in refusal(value.format(pw=PASSWORD))


def test_the_function_alone_says_the_same() -> None:
    with pytest.raises(ValueError, match="mysql:// is not a database"):
        served_location("mysql://db/genai")
    assert served_location("C:/data/r.db") == "C:/data/r.db"  # a drive letter is no scheme
