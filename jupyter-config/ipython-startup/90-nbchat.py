"""Make ``%chat`` / ``%%chat`` available in every IPython of this environment (nbchat).

pip installs this file into ``{sys.prefix}/etc/ipython/startup/``, which IPython
runs at the start of every shell and kernel. It imports nothing from nbchat:
the magic is registered lazily and nbchat loads on the first ``%chat``. Set
``NBCHAT_NO_AUTOLOAD=1`` to turn it off; ``%load_ext nbchat`` works either way.

Startup files run in the user's namespace, so this one leaves no names behind.
"""


def _nbchat_autoload():
    import os

    # Spelled once in nbchat.base.config.ENV_NO_AUTOLOAD; importing it here would
    # import nbchat in every kernel.
    if os.environ.get("NBCHAT_NO_AUTOLOAD", "").strip().lower() not in ("", "0", "false", "no"):
        return
    from importlib.util import find_spec

    from IPython import get_ipython

    ip = get_ipython()
    if ip is None or find_spec("nbchat") is None:
        return
    if "nbchat" in ip.extension_manager.loaded:
        return
    ip.magics_manager.register_lazy("chat", "nbchat")

    def protect_chat_questions(lines):
        # Before nbchat loads, `%chat What is Python?` would become a help
        # request; hand such cells to nbchat's own transformer (which loads it).
        if any("%chat" in line and line.rstrip().endswith("?") for line in lines):
            try:
                from nbchat.jupyter.magic.magics import protect_chat_questions as transform
            except Exception:  # nbchat broken: IPython's own reading of the cell
                return lines
            return transform(lines)
        return lines

    ip.input_transformers_cleanup.append(protect_chat_questions)


try:  # noqa: SIM105 - contextlib would be one more name left in the user namespace
    _nbchat_autoload()
except Exception:  # a broken install must never break the user's kernel
    pass
del _nbchat_autoload
