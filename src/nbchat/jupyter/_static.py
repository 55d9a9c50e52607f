"""A Jupyter Server extension that serves the chat panel's code at ``{base_url}nbchat/static/``.

Enabled by the ``jupyter_server_config.d/nbchat.json`` that the package installs.
Only the two versioned files of :mod:`nbchat.jupyter._panel_assets` are served, to anyone
(they are the package's own public code), and cached for good.
"""

from __future__ import annotations

from typing import Any

from tornado import web

from ._panel_assets import asset

ROUTE = "nbchat/static/"


class _Asset(web.RequestHandler):
    def get(self, name: str) -> None:
        found = asset(name)
        if found is None:
            raise web.HTTPError(404)
        body, kind = found
        self.set_header("Content-Type", kind)
        self.set_header("Cache-Control", "public, max-age=31536000, immutable")
        self.finish(body)


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "nbchat.jupyter._static"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    web_app = serverapp.web_app
    base = web_app.settings.get("base_url", "/").rstrip("/") + "/"
    web_app.add_handlers(".*$", [(f"{base}{ROUTE}([A-Za-z0-9_.-]+)", _Asset)])
