"""The public surface: names, import weight, documentation of every %chat option."""

from __future__ import annotations

import subprocess
import sys

import nbchat

# What lies outside the layer contracts (pyproject.toml, run by `lint-imports`):
# the package root and the scripted server must not pull in a Jupyter front end.
OUTSIDE_LAYERS = ["nbchat", "nbchat.testing"]


def test_all_is_sorted_complete_and_importable():
    assert nbchat.__all__ == sorted(nbchat.__all__, key=lambda n: (n.upper() != n, n))
    assert all(hasattr(nbchat, name) for name in nbchat.__all__)
    public = {n for n, v in vars(nbchat).items() if not n.startswith("_")
              and getattr(v, "__module__", "").startswith("nbchat")}
    assert public <= set(nbchat.__all__)


def test_the_root_and_the_scripted_server_import_no_jupyter_front_end():
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in OUTSIDE_LAYERS)
        + "print(sorted(m for m in ('IPython', 'ipywidgets', 'jupyterlab', 'ipykernel')"
        " if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout == "[]\n"


def test_import_nbchat_imports_only_the_errors_and_a_name_imports_its_module():
    code = (
        "import sys, nbchat\n"
        "print(sorted(m for m in sys.modules if m.startswith(('nbchat', 'httpx', 'tinydb'))))\n"
        "from nbchat import Chat\n"
        "print(Chat.__module__, 'nbchat.engine.chat' in sys.modules, 'Chat' in vars(nbchat))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    first, then = done.stdout.splitlines()
    assert first == str(["nbchat", "nbchat.base", "nbchat.base.errors"])
    assert then == "nbchat.engine.chat True True"  # imported once, then an attribute as before
    assert sorted(set(dir(nbchat)) & set(nbchat.__all__)) == sorted(nbchat.__all__)


def test_the_old_flat_module_paths_are_gone():
    code = (
        "import importlib, nbchat\n"
        "gone = []\n"
        "for old in ('nbchat.chat', 'nbchat.errors', 'nbchat.widgets', 'nbchat.magics',\n"
        "            'nbchat.jupyter.magics', 'nbchat.jupyter._static'):\n"
        "    try:\n"
        "        importlib.import_module(old)\n"
        "    except ModuleNotFoundError:\n"
        "        gone.append(old)\n"
        "from nbchat.jupyter.panel.widget import ChatPanel\n"
        "print(len(gone), hasattr(nbchat, 'errors'), ChatPanel.__module__)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout == "6 False nbchat.jupyter.panel.widget\n"


def test_every_error_is_an_nbchat_error_and_exported():
    errors = [v for v in vars(nbchat.base.errors).values()
              if isinstance(v, type) and issubclass(v, Exception)]
    assert len(errors) > 20 and all(issubclass(e, nbchat.NbchatError) for e in errors)
    assert not any(issubclass(e, KeyError) for e in errors)
    assert {e.__name__ for e in errors} <= set(nbchat.__all__)


def test_every_chat_option_is_documented_in_the_help():
    from nbchat.jupyter.magic.magics import ChatMagics

    doc = ChatMagics.chat_magic.__doc__
    for option in ("--thread", "--new", "--model", "--system", "--history", "--no-stream",
                   "--no-interpolate", "--code", "--error", "--list", "--show", "--use",
                   "--rename", "--delete", "--export", "--models", "--panel", "--answer",
                   "--fix", "--figure", "--context-budget", "--agent", "--key", "--mcp"):
        assert option in doc, option
    assert "Examples::" in doc and "%%chat" in doc and "%config ChatMagics" in doc


def test_errors_pickle_with_their_attributes():
    import pickle

    error = nbchat.RateLimited("slow down", url="http://x", retry_after=3.0)
    again = pickle.loads(pickle.dumps(error))
    assert (type(again), str(again), again.url, again.retry_after) == (
        nbchat.RateLimited, "slow down", "http://x", 3.0)
