"""The approval policy: which code may run without asking, and the administrator's cap."""

from __future__ import annotations

import pytest

from nbchat._risk import (
    APPROVALS,
    classify,
    effective_approval,
    max_approval,
    needs_approval,
)
from nbchat.errors import InputError

HARMLESS = [
    "1 + 1",
    "df.head()",
    "df.describe()",
    "df.groupby('city').price.mean()",
    "df.rename(columns={'a': 'b'})",
    "df['total'] = df.price * df.units",
    "df.to_csv()",  # no destination: returns the text
    "df.to_json(orient=None) if False else df.to_string",
    "import math\nmath.sqrt(2)",
    "import numpy as np\nnp.arange(10).reshape(2, 5).sum(axis=0)",
    "import pandas as pd\npd.DataFrame({'a': [1, 2]})",
    "from statistics import mean\nmean([1, 2, 3])",
    "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])",
    "[x * x for x in range(10)]",
    "sorted({'b': 2, 'a': 1}.items())",
    "items = [3, 1]\nitems.remove(3)",  # list.remove is not os.remove
    "def f(x):\n    return x + 1\nf(2)",
    "class A:\n    pass\nA()",
    "print('hello')",
    "x = 3 % 2\ny = x != 1",  # % and != are operators, not magics
    "a @ b if False else None",
    "len('!not a shell line')",
    "s = 'a' ; s.replace('a', 'b')",
]
RISKY = [
    ("import os", "imports os"),
    ("import os.path", "imports os.path"),
    ("from shutil import rmtree", "imports shutil"),
    ("import pickle\npickle.dumps(1)", "imports pickle"),
    ("import subprocess", "imports subprocess"),
    ("import requests\nrequests.get('http://x')", "imports requests"),
    ("from urllib.request import urlopen", "imports urllib.request"),
    ("import socket", "imports socket"),
    ("from pathlib import Path", "imports pathlib"),
    ("import sys", "imports sys"),
    ("open('data.csv').read()", "calls open()"),
    ("eval('1 + 1')", "calls eval()"),
    ("exec('x = 1')", "calls exec()"),
    ("compile('1', 'f', 'eval')", "calls compile()"),
    ("__import__('os')", "calls __import__()"),
    ("getattr(math, name)", "calls getattr() with a computed name"),
    ("globals()['x'] = 1", "calls globals()"),
    ("df.to_parquet('out.parquet')", "calls .to_parquet(), which can touch files or processes"),
    ("df.to_csv('out.csv')", "calls .to_csv() with a destination"),
    ("pd.read_csv('in.csv')", "calls .read_csv(), which can touch files or processes"),
    ("plt.savefig('plot.png')", "calls .savefig(), which can touch files or processes"),
    ("np.save('a.npy', a)", "calls .save(), which can touch files or processes"),
    ("np.load('a.npy')", "calls .load(), which can touch files or processes"),
    ("p.write_text('x')", "calls .write_text(), which can touch files or processes"),
    ("p.unlink()", "calls .unlink(), which can touch files or processes"),
    ("().__class__.__bases__[0].__subclasses__()", "reaches the special attribute __class__"),
    ("__builtins__", "uses __builtins__"),
    ("get_ipython().system('ls')", "uses get_ipython"),
    ("!ls -la", "runs an IPython shell or magic line: !ls -la"),
    ("%run script.py", "runs an IPython shell or magic line: %run script.py"),
    ("%%bash\necho hi", "runs an IPython shell or magic line: %%bash"),
    ("files = !ls", "runs an IPython shell or magic line: files = !ls"),
    ("x = 1\n  %timeit x", "runs an IPython shell or magic line: %timeit x"),
    ("def f(:\n", "does not parse as Python (SyntaxError), so it cannot be checked"),
    ("x = '\0'\nexec", "does not parse as Python (SyntaxError), so it cannot be checked"),
    ("from . import secrets", "uses a relative import"),
    ("import ctypes", "imports ctypes"),
    ("import importlib", "imports importlib"),
    ("input('your password?')", "calls input()"),
]


@pytest.mark.parametrize("code", HARMLESS)
def test_harmless_code_has_no_risk(code):
    assert classify(code).reasons == ()
    assert not classify(code).is_risky


@pytest.mark.parametrize(("code", "reason"), RISKY)
def test_risky_code_says_why(code, reason):
    risk = classify(code)
    assert risk.is_risky
    assert reason in risk.reasons


def test_the_table_is_big_enough():
    assert len(HARMLESS) + len(RISKY) >= 40


def test_every_reason_is_given_once():
    assert classify("import os\nimport os\nos.system('x')").reasons == (
        "imports os",
        "calls .system(), which can touch files or processes",
    )


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


def test_the_administrators_cap_cannot_be_lifted(monkeypatch):
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
