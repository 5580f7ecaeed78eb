"""Banned names resolved the way Python resolves them (the determinism gate's second pass).

Ruff's banned-api rule matches spellings: `time.time` is caught, `logging.time.time` (the same
function, reached through the module `logging` imported as `time`) is not. This pass follows
every name a file binds by import, and every attribute chain rooted at one, to the object
Python would find, and compares that object with the banned table's:

- a module, class or function from the standard library or an installed distribution is found
  by importing the real module in the gate's process and taking the attributes one by one
  (getattr, and `getattr(x, "lit")`, `vars(x)["lit"]`, `x.__dict__["lit"]`); a workspace module
  (twinflow's own) is modelled from its source in the tree under check, never imported;
- an object is banned when it *is* a banned object (identity), or when the module and qualified
  name it was defined under fall under a banned name (`os.urandom` is `posix.urandom`,
  `threading._start_new_thread` is `_thread.start_new_thread`, `random.random` is a method of
  `random.Random`);
- a chain that goes through one module to reach another module the file did not import itself
  (`logging.time`, `from logging import threading`) is refused whatever it reaches next: the file
  imports what it uses, by its own name, where the spelling-based pass sees it (the fallback rule).

Names bound from a chain (`_now = logging.time.time`, `t = logging`) are followed as the alias
they are. What this pass does not model: values computed at run time (a function's return, a
container built in code, `type(x)`), for which the runtime guard stands.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import io
import posixpath
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class Local:
    """A workspace module, modelled from its source file rather than imported."""

    name: str
    path: Path | None


@dataclass(frozen=True)
class Pending:
    """A real module named by an import, imported only when an attribute is taken from it."""

    name: str


class _Opaque:
    """A value the pass cannot follow further (a class or function defined in the workspace)."""


OPAQUE = _Opaque()


def _matches(dotted: str, banned: dict[str, str]) -> str | None:
    for name in banned:
        if dotted == name or dotted.startswith(name + "."):
            return name
    return None


# C modules whose functions a permitted public module re-exports as its own: `os.getcwd` is
# `posix.getcwd`, and only some of os is banned, so their objects are named by the public module.
_PUBLIC_FACE = {"posix": "os", "nt": "os"}


def _qualified(obj: Any) -> str | None:
    """The module-qualified name an object was defined under, or None."""
    if isinstance(obj, ModuleType):
        return obj.__name__
    owner = getattr(obj, "__self__", None)
    name = getattr(obj, "__name__", None)
    if owner is not None and isinstance(name, str) and not isinstance(owner, ModuleType):
        holder = owner if isinstance(owner, type) else type(owner)
        module = _PUBLIC_FACE.get(holder.__module__, holder.__module__)
        return f"{module}.{holder.__qualname__}.{name}"
    defined_in = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if isinstance(defined_in, str) and isinstance(qualname, str):
        return f"{_PUBLIC_FACE.get(defined_in, defined_in)}.{qualname}"
    return None


def _key(obj: Any) -> tuple[Any, ...]:
    owner = getattr(obj, "__self__", None)
    name = getattr(obj, "__name__", None)
    if owner is not None and isinstance(name, str):
        return ("bound", id(owner), name)
    return ("object", id(obj))


@dataclass
class Resolver:
    """Resolves names against the real modules and the workspace's sources."""

    banned: dict[str, str]
    local_roots: dict[str, list[Path]]
    """Top-level workspace package or module name -> the source folders that hold it."""
    given_argument: dict[str, int] = field(default_factory=dict)
    """Banned calls that are pure when positional argument N is given and is not None
    (`time.gmtime(t)` formats a given time; `time.gmtime()` reads the clock): the banned
    table's `unless_argument`, the same rows the runtime guard lets through."""
    imported: set[str] = field(default_factory=set)
    """Every real module the pass imported, for the gate's summary."""
    _modules: dict[str, Any] = field(default_factory=dict)
    _keys: dict[tuple[Any, ...], str] = field(default_factory=dict)
    _locals: dict[str, FileScope | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Keep every banned object alive and keyed, so identity survives any path to it.
        self._pins: list[Any] = []
        for name in self.banned:
            top = name.partition(".")[0]
            if top not in sys.stdlib_module_names and top not in sys.modules:
                continue  # a third-party module is matched by its name, never imported for this
            value = self._dotted(name)
            if value is not None:
                self._pins.append(value)
                self._keys[_key(value)] = name
        self._sys_modules_before = set(sys.modules)

    # ---------------------------------------------------------------- real objects

    def module(self, name: str) -> Any:
        """The module `name`: Local for the workspace, the real module, or OPAQUE."""
        if name in self._modules:
            return self._modules[name]
        top = name.partition(".")[0]
        value: Any
        folders = self.local_roots.get(top)
        if folders is None and top not in sys.stdlib_module_names:
            folders = [Path(entry) for entry in sys.path[1:] if "site-packages" in entry]
        if folders is not None:
            bases = [folder.joinpath(*name.split(".")) for folder in folders]
            files = [
                p for b in bases for p in (b / "__init__.py", b.with_suffix(".py")) if p.is_file()
            ]
            if files:
                value = Local(name, files[0])
            elif any(b.is_dir() for b in bases):
                value = Local(name, None)  # a namespace package (twinflow)
            else:
                value = OPAQUE
        else:
            try:
                with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
                    value = importlib.import_module(name)
                self.imported.add(name)
            except BaseException:  # any failure to import it means: cannot follow
                value = OPAQUE
        self._modules[name] = value
        return value

    def summary(self) -> str:
        """What the pass followed, for the gate's closing line."""
        modelled = sum(1 for scope in self._locals.values() if scope is not None)
        return (
            f"names resolved through {len(self.imported)} imported standard-library modules and "
            f"{modelled} workspace or installed modules read from source"
        )

    def lazy(self, name: str) -> Any:
        """The module `name` as an import binds it, imported when first needed."""
        if name in self._modules or name.partition(".")[0] in self.local_roots:
            return self.module(name)
        return Pending(name)

    def real(self, value: Any) -> Any:
        """`value`, with a Pending module imported."""
        return self.module(value.name) if isinstance(value, Pending) else value

    def _dotted(self, dotted: str) -> Any:
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            value = self.module(".".join(parts[:cut]))
            if isinstance(value, ModuleType):
                for part in parts[cut:]:
                    value = self._getattr(value, part)
                    if value is OPAQUE:
                        return None
                return value
        return None

    @staticmethod
    def _getattr(value: Any, name: str) -> Any:
        try:
            with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
                return getattr(value, name)
        except BaseException:  # a missing or failing attribute means: cannot follow
            return OPAQUE

    def banned_as(self, value: Any) -> str | None:
        """The banned name `value` is, or falls under, or None."""
        if value is OPAQUE:
            return None
        if isinstance(value, (Pending, Local)):
            return _matches(value.name, self.banned)
        hit = self._keys.get(_key(value))
        if hit is not None:
            return hit
        qualified = _qualified(value)
        return None if qualified is None else _matches(qualified, self.banned)

    # -------------------------------------------------------------- workspace modules

    def _local_scope(self, module: Local) -> FileScope | None:
        if module.name in self._locals:
            return self._locals[module.name]
        scope = None
        if module.path is not None:
            try:
                tree = ast.parse(module.path.read_text(encoding="utf-8"))
            except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
                tree = None
            if tree is not None:
                package = module.name
                if module.path.name != "__init__.py":
                    package = module.name.rpartition(".")[0]
                scope = FileScope(self, package)
                scope.bind_statement(list(_top_level(tree.body)))
        self._locals[module.name] = scope
        return scope

    def attribute(self, value: Any, name: str) -> Any:
        """`value.name`, or a list of candidates for a workspace module's binding."""
        value = self.real(value)
        if isinstance(value, Local):
            scope = self._local_scope(value)
            values = scope.get(name) if scope is not None else []
            if values:
                return values[0] if len(values) == 1 else values
            sub = self.module(f"{value.name}.{name}")
            return sub
        if value is OPAQUE:
            return OPAQUE
        found = self._getattr(value, name)
        if found is OPAQUE and isinstance(value, ModuleType):
            # `from package import submodule` imports it when it is not an attribute yet.
            sub = f"{value.__name__}.{name}"
            if importlib.util.find_spec(value.__name__) is not None:
                candidate = self.module(sub)
                if isinstance(candidate, ModuleType):
                    return candidate
        return found

    def is_submodule(self, parent: Any, name: str, child: Any) -> bool:
        """Whether `parent.name` is the submodule `parent.name` itself (or its sys.modules alias)."""
        parent, child = self.real(parent), self.real(child)
        if isinstance(parent, Local):
            return isinstance(child, Local) and child.name == f"{parent.name}.{name}"
        if not isinstance(parent, ModuleType):
            return False
        dotted = f"{parent.__name__}.{name}"
        return sys.modules.get(dotted) is child or getattr(child, "__name__", None) == dotted


def _namespace_of(value: Any) -> str | None:
    """The module whose namespace `value` is (the module itself or its dict), or None."""
    name = _module_name(value)
    if name is not None:
        return name
    if isinstance(value, dict) and isinstance(value.get("__name__"), str):
        module = sys.modules.get(value["__name__"])
        if module is not None and vars(module) is value:
            return module.__name__
    return None


def _module_name(value: Any) -> str | None:
    if isinstance(value, (Local, Pending)):
        return value.name
    if isinstance(value, ModuleType):
        return value.__name__
    return None


@dataclass(frozen=True)
class Finding:
    """One name that resolves to a banned object, or reaches a module through another."""

    line: int
    message: str


Step = tuple[str, str]  # ("attr", name)


class FileScope:
    """The names one file binds (imports and aliases of them), flow-insensitively."""

    def __init__(self, resolver: Resolver, package: str | None) -> None:
        self.resolver = resolver
        self.package = package
        self.thunks: dict[str, list[Callable[[], list[Any]]]] = {}
        self.names: dict[str, list[Any]] = {}
        self.imported: set[str] = set()

    def _bind(self, name: str, thunk: Callable[[], list[Any]]) -> None:
        self.thunks.setdefault(name, []).append(thunk)

    def get(self, name: str) -> list[Any]:
        """What `name` may be bound to (evaluated on first use; a cycle sees nothing)."""
        if name in self.names:
            return self.names[name]
        self.names[name] = []
        values: list[Any] = []
        for thunk in self.thunks.get(name, []):
            for value in thunk():
                if value is OPAQUE:
                    continue
                if not any(v is value or (isinstance(v, Local) and v == value) for v in values):
                    values.append(value)
        self.names[name] = values
        return values

    def _absolute(self, node: ast.ImportFrom) -> str | None:
        if not node.level:
            return node.module
        if self.package is None:
            return None
        parts = self.package.split(".")
        if node.level - 1 >= len(parts):
            return None
        base = parts[: len(parts) - (node.level - 1)]
        return ".".join([*base, *([node.module] if node.module else [])])

    def bind_statement(self, nodes: list[ast.AST]) -> None:
        """Record what the imports and simple assignments among `nodes` bind."""
        for inner in nodes:
            if isinstance(inner, ast.Import):
                for alias in inner.names:
                    self.imported.add(alias.name)
                    bound = alias.asname or alias.name.partition(".")[0]
                    self._bind(bound, partial(self._module, alias.name if alias.asname else bound))
            elif isinstance(inner, ast.ImportFrom):
                absolute = self._absolute(inner)
                if absolute is None:
                    continue
                self.imported.add(absolute)
                if _matches(absolute, self.resolver.banned) is not None:
                    continue
                for alias in inner.names:
                    if alias.name == "*":
                        continue
                    self.imported.add(f"{absolute}.{alias.name}")
                    self._bind(
                        alias.asname or alias.name, partial(self._from, absolute, alias.name)
                    )
            elif isinstance(inner, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
                targets = inner.targets if isinstance(inner, ast.Assign) else [inner.target]
                if inner.value is None:
                    continue
                for one in targets:
                    self._bind_target(one, inner.value)

    def _module(self, name: str) -> list[Any]:
        return [self.resolver.lazy(name)]

    def _from(self, module: str, name: str) -> list[Any]:
        return [_first(self.resolver.attribute(self.resolver.lazy(module), name))]

    def _bind_target(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            if _chain(value) is not None:
                self._bind(target.id, partial(self.values_of, value))
        elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)):
            for one, other in zip(target.elts, value.elts, strict=False):
                self._bind_target(one, other)

    def values_of(self, node: ast.expr) -> list[Any]:
        """What an expression may resolve to (without reporting)."""
        chain = _chain(node)
        if chain is None:
            return []
        root, steps = chain
        out = []
        for start in self.get(root):
            if steps and self.resolver.banned_as(start) is not None:
                continue
            value: Any = start
            for _, name in steps:
                value = _first(self.resolver.attribute(value, name))
                if value is OPAQUE:
                    break
            if value is not OPAQUE:
                out.append(value)
        return out


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """A module's top-level statements, into if/try/with blocks (they run at import)."""
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            for block in ("body", "orelse", "handlers", "finalbody"):
                for inner in getattr(node, block, []):
                    if isinstance(inner, ast.ExceptHandler):
                        yield from _top_level(inner.body)
                    else:
                        yield from _top_level([inner])


def _first(value: Any) -> Any:
    return value[0] if isinstance(value, list) else value


def _literal(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _chain(node: ast.expr) -> tuple[str, list[Step]] | None:
    """(root name, steps) for `a.b.c`, `getattr(a, "b")`, `vars(a)["b"]`, `a.__dict__["b"]`,
    `f.__globals__["b"]`; a step is ("attr", name), ("item", key) or ("computed", "")."""
    if isinstance(node, ast.Name):
        return node.id, []
    inner: tuple[str, list[Step]] | None
    if isinstance(node, ast.Attribute):
        inner = _chain(node.value)
        return None if inner is None else (inner[0], [*inner[1], ("attr", node.attr)])
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
        if node.func.id == "getattr" and len(node.args) >= 2:
            inner = _chain(node.args[0])
            name = _literal(node.args[1])
            step: Step = ("computed", "") if name is None else ("attr", name)
            return None if inner is None else (inner[0], [*inner[1], step])
        if node.func.id == "vars" and len(node.args) == 1:
            inner = _chain(node.args[0])
            return None if inner is None else (inner[0], [*inner[1], ("attr", "__dict__")])
    if isinstance(node, ast.Subscript):
        inner = _chain(node.value)
        if inner is None:
            return None
        key = _literal(node.slice)
        steps = list(inner[1])
        if key is not None and steps and steps[-1] == ("attr", "__dict__"):
            # A namespace's dict read by a literal key is the attribute itself.
            return inner[0], [*steps[:-1], ("attr", key)]
        return inner[0], [*steps, ("computed", "") if key is None else ("item", key)]
    return None


def _chain_nodes(nodes: list[ast.AST]) -> Iterator[ast.expr]:
    """Every chain expression with at least one step (its prefixes are checked too)."""
    for node in nodes:
        if isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)) and _chain(node) is not None:
            yield node


# What reaches another module's namespace or a function's closed-over values without naming
# them: where the runtime guard's originals could be found (a frame's globals, a closure's
# cells). Only the kernel reads them. Moving between frames (`tb_frame`, `f_back`, `gi_frame`)
# and reading a frame's code and line is error reporting, and stays allowed: every way on from
# a frame to a namespace is in this set. `__wrapped__` is allowed too: the guard's wrappers carry
# none (twinflow.kernel._nondeterminism), so it leads only to code the gate has read.
INTROSPECTION = frozenset(
    {
        "__closure__",
        "cell_contents",
        "__globals__",
        "__builtins__",
        "f_globals",
        "f_locals",
        "f_builtins",
    }
)


def check_file(
    resolver: Resolver, tree: ast.AST, package: str | None, *, shipped: bool = True
) -> list[Finding]:
    """Every banned object or module-through-module path the file reaches by name; in a
    shipped module (`shipped`), also a literal entropy-device path (tests may name one as data,
    to see it refused)."""
    return judge_file(resolver, tree, package, shipped=shipped)[0]


def judge_file(
    resolver: Resolver, tree: ast.AST, package: str | None, *, shipped: bool = True
) -> tuple[list[Finding], frozenset[tuple[int, int]]]:
    """check_file's findings, and the places (line, 1-based column) of the banned spellings
    the file uses purely (`pure_uses`): ruff reports those by spelling, and the gate drops them."""
    nodes = list(ast.walk(tree))
    scope = FileScope(resolver, package)
    scope.bind_statement(nodes)
    pure = PureUses(resolver, scope, nodes)
    findings: list[Finding] = []
    if shipped:
        findings.extend(_entropy_files(nodes))
    for node in nodes:
        name = node.attr if isinstance(node, ast.Attribute) else None
        if isinstance(node, ast.Call):
            called = _chain(node)  # getattr(f, "__closure__")
            name = called[1][-1][1] if called and called[1] else None
        if name in INTROSPECTION:
            findings.append(
                Finding(
                    getattr(node, "lineno", 0),
                    f"{name}: reads the insides of a function, frame or generator (where the "
                    "runtime guard keeps the originals it swaps out); not outside the kernel",
                )
            )
    # Imports: each from-import is a step from a module to a name.
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                value = resolver.lazy(alias.name)
                hit = resolver.banned_as(value)
                if hit and not pure.import_alias(alias, value):
                    findings.append(_banned(node.lineno, alias.name, hit, resolver))
        elif isinstance(node, ast.ImportFrom):
            absolute = scope._absolute(node)
            if absolute is None:
                continue
            base = resolver.lazy(absolute)
            hit = resolver.banned_as(base)
            if hit:
                if not pure.from_banned_module(node, base):
                    findings.append(_banned(node.lineno, absolute, hit, resolver))
                continue
            for alias in node.names:
                if alias.name == "*":
                    findings.extend(_star(resolver, resolver.real(base), absolute, node.lineno))
                    continue
                if pure.from_alias(alias, base):
                    continue
                value = _first(resolver.attribute(base, alias.name))
                spelled = f"{absolute}.{alias.name}"
                findings.extend(
                    _step(resolver, scope, base, alias.name, value, spelled, node.lineno)
                )
    for node in _chain_nodes(nodes):
        if pure.attribute(node):
            continue  # its receiver (`logging.time` of `logging.time.gmtime(0)`) is judged alone
        chain = _chain(node)
        assert chain is not None
        findings.extend(_walk(resolver, scope, chain, node.lineno))
    for node in nodes:
        chain = _getter_chain(scope, node)
        if chain is not None:
            findings.extend(_walk(resolver, scope, chain, getattr(node, "lineno", 0)))
    unique = {(f.line, f.message): f for f in findings}
    return sorted(unique.values(), key=lambda f: (f.line, f.message)), frozenset(pure.places)


_CONSTANTS = (int, float, complex, str, bytes, bool, type(None))


class PureUses:
    """The banned spellings one file uses without reaching what the ban is about.

    - a constant of a banned module (`select.POLLIN`): data, no clock or entropy;
    - a name a banned module re-exports from a module that is not banned
      (`secrets.compare_digest` is `hmac.compare_digest`);
    - a banned call given the argument that makes it pure (`Resolver.given_argument`:
      `time.gmtime(t)`, `time.strftime(fmt, t)`), called where it is spelled: a banned
      function handed on as a value, or called without that argument, stays refused.

    A banned module's import (`import select`, `from secrets import x`) passes only when every
    use of what it binds is pure; the names are taken flow-insensitively, so any other use of
    the same name anywhere in the file keeps the import refused.
    """

    def __init__(self, resolver: Resolver, scope: FileScope, nodes: list[ast.AST]) -> None:
        self.resolver = resolver
        self.scope = scope
        self.places: set[tuple[int, int]] = set()
        self._parents: dict[int, ast.AST] = {}
        self._loads: dict[str, list[ast.Name]] = {}
        for node in nodes:
            for child in ast.iter_child_nodes(node):
                self._parents[id(child)] = node
            if isinstance(node, ast.Name) and not isinstance(node.ctx, (ast.Store, ast.Del)):
                self._loads.setdefault(node.id, []).append(node)

    def _place(self, node: ast.AST) -> None:
        self.places.add((getattr(node, "lineno", 0), getattr(node, "col_offset", -1) + 1))

    def _value(self, value: Any, node: ast.expr) -> bool:
        """Whether `value`, spelled by `node`, is a pure use there."""
        value = self.resolver.real(value)
        if value is OPAQUE or isinstance(value, (Pending, Local, ModuleType)):
            return False
        if isinstance(value, _CONSTANTS):
            return True
        hit = self.resolver.banned_as(value)
        if hit is None:
            # Only a function or class known by where it was defined: an instance a banned
            # module holds (`ctypes.pythonapi`, `random._inst`) has no such name, and its
            # methods reach whatever the module is banned for.
            defined = isinstance(value, type) or inspect.isroutine(value)
            return defined and _qualified(value) is not None
        index = self.resolver.given_argument.get(hit)
        call = self._parents.get(id(node))
        if index is None or not isinstance(call, ast.Call) or call.func is not node:
            return False
        given = call.args[: index + 1]
        if len(given) != index + 1 or any(isinstance(arg, ast.Starred) for arg in given):
            return False
        last = given[index]
        return not (isinstance(last, ast.Constant) and last.value is None)

    def attribute(self, node: ast.expr) -> bool:
        """A chain node (`time.gmtime` of `time.gmtime(0)`) that is a pure use."""
        if not isinstance(node, ast.Attribute):
            return False
        values = self.scope.values_of(node)
        if not any(self.resolver.banned_as(self.resolver.real(v)) for v in values):
            return False  # nothing to excuse: the ordinary checks judge it
        if not all(self._value(v, node) for v in values):
            return False
        self._place(node)
        return True

    def _every_use(self, name: str, value: Any) -> bool:
        """Whether `name` is used, and every load of it in the file uses `value` purely (a
        name bound and never used here may be re-exported, where no call shows)."""
        loads = self._loads.get(name, [])
        if not loads:
            return False
        for load in loads:
            parent = self._parents.get(id(load))
            if isinstance(parent, ast.Attribute) and parent.value is load:
                member = _first(self.resolver.attribute(value, parent.attr))
                if not self._value(member, parent):
                    return False
            elif not self._value(value, load):
                return False
        return True

    def import_alias(self, alias: ast.alias, module: Any) -> bool:
        """`import select`: every use of the module is a pure member of it."""
        if "." in alias.name and alias.asname is None:
            return False  # `import a.b` binds `a`: judged by its members, not here
        if not self._every_use(alias.asname or alias.name, module):
            return False
        self._place(alias)
        return True

    def from_alias(self, alias: ast.alias, base: Any) -> bool:
        """`from time import gmtime`: every use of the name is a pure call."""
        value = _first(self.resolver.attribute(base, alias.name))
        if self.resolver.banned_as(value) is None:
            return False  # nothing to excuse; the ordinary checks judge it
        if not self._every_use(alias.asname or alias.name, value):
            return False
        self._place(alias)
        return True

    def from_banned_module(self, node: ast.ImportFrom, base: Any) -> bool:
        """`from secrets import compare_digest`: every name bound is used purely."""
        for alias in node.names:
            value = _first(self.resolver.attribute(base, alias.name))
            if alias.name == "*" or isinstance(self.resolver.real(value), ModuleType):
                return False
            if not self._every_use(alias.asname or alias.name, value):
                return False
        self._place(node)
        for alias in node.names:
            self._place(alias)
        return True


def _getter_chain(scope: FileScope, node: ast.AST) -> tuple[str, list[Step]] | None:
    """`operator.attrgetter("a.b")(x)` and `operator.methodcaller("a", ...)(x)` as the chain
    `x.a.b` / `x.a` (the getter named by any binding); a computed path as a computed step."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Call)
        and len(node.args) == 1
        and node.func.args
    ):
        return None
    getter = node.func.func
    kinds = {
        getattr(value, "__name__", None)
        for value in scope.values_of(getter)
        if getattr(value, "__module__", None) == "operator"
    }
    if not kinds & {"attrgetter", "methodcaller"}:
        return None
    target = _chain(node.args[0])
    if target is None:
        return None
    path = _literal(node.func.args[0])
    if path is None:
        return target[0], [*target[1], ("computed", "")]
    if "attrgetter" in kinds:
        return target[0], [*target[1], *(("attr", part) for part in path.split("."))]
    return target[0], [*target[1], ("attr", path)]


def _walk(
    resolver: Resolver, scope: FileScope, chain: tuple[str, list[Step]], line: int
) -> list[Finding]:
    """Follow one chain from every value its root may have; the findings of the first path
    that reaches a banned object, else of the first that reaches through a module."""
    root, steps = chain
    findings: list[Finding] = []
    for start in scope.get(root):
        if resolver.banned_as(start) is not None:
            continue  # the import that bound it is reported
        value = start
        spelled = root
        first: list[Finding] = []
        for kind, name in steps:
            if kind == "computed":
                if _namespace_of(value) is not None:
                    first = first or [
                        Finding(
                            line,
                            f"{spelled}[...]: a computed name taken from the namespace of "
                            f"{_namespace_of(value)}; the gate cannot see what it reaches: "
                            "name the attribute",
                        )
                    ]
                break
            if kind == "item":
                nxt = value.get(name, OPAQUE) if isinstance(value, dict) else OPAQUE
                shown = f"{spelled}[{name!r}]"
            else:
                nxt = _first(resolver.attribute(value, name))
                shown = f"{spelled}.{name}"
            step = _step(resolver, scope, value, name, nxt, shown, line)
            spelled = shown
            if step and "is banned" in step[0].message:
                first = step
                break
            first = first or step
            value = nxt
            if value is OPAQUE:
                break
        findings.extend(first)
    return findings


# The kernel's entropy devices: reading them is os.urandom by another name. A string names one
# when it is a path to it (`/dev/urandom`, `//dev/./random`, `file:///dev/urandom`): one word,
# whose normalised path ends at the device. Prose that mentions a device (a docstring, a
# message) has spaces in it and opens nothing; a module or class docstring is never a path.
_ENTROPY = re.compile(r"(?:^|/)(?:dev/(?:u|s|a)?random|dev/hwrng|proc/sys/kernel/random(?:/.*)?)$")


# The kernel's clock files, read the same way: uptime, boot time, a process's start and CPU
# times, the load average, the real-time clock (the runtime guard refuses opening them).
_CLOCK_FILES = re.compile(
    r"(?:^|/)(?:proc/(?:uptime|stat|loadavg|schedstat|timer_list|driver/rtc)"
    r"|proc/(?:self|thread-self|\d+)(?:/task/\d+)?/(?:stat|schedstat)|dev/rtc\d*|sys/class/rtc(?:/.*)?)$"
)


def _docstrings(nodes: list[ast.AST]) -> set[int]:
    found = set()
    for node in nodes:
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def names_entropy_device(text: str) -> bool:
    """Whether `text` is a path to an entropy device."""
    word = text.strip()
    if not word or any(c.isspace() for c in word):
        return False
    return _ENTROPY.search(posixpath.normpath(re.sub(r"/+", "/", word))) is not None


def names_clock_file(text: str) -> bool:
    """Whether `text` is a path to one of the kernel's clock files (`/proc/uptime`)."""
    word = text.strip()
    if not word or any(c.isspace() for c in word):
        return False
    return _CLOCK_FILES.search(posixpath.normpath(re.sub(r"/+", "/", word))) is not None


def _entropy_files(nodes: list[ast.AST]) -> list[Finding]:
    found = []
    docstrings = _docstrings(nodes)
    for node in nodes:
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, (str, bytes))
            and id(node) not in docstrings
        ):
            text = node.value if isinstance(node.value, str) else node.value.decode("latin-1")
            if names_entropy_device(text):
                found.append(
                    Finding(
                        node.lineno,
                        f"{text!r} names an entropy device: reading it is os.urandom by another "
                        "name: take twinflow.kernel Ids",
                    )
                )
            elif names_clock_file(text):
                found.append(
                    Finding(
                        node.lineno,
                        f"{text!r} names a clock file: reading it is a real clock by another "
                        "name: take a twinflow.kernel Clock",
                    )
                )
    return found


def _banned(line: int, spelled: str, hit: str, resolver: Resolver) -> Finding:
    via = "" if spelled == hit or spelled.startswith(hit + ".") else f" (it is {hit})"
    return Finding(line, f"{spelled}{via} is banned: {resolver.banned[hit]}")


def _step(
    resolver: Resolver,
    scope: FileScope,
    parent: Any,
    name: str,
    value: Any,
    spelled: str,
    line: int,
) -> list[Finding]:
    hit = resolver.banned_as(value)
    if hit is not None:
        return [_banned(line, spelled, hit, resolver)]
    reached = _module_name(value)
    through = _module_name(parent) or type(parent).__name__
    if (
        reached is not None
        and not resolver.is_submodule(parent, name, value)
        and reached not in scope.imported
    ):
        return [
            Finding(
                line,
                f"{spelled} reaches the module {reached} through {through}: import {reached} "
                "itself, where the banned list can see it",
            )
        ]
    return []


def _star(resolver: Resolver, base: Any, absolute: str, line: int) -> list[Finding]:
    if not isinstance(base, ModuleType):
        return []
    exported = getattr(base, "__all__", None)
    names = (
        list(exported) if exported is not None else [n for n in vars(base) if not n.startswith("_")]
    )
    found = []
    for name in names:
        value = resolver._getattr(base, name)
        hit = resolver.banned_as(value)
        if hit is not None:
            found.append(
                Finding(
                    line,
                    f"from {absolute} import * binds {name}, which is {hit}: banned: "
                    f"{resolver.banned[hit]}",
                )
            )
        elif isinstance(value, ModuleType) and not resolver.is_submodule(base, name, value):
            found.append(
                Finding(
                    line,
                    f"from {absolute} import * binds the module {value.__name__}: import it itself",
                )
            )
    return found


def check_dotted(resolver: Resolver, dotted: str, line: int) -> list[Finding]:
    """What a literal dynamic import (`importlib.import_module("logging").time.time`) reaches:
    the module it names, then each attribute, judged as an attribute chain in a file that
    imported only that module."""
    parts = dotted.split(".")
    scope = FileScope(resolver, None)
    for cut in range(len(parts), 0, -1):
        name = ".".join(parts[:cut])
        value = resolver.module(name)
        if value is OPAQUE:
            continue
        hit = resolver.banned_as(value)
        if hit is not None:
            return [_banned(line, name, hit, resolver)]
        scope.imported.add(name)
        spelled = name
        found: list[Finding] = []
        for attribute in parts[cut:]:
            nxt = _first(resolver.attribute(value, attribute))
            step = _step(resolver, scope, value, attribute, nxt, f"{spelled}.{attribute}", line)
            spelled = f"{spelled}.{attribute}"
            if step and "is banned" in step[0].message:
                return step
            found = found or step
            value = nxt
            if value is OPAQUE:
                break
        return found
    return []
