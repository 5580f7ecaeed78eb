"""Deny by default at the module level (the determinism gate's third pass).

A shipped module outside twinflow.kernel (and the one user-code loader) may reach only the
standard-library modules the allowlist names (`ALLOWLIST`, beside banned.toml): every other
standard-library module and every C module is refused by name, whatever path reaches it:

- an import (`import logging.handlers`, `from logging import handlers`), judged by what each use
  of the name it binds reaches: `select.POLLIN` is data and passes, `select.poll` does not; a
  name imported and never used is refused (its import runs it, or re-exports it);
- an attribute chain (`os.path` is posixpath; `json.decoder.re` is re), a `getattr` with a
  literal, a name a workspace module re-exports (`from twinflow.kernel import x` where x is
  `threading.Lock`): the object reached is judged by the module it was defined in, and a C
  module's object by the allowed module it implements (`functools.reduce` is `_functools`'s);
- a star import, judged by every name it binds;
- a dynamic import with a literal name (`importlib.import_module("logging.handlers")`).

An importer is a module like any other: `importlib`, `pkgutil`, `runpy`, `pickle`, `doctest`,
`logging.config` are not on the allowlist. The one importer call the gate reads as an import
(`importlib.import_module` with a literal or the package's own name, judged by the dynamic-import
pass) passes in call position only.
"""

from __future__ import annotations

import ast
import inspect
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from _gatelib import GateError
from _resolve import OPAQUE, FileScope, Finding, Local, Pending, Resolver, _chain

ALLOWLIST = "packages/twinflow-kernel/src/twinflow/kernel/stdlib.toml"

# Importer calls the dynamic-import pass reads as imports of their (literal) target.
READ_IMPORTERS = frozenset({"importlib.import_module"})

_CONSTANTS = (int, float, complex, str, bytes, bool, type(None), frozenset, tuple)


@dataclass(frozen=True)
class Allowlist:
    """The allowlist's rows: what any shipped module may reach, and per-file grants."""

    modules: frozenset[str]
    packages: frozenset[str]
    """Allowed modules whose submodules are allowed too."""
    implemented_by: frozenset[str]
    granted: frozenset[tuple[str, str]]
    """(file relative to the root, module); `package.*` for a grant's submodules, `=module`
    for the C modules its objects come from."""
    refused: frozenset[str] = frozenset()
    """Dotted attributes of allowed modules a shipped module may not reach (`sys.modules`)."""

    def allows(self, module: str, relative: str, *, defined_in: bool = False) -> bool:
        """Whether the file `relative` may reach the module `module`; with `defined_in`, an
        object defined there (a C module's object counts as the allowed module's it
        implements, while the C module itself, imported by name, does not)."""
        if not is_standard(module) or module == "builtins":
            return True
        implemented = defined_in and (
            module in self.implemented_by or (relative, f"={module}") in self.granted
        )
        if module in self.modules or implemented:
            return True
        if any(module.startswith(package + ".") for package in self.packages):
            return True
        parents = [module.rsplit(".", cut)[0] for cut in range(1, module.count(".") + 1)]
        return (relative, module) in self.granted or any(
            (relative, f"{parent}.*") in self.granted for parent in parents
        )


def _private(module: str) -> bool:
    """A private standard-library module (`_random`, `_socket`, `_functools`): refused by name
    unless listed, even where a use reaches only data (no public face says what it holds)."""
    return is_standard(module) and any(part.startswith("_") for part in module.split("."))


def is_standard(module: str) -> bool:
    """Whether `module` is the standard library's or a C module built into the interpreter."""
    top = module.partition(".")[0]
    return top in sys.stdlib_module_names or module in sys.builtin_module_names


def load_allowlist(root: Path) -> Allowlist:
    """The allowlist beside banned.toml.

    Raises:
        GateError: it is missing or malformed (a row without a module or a reason).
    """
    path = root / ALLOWLIST
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise GateError(f"cannot read the standard-library allowlist {path}: {exc}") from exc
    modules: set[str] = set()
    packages: set[str] = set()
    implemented: set[str] = set()
    granted: set[tuple[str, str]] = set()
    refused: set[str] = set()
    for kind in ("allowed", "granted"):
        for number, row in enumerate(table.get(kind, []), 1):
            module, reason = row.get("module"), row.get("reason")
            if not isinstance(module, str) or not isinstance(reason, str) or not reason.strip():
                raise GateError(f"{ALLOWLIST}: [[{kind}]] row {number} needs a module and a reason")
            names = {module, *(str(m) for m in row.get("implemented_by", []))}
            if kind == "granted":
                files = row.get("files")
                if not isinstance(files, list) or not files:
                    raise GateError(f"{ALLOWLIST}: the grant of {module} names no files")
                granted.update((str(f), module) for f in files)
                granted.update((str(f), f"={name}") for f in files for name in names - {module})
                if row.get("submodules") is True:
                    granted.update((str(f), f"{module}.*") for f in files)
                continue
            modules.add(module)
            refused.update(f"{module}.{name}" for name in row.get("refused", []))
            if row.get("submodules") is True:
                packages.add(module)
            implemented.update(names - {module})
    return Allowlist(
        frozenset(modules),
        frozenset(packages),
        frozenset(implemented),
        frozenset(granted),
        frozenset(refused),
    )


def _defined_in(value: Any) -> str | None:
    """The module a value comes from: a module's own name, a class's or function's module, an
    instance's class's module; None for data and for what the pass cannot follow."""
    if value is OPAQUE or isinstance(value, _CONSTANTS):
        return None
    if isinstance(value, (Pending, Local)):
        return value.name
    if isinstance(value, ModuleType):
        return value.__name__
    holder = value if isinstance(value, type) or inspect.isroutine(value) else type(value)
    owner = getattr(value, "__self__", None)
    if inspect.isroutine(value) and isinstance(owner, type):
        holder = owner  # a C type's method: the type's module
    module = getattr(holder, "__module__", None)
    return module if isinstance(module, str) else None


def _qualified(value: Any) -> str | None:
    module = getattr(value, "__module__", None)
    name = getattr(value, "__qualname__", None)
    return f"{module}.{name}" if isinstance(module, str) and isinstance(name, str) else None


class _Judge:
    def __init__(
        self, resolver: Resolver, allowlist: Allowlist, relative: str, scope: FileScope
    ) -> None:
        self.resolver = resolver
        self.allowlist = allowlist
        self.relative = relative
        self.scope = scope
        self.findings: list[Finding] = []

    def value(self, value: Any, spelled: str, line: int) -> None:
        module = _defined_in(value)  # a Pending module by its name: never imported for this
        defined_in = not isinstance(value, (ModuleType, Pending, Local))
        if module is None or self.allowlist.allows(module, self.relative, defined_in=defined_in):
            return
        what = "" if module in spelled.replace("(", " ").split() else f" (it is {module}'s)"
        self.findings.append(
            Finding(
                line,
                f"{spelled}{what}: the standard-library module {module} is not on the allowlist "
                f"({ALLOWLIST}): only modules with no clock, entropy, process, network, thread "
                "or importer in reach are; take a twinflow.kernel port, or add a row with a reason",
            )
        )

    def refused(self, owner: Any, name: str, spelled: str, line: int) -> None:
        """`owner.name`, when it is a refused attribute of an allowed module."""
        owner = self.resolver.real(owner)
        module = owner.name if isinstance(owner, Local) else getattr(owner, "__name__", None)
        dotted = f"{module}.{name}"
        if isinstance(owner, ModuleType) and dotted in self.allowlist.refused:
            self.findings.append(
                Finding(
                    line,
                    f"{spelled}: {dotted} is refused in a shipped module ({ALLOWLIST}): an "
                    "importer's table or a tracer; import by name, where the gates read it",
                )
            )

    def module_name(self, module: str, spelled: str, line: int) -> None:
        if not self.allowlist.allows(module, self.relative):
            self.value(Pending(module), spelled, line)


def check_modules(
    resolver: Resolver,
    tree: ast.Module,
    package: str | None,
    relative: str,
    allowlist: Allowlist,
    dynamic_targets: list[tuple[int, str]],
) -> list[Finding]:
    """Every standard-library module off the allowlist that the file reaches (module docstring)."""
    nodes = list(ast.walk(tree))
    scope = FileScope(resolver, package)
    scope.bind_statement(nodes)
    judge = _Judge(resolver, allowlist, relative, scope)
    parents: dict[int, ast.AST] = {}
    for node in nodes:
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    imported: dict[str, tuple[str, int]] = {}  # bound name -> (module, line), off the allowlist
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _private(alias.name) and not allowlist.allows(alias.name, relative):
                    judge.module_name(alias.name, f"import {alias.name}", node.lineno)
                elif not allowlist.allows(alias.name, relative):
                    bound = alias.asname or alias.name.partition(".")[0]
                    imported[bound] = (alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            absolute = scope._absolute(node)
            if absolute is None:
                continue
            if _private(absolute) and not allowlist.allows(absolute, relative):
                judge.module_name(absolute, f"from {absolute} import ...", node.lineno)
                continue
            base = resolver.lazy(absolute)
            for alias in node.names:
                if alias.name == "*":
                    if not allowlist.allows(absolute, relative):
                        judge.module_name(absolute, f"from {absolute} import *", node.lineno)
                    else:
                        _star(judge, resolver.real(base), absolute, node.lineno)
                    continue
                value = resolver.attribute(base, alias.name)
                value = value[0] if isinstance(value, list) else value
                spelled = f"{absolute}.{alias.name}"
                judge.refused(base, alias.name, spelled, node.lineno)
                if isinstance(resolver.real(value), ModuleType):
                    if not allowlist.allows(resolver.real(value).__name__, relative):
                        imported[alias.asname or alias.name] = (
                            resolver.real(value).__name__,
                            node.lineno,
                        )
                elif _qualified(value) in READ_IMPORTERS:
                    imported[alias.asname or alias.name] = (absolute, node.lineno)
                elif value is OPAQUE and not allowlist.allows(absolute, relative):
                    judge.module_name(absolute, spelled, node.lineno)
                else:
                    judge.value(value, spelled, node.lineno)
    # Every use of a name, followed to the end of its chain; a module judged where the chain
    # stops at it (`h = logging.handlers`), its objects where it goes on.
    used: set[str] = set()
    for node in nodes:
        if not isinstance(node, ast.Name) or isinstance(node.ctx, (ast.Store, ast.Del)):
            continue
        top: ast.expr = node
        while isinstance(parent := parents.get(id(top)), ast.expr) and _extends(parent, top):
            top = parent
        if node.id in imported:
            used.add(node.id)
        call = parents.get(id(top))
        _refused_attributes(judge, scope, top)
        for value in scope.values_of(top) if _chain(top) is not None else []:
            if (
                isinstance(call, ast.Call)
                and call.func is top
                and _qualified(value) in READ_IMPORTERS
            ):
                continue  # judged by its literal target, in the dynamic-import pass
            judge.value(value, ast.unparse(top), node.lineno)
    for bound, (module, line) in imported.items():
        if bound not in used:
            judge.module_name(module, f"import {module} (never used here)", line)
    for line, target in dynamic_targets:
        _dotted(judge, resolver, target, line)
    unique = {(f.line, f.message): f for f in judge.findings}
    return sorted(unique.values(), key=lambda f: (f.line, f.message))


def _refused_attributes(judge: _Judge, scope: FileScope, top: ast.expr) -> None:
    """A refused attribute of an allowed module (`sys.modules`) anywhere along the chain."""
    chain = _chain(top)
    if chain is None:
        return
    root, steps = chain
    for start in scope.get(root):
        value = start
        for kind, name in steps:
            if kind != "attr":
                break
            judge.refused(value, name, ast.unparse(top), getattr(top, "lineno", 0))
            found = judge.resolver.attribute(value, name)
            value = found[0] if isinstance(found, list) else found
            if value is OPAQUE:
                break


def _extends(parent: ast.expr, node: ast.expr) -> bool:
    """Whether `parent` takes a step further along the chain `node` ends (`node.x`,
    `node[...]`, `getattr(node, "x")`, `vars(node)`)."""
    if isinstance(parent, (ast.Attribute, ast.Subscript)):
        return parent.value is node
    return (
        isinstance(parent, ast.Call)
        and isinstance(parent.func, ast.Name)
        and parent.func.id in ("getattr", "vars")
        and bool(parent.args)
        and parent.args[0] is node
        and _chain(parent) is not None
    )


def _star(judge: _Judge, base: Any, absolute: str, line: int) -> None:
    if not isinstance(base, ModuleType):
        return
    exported = getattr(base, "__all__", None)
    names = exported if exported is not None else [n for n in vars(base) if not n.startswith("_")]
    for name in names:
        judge.value(Resolver._getattr(base, name), f"from {absolute} import * ({name})", line)


def _dotted(judge: _Judge, resolver: Resolver, dotted: str, line: int) -> None:
    """A literal dynamic import: the module it names, then each attribute taken from it."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        name = ".".join(parts[:cut])
        value = resolver.module(name)
        if not isinstance(value, (ModuleType, Local)):
            continue
        if not judge.allowlist.allows(name, judge.relative):
            judge.module_name(name, f"{dotted} (a dynamic import)", line)
            return
        for attribute in parts[cut:]:
            found = resolver.attribute(value, attribute)
            value = found[0] if isinstance(found, list) else found
            if value is OPAQUE:
                return
            judge.value(value, f"{dotted} (a dynamic import)", line)
        return
