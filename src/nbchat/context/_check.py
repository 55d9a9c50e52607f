"""Reading a cell's syntax tree against the allowlist: every node proven harmless, or a reason.

:func:`reasons_in` walks the tree once to learn what each name the cell binds
may stand for (flow-insensitively, so a name's kind covers every binding and
the notebook's own value), then again to check every node. Nothing is run.
"""

from __future__ import annotations

import ast
import builtins
import sys
import types
from collections.abc import Iterator, Mapping

from ._allowlist import (
    ATTRIBUTES,
    BUILTINS,
    BY_NAME,
    BY_NAME_KEYWORDS,
    GIVEN_A_FUNCTION,
    IN_PLACE_KEYWORDS,
    METHODS,
    MODULES,
    OUT_POSITION,
    POLARS_EXPRESSIONS,
    TOO_MANY,
    first_foreign,
    importable,
    listed_functions,
    member_names,
)


def _out_position(called: str, is_method: bool) -> int:
    """How many positional arguments ``called`` takes before numpy's ``out`` could be one."""
    numpy = sys.modules.get("numpy")
    # numpy's own names only: getattr would reach its module __getattr__, which warns the
    # person about an expired alias (np.str, np.object) when the code calls a `str`.
    function = vars(numpy).get(called) if numpy is not None and not is_method else None
    if numpy is not None and isinstance(function, numpy.ufunc):
        return int(function.nin)
    position = OUT_POSITION.get(called)
    if position is None:
        return sys.maxsize
    return position if is_method else position + 1


def reasons_in(tree: ast.Module, namespace: Mapping[str, object] | None) -> list[str]:
    """Why ``tree``, run in ``namespace``, is not proven harmless (empty: it is)."""
    return _Check(namespace).reasons_for(tree)


# What an expression may stand for, as far as the check can tell:
_DATA = "data"  # a value: a number, text, a container, a pandas/polars/numpy object
_FUNCTION = "function"  # a listed function or a lambda the check has read
_DISPLAY = "display"  # IPython's display(), which may be called only without options
_RISKY = "risky"  # not proven harmless (the reason is given where it came from)
_MODULE = "module "  # + name: a listed module, usable only as `module.listed_name`
Kind = str


def _join(first: Kind | None, second: Kind) -> Kind:
    """What a name bound to either may stand for."""
    if first is None or first == second:
        return second
    if _RISKY in (first, second) or _DISPLAY in (first, second):
        return _RISKY
    if first.startswith(_MODULE) or second.startswith(_MODULE):
        return _RISKY
    return _DATA


class _Check:
    """One reading of a cell: the kinds of its names, then every node against the lists."""

    def __init__(self, namespace: Mapping[str, object] | None) -> None:
        self.namespace = namespace
        self.reasons: list[str] = []
        self.quiet = False
        self.bound: dict[str, Kind] = {}  # names the cell binds, wherever it binds them
        self.scopes: list[dict[str, Kind]] = []  # lambda and comprehension variables
        self.members = member_names()
        self.listed = listed_functions()

    def reasons_for(self, tree: ast.Module) -> list[str]:
        bindings = list(_bindings(tree.body))
        self.quiet = True
        for _ in range(3 * len(bindings) + 1):  # each name's kind can only grow, three times
            before = dict(self.bound)
            for name, source in bindings:
                kind = source if isinstance(source, str) else self.alias(source)
                self.bound[name] = _join(self.bound.get(name), kind)
            if self.bound == before:
                break
        self.quiet = False
        for statement in tree.body:
            self.statement(statement)
        return self.reasons

    def say(self, reason: str) -> Kind:
        if not self.quiet:
            self.reasons.append(reason)
        return _RISKY

    # -- statements ------------------------------------------------------------------
    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Expr):
            self.value(node.value)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                self.target(target)
            single = len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
            self.alias(node.value) if single else self.value(node.value)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            self.target(node.target)
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                self.value(ast.Name(node.target.id, ast.Load()))
            if isinstance(node, ast.AnnAssign):
                self.value(node.annotation)
            if node.value is not None:
                self.value(node.value)
        elif isinstance(node, (ast.If, ast.For)):
            self.value(node.test if isinstance(node, ast.If) else node.iter)
            if isinstance(node, ast.For):
                self.target(node.target)
            for inner in (*node.body, *node.orelse):
                self.statement(inner)
        elif isinstance(node, ast.Assert):
            self.value(node.test)
            if node.msg is not None:
                self.value(node.msg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            self.imports(node)
        elif not isinstance(node, (ast.Pass, ast.Break, ast.Continue)):
            self.say(_STATEMENTS.get(type(node), f"uses a {type(node).__name__} statement"))
            for decorator in getattr(node, "decorator_list", ()):
                self.say("uses a decorator")
                self.value(decorator)

    def target(self, node: ast.expr) -> None:
        if isinstance(node, (ast.Tuple, ast.List)):
            for element in node.elts:
                self.target(element)
        elif isinstance(node, ast.Starred):
            self.target(node.value)
        elif not isinstance(node, ast.Name):
            self.say("changes an item or attribute in place")
            self.value(node)

    def imports(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not importable(alias.name):
                    self.say(f"imports {alias.name}")
            return
        module = node.module or ""
        if node.level:
            self.say("uses a relative import")
        elif not importable(module):
            self.say(f"imports {module}")
        else:
            for alias in node.names:
                if alias.name not in MODULES[module]:
                    self.say(f"imports {module}.{alias.name}, which is not on the list")

    # -- expressions -----------------------------------------------------------------
    def value(self, node: ast.expr) -> Kind:
        """The kind of ``node`` used as a value: a module or display() may not be."""
        kind = self.expr(node)
        if kind.startswith(_MODULE):
            return self.say(f"uses the module {kind[len(_MODULE):]} as a value")
        if kind == _DISPLAY:
            return self.say("uses display() other than by calling it")
        return kind

    def alias(self, node: ast.expr) -> Kind:
        """The kind of ``node`` in ``name = node``: the one place a module may be renamed."""
        if not isinstance(node, (ast.Name, ast.Attribute)):
            return self.value(node)
        kind = self.expr(node)
        return self.say("uses display() other than by calling it") if kind == _DISPLAY else kind

    def expr(self, node: ast.expr) -> Kind:
        """The kind of ``node`` wherever it stands (a module only as ``module.name``)."""
        if isinstance(node, ast.Constant):
            return _DATA
        if isinstance(node, ast.Name):
            return self.name(node.id)
        if isinstance(node, ast.Attribute):
            return self.attribute(node, call=False)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.Lambda):
            return self.lambda_(node)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            return self.comprehension(node)
        if isinstance(node, ast.NamedExpr):
            return self.value(node.value)
        if isinstance(node, (ast.Await, ast.Yield, ast.YieldFrom)):
            return self.say(f"uses {type(node).__name__.lower().replace('from', ' from')}")
        if isinstance(node, _PLAIN_EXPRESSIONS):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.value(child)
            return _DATA
        return self.say(f"uses {type(node).__name__} syntax, which is not on the list")

    def name(self, name: str, call: bool = False) -> Kind:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        outside = self.outside(name, call)
        if name not in self.bound:
            return outside if outside is not None else self.say(
                f"uses {name}, which the notebook does not hold"
            )
        bound = self.bound[name]
        if bound == _RISKY and not self.reasons:  # `x = (x := x)`: nothing else says why
            return self.say(f"uses {name}, which is set to something not on the list")
        if bound == _RISKY:
            return _RISKY
        if outside is None or outside == _RISKY:
            return bound if outside is None else _RISKY
        kind = _join(bound, outside)
        if kind == _RISKY:
            return self.say(f"uses {name}, which may be a module or a value")
        return kind

    def outside(self, name: str, call: bool) -> Kind | None:
        """The kind of ``name`` in the notebook or the builtins; None: it is in neither."""
        if self.namespace is not None and name in self.namespace:
            return self.held(name, self.namespace[name], call)
        if name == "display":
            return _DISPLAY
        if name in BUILTINS:
            return _FUNCTION
        if hasattr(builtins, name):
            return self.say(f"calls {name}()" if call else f"uses {name}, which is not on the list")
        return None

    def held(self, name: str, value: object, call: bool) -> Kind:
        """The kind of the notebook's variable ``name``."""
        if isinstance(value, types.ModuleType):
            module = value.__name__
            if module in MODULES and sys.modules.get(module) is value:
                return _MODULE + module
            return self.say(f"uses the module {module}")
        if any(value is listed for listed in self.listed):
            return _DISPLAY if value is getattr(builtins, "display", None) else _FUNCTION
        foreign = first_foreign(value)
        if foreign is None:
            return _DATA
        if callable(value):
            return self.say(f"calls {name}()" if call else f"uses {name}, which is not on the list")
        if foreign is value:
            return self.say(f"uses {name}, a {type(value).__name__} it cannot check")
        if foreign is TOO_MANY:
            return self.say(f"uses {name}, which holds too many items to check")
        return self.say(f"uses {name}, which holds a {type(foreign).__name__} it cannot check")

    def attribute(self, node: ast.Attribute, call: bool) -> Kind:
        name = node.attr
        base = self.expr(node.value)
        if name.startswith("_"):
            return self.say(f"reaches a private attribute {name}")
        if base.startswith(_MODULE):
            module = base[len(_MODULE):]
            if name in MODULES[module]:
                return _FUNCTION
            shown = f"{module}.{name}"
            return self.say(f"calls {shown}(), which is not on the list" if call
                            else f"reaches {shown}, which is not on the list")
        if base in (_FUNCTION, _DISPLAY):
            return self.say(f"reaches .{name} of a function")
        if base == _RISKY:
            return _RISKY
        if call and name not in METHODS:
            return self.say(f"calls .{name}(), which is not on the list")
        if not call and name in self.members and name not in METHODS | ATTRIBUTES:
            return self.say(f"reaches .{name}, which is not on the list")
        return _DATA

    def call(self, node: ast.Call) -> Kind:
        function = node.func
        kind: Kind = _RISKY
        if isinstance(function, ast.Name):
            kind = self.name(function.id, call=True)
            if kind == _DATA:
                self.say(f"calls {function.id}(), which is not on the list")
            elif kind.startswith(_MODULE):
                self.say(f"calls the module {kind[len(_MODULE):]}")
            elif kind == _DISPLAY:
                for keyword in node.keywords:
                    self.say(f"passes {keyword.arg or '**'}= to display()")
        elif isinstance(function, ast.Attribute):
            kind = self.attribute(function, call=True)
        elif isinstance(function, ast.Lambda):
            self.lambda_(function)
        else:
            self.value(function)
            self.say("calls the result of an expression")
        self.arguments(node, function, is_method=kind == _DATA,
                       is_builtin=isinstance(function, ast.Name) and self.is_builtin(function.id))
        return _DATA

    def is_builtin(self, name: str) -> bool:
        """``name`` is Python's own listed builtin here, not something the cell or notebook set."""
        held = self.namespace is not None and name in self.namespace
        return name in BUILTINS and name not in self.bound and not held

    def arguments(
        self, node: ast.Call, function: ast.expr, *, is_method: bool, is_builtin: bool
    ) -> None:
        method = isinstance(function, ast.Attribute)
        called = function.attr if isinstance(function, ast.Attribute) else getattr(
            function, "id", ""
        )
        shown = f".{called}()" if method else f"{called}()"
        if any(isinstance(argument, ast.Starred) for argument in node.args):
            self.say(f"passes * arguments to {shown}")
        if any(keyword.arg is None for keyword in node.keywords):
            self.say(f"passes ** to {shown}")
        if not is_builtin and len(node.args) > _out_position(called, is_method):
            self.say(f"may write into an array it is given by position ({shown}, out)")
        for position, argument in enumerate(node.args):
            inner = argument.value if isinstance(argument, ast.Starred) else argument
            self.value(inner)
            given = BY_NAME if method else GIVEN_A_FUNCTION
            if called in given and (position == 0 or called == "pivot_table"):
                self.by_name(inner, shown, starred=isinstance(argument, ast.Starred))
        for keyword in node.keywords:
            self.value(keyword.value)
            if keyword.arg in IN_PLACE_KEYWORDS:
                self.say(f"changes data in place ({keyword.arg}=)")
            elif keyword.arg in BY_NAME_KEYWORDS:
                self.by_name(keyword.value, shown)
            elif not method or called not in BY_NAME or keyword.arg is None:
                continue
            elif isinstance(keyword.value, ast.Tuple):
                for element in keyword.value.elts[1:]:  # named aggregation: (column, function)
                    self.by_name(element, shown)
            elif not isinstance(keyword.value, ast.Constant):
                self.by_name(keyword.value, shown)

    def by_name(self, node: ast.expr, shown: str, starred: bool = False) -> None:
        """``node`` gives the function ``shown`` calls, or a method's name: it must be listed."""
        if starred or not self.names_a_listed_function(node):
            self.say(f"passes {shown} a function that is not on the list")

    def names_a_listed_function(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Constant):
            return not isinstance(node.value, (str, bytes)) or node.value in METHODS
        if isinstance(node, (ast.List, ast.Tuple)):
            return all(self.names_a_listed_function(element) for element in node.elts)
        if isinstance(node, ast.Dict):
            return None not in node.keys and all(map(self.names_a_listed_function, node.values))
        if self.is_polars_expression(node):
            return True
        quiet, self.quiet = self.quiet, True
        try:
            return self.expr(node) == _FUNCTION
        finally:
            self.quiet = quiet

    def is_polars_expression(self, node: ast.expr) -> bool:
        """``pl.col('a').sum()`` and the like: a polars expression, never a string."""
        while isinstance(node, (ast.Call, ast.Attribute)):
            if isinstance(node, ast.Call):
                node = node.func
                continue
            if isinstance(node.value, ast.Name) and node.attr in POLARS_EXPRESSIONS:
                quiet, self.quiet = self.quiet, True
                try:
                    return self.name(node.value.id) == _MODULE + "polars"
                finally:
                    self.quiet = quiet
            node = node.value
        return False

    def lambda_(self, node: ast.Lambda) -> Kind:
        arguments = node.args
        for default in (*arguments.defaults, *(d for d in arguments.kw_defaults if d)):
            self.value(default)
        names = [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]
        names += [a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None]
        self.scopes.append(dict.fromkeys(names, _DATA))
        try:
            self.value(node.body)
        finally:
            self.scopes.pop()
        return _FUNCTION

    def comprehension(
        self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp
    ) -> Kind:
        self.scopes.append({})
        try:
            for generator in node.generators:
                self.value(generator.iter)
                if generator.is_async:
                    self.say("uses async for")
                self.scopes[-1].update(dict.fromkeys(_target_names(generator.target), _DATA))
                self.target(generator.target)
                for condition in generator.ifs:
                    self.value(condition)
            parts = (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,)
            for part in parts:
                self.value(part)
        finally:
            self.scopes.pop()
        return _DATA


_PLAIN_EXPRESSIONS = (
    ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Subscript, ast.Slice,
    ast.Tuple, ast.List, ast.Set, ast.Dict, ast.Starred, ast.JoinedStr, ast.FormattedValue,
)
_STATEMENTS: dict[type, str] = {
    ast.FunctionDef: "defines a function",
    ast.AsyncFunctionDef: "defines a function",
    ast.ClassDef: "defines a class",
    ast.With: "uses a with block",
    ast.AsyncWith: "uses a with block",
    ast.While: "uses a while loop",
    ast.Try: "uses try",
    ast.Raise: "raises an exception",
    ast.Delete: "deletes names",
    ast.Global: "declares global names",
    ast.Nonlocal: "declares nonlocal names",
    ast.AsyncFor: "uses async for",
    ast.Match: "uses match",
    ast.Return: "uses return",
}


def _bindings(body: list[ast.stmt]) -> Iterator[tuple[str, ast.expr | Kind]]:
    """Each name a cell binds, with what it binds it to (a node, or a kind when that is known)."""
    for node in body:
        if isinstance(node, ast.Assign):
            single = len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
            for target in node.targets:
                for name in _target_names(target):
                    yield name, (node.value if single else _DATA)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            yield node.target.id, (node.value if node.value is not None else _DATA)
        elif isinstance(node, (ast.AugAssign, ast.For)):
            for name in _target_names(node.target):
                yield name, _DATA
        elif isinstance(node, ast.Import):
            for alias in node.names:
                module = alias.name if alias.asname else alias.name.partition(".")[0]
                allowed = importable(alias.name) and module == alias.name
                yield alias.asname or module, _MODULE + alias.name if allowed else _RISKY
        elif isinstance(node, ast.ImportFrom):
            allowed = not node.level and importable(node.module or "")
            for alias in node.names:
                listed = allowed and alias.name in MODULES[node.module or ""]
                yield alias.asname or alias.name, _FUNCTION if listed else _RISKY
        if isinstance(node, (ast.If, ast.For)):
            yield from _bindings([*node.body, *node.orelse])
    for node in body:
        for inner in ast.walk(node):
            if isinstance(inner, ast.NamedExpr):
                yield inner.target.id, inner.value


def _target_names(node: ast.expr) -> Iterator[str]:
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, (ast.Tuple, ast.List)):
        for element in node.elts:
            yield from _target_names(element)
    elif isinstance(node, ast.Starred):
        yield from _target_names(node.value)
