"""A Jupyter Server extension that serves the chat panel's code at ``{base_url}nbchat/static/``.

Enabled by the ``jupyter_server_config.d/nbchat.json`` that the package installs.
Only the two versioned files of :mod:`nbchat.jupyter.panel._assets` are served, and
cached for good (a new release has new names). The route is a Jupyter Server
handler like every other: it sends ``X-Content-Type-Options: nosniff``, the
server's ``Content-Security-Policy`` and the headers an administrator sets in
``ServerApp.tornado_settings["headers"]``, checks the Host, and needs the same
login as the page that loads it. The panel's page is always logged in; a visitor
who is not gets the login page, never the code (nor which version is installed).
"""

from __future__ import annotations

from typing import Any

from jupyter_server.base.handlers import JupyterHandler
from tornado import web

from ...base._across import STATIC_ROUTE
from ..panel._assets import asset

ROUTE = STATIC_ROUTE
CACHE_FOR_GOOD = "public, max-age=31536000, immutable"


class AssetHandler(JupyterHandler):
    """The panel's versioned module and stylesheet, with every Jupyter Server header."""

    @web.authenticated
    def get(self, name: str) -> None:
        found = asset(name)
        if found is None:
            raise web.HTTPError(404)
        body, kind = found
        self.set_header("Content-Type", kind)
        self.set_header("Cache-Control", CACHE_FOR_GOOD)
        self.finish(body)


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "nbchat.jupyter.server.extension"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    web_app = serverapp.web_app
    base = web_app.settings.get("base_url", "/").rstrip("/") + "/"
    web_app.add_handlers(".*$", [(f"{base}{ROUTE}([A-Za-z0-9_.-]+)", AssetHandler)])
    from . import complete as _completion_endpoint
    from . import mcp as _agent_endpoint

    notebooks = _agent_endpoint.ServerNotebooks(serverapp)
    _agent_endpoint.add_routes(serverapp, notebooks)  # outside agents' MCP, at nbchat/mcp
    _completion_endpoint.add_routes(serverapp, notebooks)  # code suggestions, at nbchat/complete
    from . import connect as _connect_endpoint

    _connect_endpoint.add_routes(serverapp)  # the Connect dialog's, at nbchat/connections
    from . import provided as _provided_endpoints

    _provided_endpoints.add_routes(serverapp)  # the administrator's, at nbchat/provided/<name>
