"""The approval policy: which code may run without asking, and the administrator's cap.

The ``risky`` check is an allowlist read against a real notebook namespace:
a fresh InteractiveShell that ran the cells of NOTEBOOK, so ``df`` is a real
pandas DataFrame, ``exit`` IPython's own and ``os`` the module.
"""

from __future__ import annotations

import contextlib
import doctest
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

import nbchat.context._risk
from nbchat.base.errors import InputError
from nbchat.context._allowlist import (
    ATTRIBUTES,
    BUILTINS,
    BY_NAME,
    BY_NAME_KEYWORDS,
    METHODS,
    MODULES,
    member_names,
)
from nbchat.context._risk import (
    APPROVALS,
    classify,
    effective_approval,
    max_approval,
    needs_approval,
)
from nbchat.context.run_code import RunCode
from shell_helpers import close_shell

NOTEBOOK = """\
import codecs, logging, math, os, platform, random, sqlite3, statistics
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import polars as pl
import requests
df = pd.DataFrame({"city": ["Oslo", "Lima", "Oslo"], "price": [1.0, 2.0, 3.0], "units": [1, 2, 3]})
arr = np.arange(10)
frame = pl.DataFrame({"a": [1, 2], "b": [3, 4]})
xs = [3, 1, 2]
config = {"threshold": 0.5, "names": ["a", "b"]}
p = "data.csv"
url = "http://example.com"
hooks = [print, os.system]
boxed = np.array([os.system], dtype=object)
conn = sqlite3.connect(":memory:")
big = list(range(200_000))
def helper(x):
    return x
from pathlib import Path
files = pd.Series([Path("data.csv")])
fns = pd.DataFrame({"f": [os.system]})
named = pd.Series([1.0], name=Path("data.csv"))
tagged = pd.DataFrame({"a": [1]})
tagged.attrs["source"] = Path("data.csv")
labelled = pd.DataFrame({"a": [1]}, index=[Path("data.csv")])
tags = {"a", "b"}
"""


@pytest.fixture(scope="module")
def shell(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InteractiveShell]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("IPYTHONDIR", str(tmp_path_factory.mktemp("ipython")))
        config = Config()
        config.HistoryManager.hist_file = ":memory:"
        started = InteractiveShell.instance(config=config)
        assert started.run_cell(NOTEBOOK).success
        yield started
        close_shell()


@pytest.fixture(scope="module")
def notebook(shell: InteractiveShell) -> Mapping[str, object]:
    return shell.user_ns


HARMLESS = [
    "1 + 1",
    "df.head()",
    "df.describe()",
    "df.groupby('city').price.mean()",
    "np.mean(arr)",
    "[x * 2 for x in range(10)]",
    "len(df)",
    "df.rename(columns={'price': 'cost'})",
    "df[df.price > 1].units.sum()",
    "df.loc[df.city == 'Oslo', 'price'].max()",
    "df.price.describe().round(2)",
    "df.shape",
    "df.columns.tolist()",
    "df.city.value_counts()",
    "df.groupby('city').agg({'price': 'mean', 'units': ['sum', 'max']})",
    "df.groupby('city').agg(total=('price', 'sum'))",
    "df.price.apply(lambda v: v * 2)",
    "df.sort_values('price', key=lambda s: -s)",
    "by_city = df.groupby('city').price.mean()\nprint(len(by_city))\nby_city.round(1)",
    "arr.reshape(2, 5).T.sum(axis=1)",
    "np.pi * 2 + np.sqrt(arr).max()",
    "import numpy as np\nnp.arange(10).reshape(2, 5).sum(axis=0)",
    "import pandas as pd\npd.DataFrame({'a': [1, 2]})",
    "from statistics import mean\nmean([1, 2, 3])",
    "math.sqrt(2)",
    "frame.group_by('a').agg(pl.col('b').sum())",
    "frame.select(pl.col('a').mean().alias('m'))",
    "sorted({'b': 2, 'a': 1}.items())",
    "sorted(xs, key=len) if False else sorted(xs)",
    "total = sum(xs)\ntotal",
    "for x in xs:\n    print(x)",
    "if len(xs) > 2:\n    n = max(xs)\nelse:\n    n = 0",
    "print('hello')",
    "display(df.head())",
    "config['threshold'] * 2",
    "f'{len(xs)} items, first {xs[0]:>4}'",
    "x = 3 % 2\ny = x != 1",  # % and != are operators, not magics
    "len('!not a shell line')",
    "s = 'a' ; s.replace('a', 'b')",
    "[c.upper() for c in config['names']]",
    "In[-1]",
    "y = df\ny.tail(2)",
]
RISKY = [
    # aliases and indirect routes past a list of bad names
    ("f = open\nf(p, 'w')", "uses open, which is not on the list"),
    ("os.remove(p)", "uses the module os"),
    ("platform.os.system('id')", "uses the module platform"),
    ("exit._ip.ex('x = 1')", "reaches a private attribute _ip"),
    ("exit._ip.ex('x = 1')", "uses exit, which is not on the list"),
    ("getattr(df, 'to_csv')(p)", "calls getattr()"),
    ("codecs.open(p, 'w')", "uses the module codecs"),
    ("logging.FileHandler(p)", "uses the module logging"),
    ("random._os.system('id')", "reaches a private attribute _os"),
    ("@exec\ndef f():\n    pass", "defines a function"),
    ("@exec\ndef f():\n    pass", "uses exec, which is not on the list"),
    ("display({'text/html': '<b>x</b>'}, raw=True)", "passes raw= to display()"),
    ("show = display\nshow({'text/html': '<b>x</b>'}, raw=True)",
     "uses display() other than by calling it"),
    ("requests.post(url, data=df.to_json())", "uses the module requests"),
    ("requests.post(url, data=df.to_json())", "calls .to_json(), which is not on the list"),
    ("df.agg('to_csv', 0, p)", "passes .agg() a function that is not on the list"),
    ("df.apply('to_clipboard')", "passes .apply() a function that is not on the list"),
    ("name = 'to_' + 'csv'\ndf.apply(name, args=(p,))",
     "passes .apply() a function that is not on the list"),
    ("df.price.apply(df.to_csv)", "reaches .to_csv, which is not on the list"),
    ("list(map(hooks[1], ['id']))",
     "uses hooks, which holds a builtin_function_or_method it cannot check"),
    ("boxed[0]('id')", "uses boxed, which holds a builtin_function_or_method it cannot check"),
    ("conn.execute('drop table t')", "uses conn, which is not on the list"),
    ("helper(1)", "calls helper()"),
    ("len(big)", "uses big, which holds too many items to check"),
    ("x = np\nx.load(p)", "calls numpy.load(), which is not on the list"),
    ("a, b = np, 1\na.load(p)", "uses the module numpy as a value"),
    ("a = b = pd\nlist(filter(a.io.common.os.system, ['true']))",
     "uses the module pandas as a value"),
    ("list(filter(xs.pop, [0]))", "passes filter() a function that is not on the list"),
    ("np = 3\nnp.load(p)", "uses np, which may be a module or a value"),
    ("plt.savefig(p)", "uses the module matplotlib.pyplot"),
    ("sorted(xs, key=os.system)", "uses the module os"),
    ("df.pipe(pd.read_csv)", "reaches pandas.read_csv, which is not on the list"),
    ("type(df).to_csv(df, p)", "calls type()"),
    ("'{0.__class__}'.format(df)", "calls .format(), which is not on the list"),
    ("df.style.to_html(p)", "reaches .style, which is not on the list"),
    ("df.attrs.get('x')", "reaches .attrs, which is not on the list"),
    ("df.query('price > 1')", "calls .query(), which is not on the list"),
    ("lambda: open(p)", "calls open()"),
    ("unknown.head()", "uses unknown, which the notebook does not hold"),
    # files, processes and the interpreter
    ("import os", "imports os"),
    ("import os.path", "imports os.path"),
    ("import numpy.linalg", "imports numpy.linalg"),
    ("from shutil import rmtree", "imports shutil"),
    ("from numpy import load", "imports numpy.load, which is not on the list"),
    ("from numpy import *", "imports numpy.*, which is not on the list"),
    ("from . import secrets", "uses a relative import"),
    ("import requests\nrequests.get(url)", "imports requests"),
    ("open('data.csv').read()", "calls open()"),
    ("eval('1 + 1')", "calls eval()"),
    ("exec('x = 1')", "calls exec()"),
    ("compile('1', 'f', 'eval')", "calls compile()"),
    ("__import__('os')", "calls __import__()"),
    ("globals()['x'] = 1", "calls globals()"),
    ("vars(df)", "calls vars()"),
    ("input('your password?')", "calls input()"),
    ("df.to_csv(p)", "calls .to_csv(), which is not on the list"),
    ("df.to_csv()", "calls .to_csv(), which is not on the list"),
    ("df.to_parquet(p)", "calls .to_parquet(), which is not on the list"),
    ("pd.read_csv(p)", "calls pandas.read_csv(), which is not on the list"),
    ("np.save(p, arr)", "calls numpy.save(), which is not on the list"),
    ("arr.tofile(p)", "calls .tofile(), which is not on the list"),
    ("arr.dump(p)", "calls .dump(), which is not on the list"),
    ("frame.write_csv(p)", "calls .write_csv(), which is not on the list"),
    ("().__class__.__bases__[0].__subclasses__()", "reaches a private attribute __class__"),
    ("__builtins__", "uses the module builtins"),
    ("get_ipython().system('ls')", "calls get_ipython()"),
    # changes, and syntax that is not on the list
    ("df['total'] = df.price * df.units", "changes an item or attribute in place"),
    ("df.drop(columns='price', inplace=True)", "changes data in place (inplace=)"),
    ("np.add(arr, 1, out=arr)", "changes data in place (out=)"),
    ("xs.remove(3)", "calls .remove(), which is not on the list"),
    ("class A:\n    pass", "defines a class"),
    ("with open(p) as f:\n    pass", "uses a with block"),
    ("while True:\n    pass", "uses a while loop"),
    ("try:\n    x = 1\nexcept Exception:\n    pass", "uses try"),
    ("del df", "deletes names"),
    ("await something", "uses await"),
    # IPython lines and what does not parse
    ("!ls -la", "runs an IPython shell or magic line: !ls -la"),
    ("%run script.py", "runs an IPython shell or magic line: %run script.py"),
    ("%%bash\necho hi", "runs an IPython shell or magic line: %%bash"),
    ("files = !ls", "runs an IPython shell or magic line: files = !ls"),
    ("x = 1\n  %timeit x", "runs an IPython shell or magic line: %timeit x"),
    ("def f(:\n", "does not parse as Python (SyntaxError), so it cannot be checked"),
    ("x = '\0'\nexec", "holds characters that draw nothing or reorder the text around them"),
    # what pandas objects hold, and in-place routes past the keyword check
    ("files[0].rename('old.csv')", "uses files, which holds a PosixPath it cannot check"),
    ("df.where(fns.f[0])", "uses fns, which holds a builtin_function_or_method it cannot check"),
    ("named.name.rename('old.csv')", "uses named, which holds a PosixPath it cannot check"),
    ("tagged.attrs['source'].rename('x')", "uses tagged, which holds a PosixPath it cannot check"),
    ("labelled.index[0].rename('x')", "uses labelled, which holds a PosixPath it cannot check"),
    ("df.drop(columns='units', **{'inplace': True})", "passes ** to .drop()"),
    ("np.add(arr, 1, arr)", "may write into an array it is given by position (.add(), out)"),
    ("arr.clip(0, 1, arr)", "may write into an array it is given by position (.clip(), out)"),
    ("np.sum(arr, 0, None, arr)", "may write into an array it is given by position (.sum(), out)"),
    ("np.add(*[arr, 1, arr])", "passes * arguments to .add()"),
    ("tags.add('c')", "calls .add(), which is not on the list"),
    ("arr.partition(3)", "calls .partition(), which is not on the list"),
]


@pytest.mark.parametrize("code", HARMLESS)
def test_harmless_code_runs_at_once(code, notebook):
    assert classify(code, notebook).reasons == ()
    assert needs_approval(code, "risky", namespace=notebook) is False


@pytest.mark.parametrize(("code", "reason"), RISKY)
def test_code_off_the_list_asks_and_says_why(code, reason, notebook):
    risk = classify(code, notebook)
    assert reason in risk.reasons
    assert needs_approval(code, "risky", namespace=notebook) is True


def test_the_namespace_holds_real_data(notebook):
    assert isinstance(notebook["df"], pd.DataFrame) and isinstance(notebook["arr"], np.ndarray)
    assert isinstance(notebook["frame"], pl.DataFrame)
    assert type(notebook["exit"]).__module__ == "IPython.core.autocall"


def test_without_a_namespace_every_name_asks():
    assert classify("df.head()").reasons == ("uses df, which the notebook does not hold",)
    assert classify("[x * 2 for x in range(10)]").reasons == ()


def test_the_module_docstring_examples_run():
    results = doctest.testmod(nbchat.context._risk)
    assert (results.failed, results.attempted > 0) == (0, True)


def test_every_reason_is_given_once(notebook):
    assert classify("os.remove(p)\nos.remove(p)\nos.system('x')", notebook).reasons == (
        "uses the module os",
    )


def test_ipython_rewrites_ask(shell):
    tool = RunCode(str, approval="risky", namespace=shell.user_ns, transform=shell.transform_cell)
    hidden = 'note = """\n>>> y"""'  # IPython strips the prompt: what runs is not what was read
    assert classify(hidden, shell.user_ns).reasons == ()
    assert tool.risk(hidden).reasons == ("IPython rewrites this code before it runs",)
    assert tool.auto_response({"code": hidden}) is None
    assert tool.auto_response({"code": "df.head()"}) == "run"


# -- the lists ---------------------------------------------------------------------------
WRITERS = {"to_csv", "to_json", "to_parquet", "to_pickle", "to_excel", "to_sql", "to_clipboard",
           "to_html", "to_string", "to_hdf", "tofile", "dump", "save", "savez", "savefig", "load",
           "write_csv", "sink_parquet", "collect", "open", "system", "remove", "unlink", "eval",
           "exec", "query", "read_csv", "plot", "style", "attrs", "getattr", "type", "vars"}


def test_the_lists_hold_no_writer_reader_or_private_name():
    every = METHODS | ATTRIBUTES | BUILTINS | frozenset().union(*MODULES.values())
    assert not WRITERS & every
    assert not [name for name in every if name.startswith("_")]


WHAT_RUNS = Path(__file__).resolve().parent.parent / "docs" / "security" / "what-runs.md"


def documented_lists() -> dict[str, set[str]]:
    """The names each bullet of the documented allowlist gives, by the bullet's label."""
    text = WHAT_RUNS.read_text(encoding="utf-8")
    section = text[text.index("## What `risky` runs without asking"):
                   text.index("It is a guard, not a sandbox")]
    bullets: list[str] = []
    for line in section.splitlines():
        if line.strip().startswith("- "):
            bullets.append(line.strip()[2:])
        elif bullets and line.strip():
            bullets[-1] += " " + line.strip()
    lists = {}
    for bullet in bullets:
        label = re.match(r"\*\*([\w ]+)\*\*|`(\w+)`", bullet)
        assert label is not None, bullet
        listed = bullet.split(":", 1)[1].split(";")[0]
        lists[label.group(1) or label.group(2)] = set(re.findall(r"`([^`]+)`", listed))
    return lists


def test_the_docs_list_exactly_what_runs_at_once():
    lists = documented_lists()
    assert lists["Builtins"] == BUILTINS
    assert lists["Methods"] == METHODS
    assert lists["Attributes"] == ATTRIBUTES
    assert {module: lists[module] for module in MODULES} == MODULES
    assert lists["Functions passed on"] >= BY_NAME | BY_NAME_KEYWORDS


def test_a_call_named_like_an_expired_numpy_alias_warns_nothing(notebook):
    # A warning is an error here: numpy warned of `np.str` when the check looked it up.
    for code in ("df.str()", "np.mean(arr).str()", "arr.object()"):
        assert classify(code, notebook).is_risky


NAMES = sorted(
    {n for cls in (pd.DataFrame, pd.Series, np.ndarray, pl.DataFrame, str, list, dict)
     for n in dir(cls)}
    | set(dir(np)) | set(dir(pd)) | set(dir(os)) | {"city", "price", "_ip", "_os", "os"}
)
ROOTS = ["df", "arr", "frame", "xs", "config", "p", "np", "pd", "os", "exit", "hooks"]


@settings(max_examples=400, deadline=None)
@given(root=st.sampled_from(ROOTS), steps=st.lists(
    st.tuples(st.sampled_from(NAMES), st.booleans()), min_size=1, max_size=4
))
def test_a_chain_of_attributes_passes_only_along_the_list(notebook, root, steps):
    code = root + "".join(f".{name}()" if call else f".{name}" for name, call in steps)
    if classify(code, notebook).is_risky:
        return
    module = {"np": "numpy", "pd": "pandas"}.get(root)
    assert root in {"df", "arr", "frame", "xs", "config", "p", "np", "pd"}
    for index, (name, call) in enumerate(steps):
        assert not name.startswith("_")
        if index == 0 and module is not None:
            assert name in MODULES[module]
        elif call:
            assert name in METHODS
        else:  # a listed attribute, or a column: no member of a data class off the list
            assert name in METHODS | ATTRIBUTES or name not in member_names()


ALIASES = [
    "{0} = {1}", "{0} = {1} = {2}", "{0}, {1} = {2}, {3}", "{0} = [{1}][0]",
    "{0} = (lambda m: m)({1})", "for {0} in [{1}]:\n    pass", "{0} = {1} if len('') else {2}",
    "{0} = {{'k': {1}}}['k']", "{0} = ({1} := {2})", "if len(''):\n    {0} = {1}",
]
HELD = ["np", "pd", "os", "df", "xs", "a", "b", "c"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(ALIASES), st.lists(st.sampled_from(HELD), min_size=4,
                                                               max_size=4)), max_size=5),
       st.sampled_from(HELD))
def test_no_way_of_naming_a_module_lets_it_pass_as_data(program, used):
    """Whatever the aliases do, code that passes never reaches into a module as if it were data."""
    code = "\n".join(template.format(*names) for template, names in program)
    namespace = {"np": np, "pd": pd, "os": os, "df": pd.DataFrame({"a": [1]}), "xs": [1, 2]}
    if classify(f"{code}\n{used}.io", namespace).is_risky:
        return
    ran = dict(namespace)
    with contextlib.suppress(NameError):  # a name used before it is set stops the run there
        exec(code, ran)  # only names and lambdas that return their argument: nothing else runs
    assert not isinstance(ran.get(used), type(os))


# -- the policy and the administrator's cap ----------------------------------------------
@pytest.mark.parametrize(
    ("policy", "code", "asks"),
    [
        ("always", "1 + 1", True),
        ("risky", "1 + 1", False),
        ("risky", "import os", True),
        ("never-ask", "import os", False),
    ],
)
def test_needs_approval_follows_the_policy(policy, code, asks):
    assert needs_approval(code, policy) is asks


def test_a_cap_set_later_still_caps(monkeypatch):
    monkeypatch.setenv("NBCHAT_MAX_APPROVAL", "risky")
    assert effective_approval("never-ask") == "risky"
    assert effective_approval("always") == "always"
    assert needs_approval("import os", "never-ask") is True
    assert needs_approval("1 + 1", "never-ask") is False
    monkeypatch.setenv("NBCHAT_MAX_APPROVAL", "always")
    assert needs_approval("1 + 1", "never-ask") is True


def test_the_cap_defaults_to_none_and_a_typo_caps_at_always():
    assert max_approval({}) == "never-ask"
    assert max_approval({"NBCHAT_MAX_APPROVAL": "risky"}) == "risky"
    assert max_approval({"NBCHAT_MAX_APPROVAL": "nevr"}) == "always"
    assert APPROVALS == ("always", "risky", "never-ask")


def test_an_unknown_policy_is_an_input_error():
    with pytest.raises(InputError, match="unknown approval policy 'sometimes'; use one of"):
        effective_approval("sometimes")


LIFT = """\
import os
import nbchat
from nbchat import RunCode
from nbchat.context._risk import effective_approval, max_approval
os.environ.pop("NBCHAT_MAX_APPROVAL")
tool = RunCode(print, approval="never-ask")
print(effective_approval("never-ask"), max_approval(), tool.auto_response({"code": "import os"}))
os.environ["NBCHAT_MAX_APPROVAL"] = "never-ask"
tool.approval = "never-ask"
print(effective_approval("never-ask"), tool.auto_response({"code": "import os"}))
os.environ["NBCHAT_MAX_APPROVAL"] = "always"
print(effective_approval("never-ask"), tool.auto_response({"code": "1 + 1"}))
"""


def test_the_cap_the_process_started_with_cannot_be_lifted(tmp_path: Path):
    env = {**os.environ, "NBCHAT_MAX_APPROVAL": "risky"}
    ran = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(LIFT)], env=env, cwd=tmp_path,
        capture_output=True, text=True, timeout=60, check=True,
    )
    assert ran.stdout.splitlines() == ["risky risky None", "risky None", "always None"]
