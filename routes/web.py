"""The web playground: the static files in ``web/``, served at ``/`` by Starlette's
``StaticFiles`` (``GENAI_WEB_UI=false`` leaves them out).

The page is a client of the public API like any other: its own files are open, its API calls
send the key the user types. The mount answers only the page's own paths, listed from the
folder (:func:`page_paths`), so every other path keeps the API's 404/405 in the one error shape
instead of falling into a catch-all; routes/http/auth.py opens the same list.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.routing import Match, Mount
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

WEB_DIR = Path(__file__).resolve().parent.parent / "web"


def page_paths(directory: Path = WEB_DIR) -> frozenset[str]:
    """The URL path of every file in ``directory``, and of each folder holding an
    ``index.html`` (``/`` for the top one)."""
    paths: set[str] = set()
    for file in directory.rglob("*"):
        if not file.is_file():
            continue
        relative = file.relative_to(directory).as_posix()
        paths.add(f"/{relative}")
        if file.name == "index.html":
            paths.add(f"/{relative.removesuffix('index.html')}")
    return frozenset(paths)


class PageMount(Mount):
    """A mount at ``/`` that matches only ``paths``: unknown paths still reach the API's
    own 404 (and wrong methods its 405) instead of StaticFiles' catch-all."""

    def __init__(self, directory: Path, paths: frozenset[str]) -> None:
        super().__init__("/", app=StaticFiles(directory=directory, html=True), name="web")
        self.paths = paths

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] != "http" or scope["path"] not in self.paths:
            return Match.NONE, {}
        return super().matches(scope)


def mount_page(app: FastAPI, directory: Path = WEB_DIR) -> None:
    """Serve the playground at ``/``; after the API's routers, which keep precedence."""
    app.router.routes.append(PageMount(directory, page_paths(directory)))
