"""Whether code the model wants to run needs the person's yes: the approval policy.

Three policies, strictest first: ``always`` ask (the default), ``risky`` (run
without asking only code this module finds harmless), ``never-ask``. An
administrator caps the policy with ``NBCHAT_MAX_APPROVAL``; the stricter of
the cap and the user's choice wins, so no user setting can lift it.

The check reads the code's syntax tree and never runs it. Risky: anything
that can touch files, the network or other processes (imports of ``os``,
``shutil``, ``pickle``, ``subprocess``, ``socket``, HTTP clients, …;
``open``; readers and writers such as ``read_csv``, ``to_parquet``,
``savefig``), dynamic code (``eval``, ``exec``, ``compile``, ``__import__``,
``getattr`` on computed names, dunder attributes), IPython shell and magic
lines (``!ls``, ``%run``, ``x = !cmd``), and anything that does not parse.
It is a guard against accidents, not a sandbox: ``always`` is the default.

>>> classify("df.groupby('city').price.mean()").is_risky
False
>>> classify("import os; os.remove('data.csv')").reasons
('imports os',)
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, get_args

from .config import ENV_MAX_APPROVAL
from .errors import InputError


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


Approval = Literal["always", "risky", "never-ask"]
APPROVALS: tuple[Approval, ...] = get_args(Approval)  # strictest first

RISKY_MODULES = _names(
    """os posix nt sys shutil pathlib io tempfile glob fnmatch fileinput pickle marshal shelve
    dill cloudpickle joblib subprocess pty signal multiprocessing threading concurrent asyncio
    socket ssl select selectors http urllib urllib3 requests httpx aiohttp ftplib smtplib poplib
    imaplib telnetlib xmlrpc webbrowser paramiko ctypes cffi importlib builtins runpy code codeop
    sqlite3 dbm zipfile tarfile gzip bz2 lzma zipimport resource
    IPython ipykernel nbchat"""
)
RISKY_CALLS = _names(
    "open eval exec compile __import__ input breakpoint exit quit globals locals vars "
    "setattr delattr memoryview"
)
RISKY_METHODS = _names(
    """read_csv read_table read_fwf read_excel read_json read_parquet read_feather read_orc
    read_pickle read_hdf read_sql read_sql_query read_sql_table read_html read_xml read_stata
    read_sas read_spss read_clipboard read_ipc read_avro read_database scan_csv scan_parquet
    scan_ipc scan_ndjson read_ndjson to_pickle to_parquet to_feather to_hdf to_sql to_excel
    to_stata to_clipboard to_orc write_csv write_parquet write_ipc write_json write_ndjson
    write_excel write_database sink_csv sink_parquet sink_ipc savefig imsave imread save savez
    savez_compressed savetxt load loadtxt genfromtxt fromfile tofile memmap write_text
    write_bytes read_text read_bytes unlink rmdir mkdir makedirs touch chmod chown
    symlink_to hardlink_to removedirs rmtree system popen spawn urlopen urlretrieve"""
)
WRITERS_WITH_PATH = _names("to_csv to_json to_html to_latex to_markdown to_xml to_string")
_SHELL_LINE = re.compile(r"^\s*(?:[\w.,\s]+=\s*)?[!%]", re.MULTILINE)


@dataclass(frozen=True)
class Risk:
    """What the check found: risky or not, and why (each reason a short phrase)."""

    reasons: tuple[str, ...] = ()

    @property
    def is_risky(self) -> bool:
        return bool(self.reasons)


def classify(code: str) -> Risk:
    """The risks the syntax tree of ``code`` shows (no reasons: harmless as far as it can tell)."""
    shell = [line.strip() for line in code.splitlines() if _SHELL_LINE.match(line)]
    if shell:
        return Risk(tuple(f"runs an IPython shell or magic line: {line[:60]}" for line in shell))
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError) as exc:
        return Risk((f"does not parse as Python ({type(exc).__name__}), so it cannot be checked",))
    finder = _Finder()
    finder.visit(tree)
    return Risk(tuple(dict.fromkeys(finder.reasons)))


class _Finder(ast.NodeVisitor):
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._module(alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.reasons.append("uses a relative import")
        self._module(node.module or "")

    def _module(self, name: str) -> None:
        if name.split(".")[0] in RISKY_MODULES:
            self.reasons.append(f"imports {name}")

    def visit_Call(self, node: ast.Call) -> None:
        function = node.func
        if isinstance(function, ast.Name) and function.id in RISKY_CALLS:
            self.reasons.append(f"calls {function.id}()")
        elif isinstance(function, ast.Name) and function.id == "getattr" and not _literal(node):
            self.reasons.append("calls getattr() with a computed name")
        elif isinstance(function, ast.Attribute):
            name = function.attr
            if name in RISKY_METHODS or name in RISKY_CALLS:
                self.reasons.append(f"calls .{name}(), which can touch files or processes")
            elif name in WRITERS_WITH_PATH and _has_destination(node):
                self.reasons.append(f"calls .{name}() with a destination")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr.startswith("__") and node.attr.endswith("__"):
            self.reasons.append(f"reaches the special attribute {node.attr}")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in ("__builtins__", "__import__", "get_ipython"):
            self.reasons.append(f"uses {node.id}")


def _has_destination(node: ast.Call) -> bool:
    """``to_csv('f')`` or ``to_csv(path_or_buf=...)``: writes; ``to_csv()`` returns text."""
    return bool(node.args) or any(k.arg in _DESTINATIONS or k.arg is None for k in node.keywords)


_DESTINATIONS = frozenset({"path_or_buf", "buf", "path", "file", "filename", "fname"})


def _literal(node: ast.Call) -> bool:
    return len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)


def effective_approval(requested: str, cap: str | None = None) -> Approval:
    """The stricter of the user's ``requested`` policy and the administrator's ``cap``."""
    wanted = check_approval(requested)
    ceiling = max_approval() if cap is None else check_approval(cap)
    return APPROVALS[min(APPROVALS.index(wanted), APPROVALS.index(ceiling))]


def max_approval(environ: Mapping[str, str] | None = None) -> Approval:
    """The administrator's cap, ``NBCHAT_MAX_APPROVAL``; unset: no cap.

    A value that is not a policy name caps at ``always``: a typo in a guard
    must not open it.
    """
    value = (os.environ if environ is None else environ).get(ENV_MAX_APPROVAL, "").strip()
    if not value:
        return "never-ask"
    return check_approval(value) if value in APPROVALS else "always"


def check_approval(value: object) -> Approval:
    """``value`` as a policy name, or InputError naming the choices."""
    if value not in APPROVALS:
        raise InputError(f"unknown approval policy {value!r}; use one of: {', '.join(APPROVALS)}")
    return next(a for a in APPROVALS if a == value)


def needs_approval(code: str, approval: str, cap: str | None = None) -> bool:
    """Whether running ``code`` must wait for the person's yes under the capped policy."""
    policy = effective_approval(approval, cap)
    if policy == "always":
        return True
    if policy == "risky":
        return classify(code).is_risky
    return False
