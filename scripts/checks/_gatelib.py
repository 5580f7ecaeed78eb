"""What the determinism and layer gates share: the workspace's members, a walk of their files,
and the AST pass that turns dynamic imports into the imports they are.

Not a gate itself (scripts/check runs every scripts/checks/* not starting with "_").
"""

from __future__ import annotations

import ast
import codecs
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


class GateError(Exception):
    """The tree cannot be read: the gate cannot decide (exit 2)."""


@dataclass(frozen=True)
class Member:
    """A workspace member, as the root's [tool.uv.workspace] lists it."""

    name: str
    """The distribution name from its pyproject.toml."""
    path: Path
    """The member's directory."""
    source: Path
    """Where its importable packages live: `src/` (src layout) or the member itself (flat)."""


def _glob(root: Path, patterns: list[str]) -> set[Path]:
    found: set[Path] = set()
    for pattern in patterns:
        found.update(p for p in root.glob(pattern) if p.is_dir())
    return found


def workspace_members(root: Path) -> list[Member]:
    """Every member of the uv workspace at `root`, from its own member list, sorted by path.

    Raises:
        GateError: no workspace table, or a member without a readable [project].name.
    """
    try:
        config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise GateError(f"cannot read {root / 'pyproject.toml'}: {exc}") from exc
    workspace = config.get("tool", {}).get("uv", {}).get("workspace")
    if not isinstance(workspace, dict) or not workspace.get("members"):
        raise GateError(f"{root / 'pyproject.toml'} has no [tool.uv.workspace] members")
    paths = _glob(root, list(workspace["members"])) - _glob(
        root, list(workspace.get("exclude", []))
    )
    members = []
    for path in sorted(paths):
        pyproject = path / "pyproject.toml"
        try:
            project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
            name = str(project["name"])
        except (OSError, KeyError, tomllib.TOMLDecodeError) as exc:
            raise GateError(f"workspace member {path}: no readable [project].name ({exc})") from exc
        source = path / "src" if (path / "src").is_dir() else path
        members.append(Member(name, path, source))
    return members


# Directories at the root of the repository that hold no source: the venv, git's store and
# tool caches. Everything else, at any depth and whatever its name, is walked.
ROOT_SKIP = frozenset(
    {".git", ".venv", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis"}
)
PYTHON_SUFFIXES = (".py", ".pyi")
# Files Python imports that are not source: a gate that reads source cannot see into them.
OPAQUE_SUFFIXES = (".pyc", ".pyo", ".so", ".pyd")


def top_level_entries(root: Path) -> list[Path]:
    """What the gates hand to ruff: every entry of `root` but the ones in ROOT_SKIP."""
    return sorted(p for p in root.iterdir() if p.name not in ROOT_SKIP)


def walk(root: Path) -> Iterator[Path]:
    """Every file under `root` (the ROOT_SKIP directories at its top excepted), sorted."""
    for entry in top_level_entries(root):
        if entry.is_file():
            yield entry
        elif entry.is_dir():
            yield from sorted(p for p in entry.rglob("*") if p.is_file())


def symlinks(root: Path) -> list[Path]:
    """Every symbolic link in the tree (see walk): linters do not follow linked folders."""
    found = []
    for entry in top_level_entries(root):
        if entry.is_symlink():
            found.append(entry)
        elif entry.is_dir():
            found.extend(p for p in entry.rglob("*") if p.is_symlink())
    return sorted(found)


def python_files(root: Path) -> list[Path]:
    """Every .py and .pyi file of the tree (see walk)."""
    return [p for p in walk(root) if p.suffix in PYTHON_SUFFIXES]


def opaque_modules(root: Path, members: list[Member]) -> list[Path]:
    """Compiled or binary modules in a member's tree, outside __pycache__."""
    found = []
    for member in members:
        for path in sorted(member.path.rglob("*")):
            if path.suffix in OPAQUE_SUFFIXES and "__pycache__" not in path.parts:
                found.append(path)
    return found


def module_name(path: Path, members: list[Member]) -> str | None:
    """The dotted module a member's source file is imported as, or None outside any source."""
    for member in members:
        if path.is_relative_to(member.source) and not path.is_relative_to(member.path / "tests"):
            parts = list(path.relative_to(member.source).with_suffix("").parts)
            if parts and parts[-1] == "__init__":
                parts.pop()
            return ".".join(parts) if parts else None
    return None


_CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


def read_source(path: Path) -> str:
    """The file's text, read as UTF-8, the only encoding the gates' tools read.

    Raises:
        ValueError: a coding declaration names another encoding (Python would decode the file
            differently from ruff and import-linter), or the bytes are not UTF-8.
    """
    data = path.read_bytes()
    for line in data.splitlines()[:2]:
        match = _CODING.match(line)
        if match is not None:
            try:
                codec = codecs.lookup(match.group(1).decode("ascii")).name
            except (LookupError, UnicodeDecodeError):
                codec = match.group(1).decode("ascii", "replace")
            if codec != "utf-8":
                raise ValueError(
                    f"declares the source encoding {codec!r}: Python would read it differently "
                    "from the linters; remove the declaration (UTF-8 is the default)"
                )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"is not UTF-8 ({exc})") from exc


# ------------------------------------------------------------------- dynamic imports

_IMPORTERS = {
    "importlib.import_module",
    "importlib.__import__",
    "builtins.__import__",
    "__import__",
    "pkgutil.resolve_name",
    "pydoc.locate",
    # EntryPoint(name, value, group).load() imports `value` ("module:attribute").
    "importlib.metadata.EntryPoint",
    "importlib_metadata.EntryPoint",
}
_DUNDER_IMPORTS = {"importlib.__import__", "builtins.__import__", "__import__"}
# Calls that import a package named by a string (the parents of a module they look up, the
# package whose files they read, the module a patch replaces a name in). A literal name is
# read as an import; a computed one only where it is an importer's (find_spec).
_LOOKUPS = {
    "importlib.util.find_spec": "parent",
    "pkgutil.get_loader": "parent",
    "pkgutil.get_data": "package",
    "importlib.resources.files": "package",
    "importlib.resources.read_text": "package",
    "importlib.resources.read_binary": "package",
    "importlib.resources.open_text": "package",
    "importlib.resources.open_binary": "package",
    "importlib.resources.path": "package",
    "importlib.resources.contents": "package",
    "importlib.resources.is_resource": "package",
    "unittest.mock.patch": "parent",
    "mock.patch": "parent",
}
# Ways to run code the gates cannot read: each counts as a dynamic import of a computed name.
_CODE_RUNNERS = {
    "exec",
    "eval",
    "compile",
    "builtins.exec",
    "builtins.eval",
    "builtins.compile",
    "runpy.run_module",
    "runpy.run_path",
    "importlib.reload",
    "importlib.util.spec_from_file_location",
    "importlib.util.spec_from_loader",
    "importlib.machinery.SourceFileLoader",
    "importlib.machinery.SourcelessFileLoader",
    "importlib.machinery.ExtensionFileLoader",
    "zipimport.zipimporter",
    "marshal.loads",
    "types.CodeType",
    "types.FunctionType",
}
# The comment a place that loads a user-named module must carry on the call's line or the line
# above; it is honoured only in the files the gates list (USER_CODE_LOADERS in each gate).
USER_CODE_MARKER = "gate: loads user code"


@dataclass(frozen=True)
class DynamicImport:
    """A module (and maybe attributes) reached by name at run time."""

    line: int
    target: str | None
    """The dotted name reached (module, then attributes), or None if computed."""
    marked: bool
    """Whether the line carries the USER_CODE_MARKER comment."""


def _qualified(node: ast.expr, aliases: dict[str, str]) -> str | None:
    if isinstance(node, ast.Name):
        if node.id == "__builtins__":
            return "builtins"
        return aliases.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        base = _qualified(node.value, aliases)
        return None if base is None else f"{base}.{node.attr}"
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) >= 2
    ):
        # getattr(importlib, "import_module") is importlib.import_module.
        base, attribute = _qualified(node.args[0], aliases), _literal(node.args[1])
        return None if base is None or attribute is None else f"{base}.{attribute}"
    if isinstance(node, ast.Subscript) and _literal(node.slice) is not None:
        # __builtins__["exec"] (a dict in imported modules) is builtins.exec.
        base = _qualified(node.value, aliases)
        return None if base is None else f"{base}.{_literal(node.slice)}"
    return None


def _literal(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _folded(node: ast.expr | None, constants: dict[str, str]) -> str | None:
    """A string the expression always is: a literal, a module-level name bound once to one,
    and `+`, `%`, f-strings and `".".join([...])` of those."""
    if node is None:
        return None
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        left = _folded(node.left, constants)
        if isinstance(node.op, ast.Add):
            right = _folded(node.right, constants)
            return None if left is None or right is None else left + right
        items = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
        values = [_folded(item, constants) for item in items]
        if left is None or any(v is None for v in values):
            return None
        try:
            return left % tuple(values)
        except (TypeError, ValueError):
            return None
    if isinstance(node, ast.JoinedStr):
        parts = []
        for part in node.values:
            value = part.value if isinstance(part, ast.FormattedValue) else part
            folded = _folded(value, constants)
            if folded is None or (isinstance(part, ast.FormattedValue) and part.format_spec):
                return None
            parts.append(folded)
        return "".join(parts)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "join"
        and len(node.args) == 1
        and isinstance(node.args[0], (ast.List, ast.Tuple))
    ):
        separator = _folded(node.func.value, constants)
        pieces = [_folded(item, constants) for item in node.args[0].elts]
        if separator is None or any(piece is None for piece in pieces):
            return None
        return separator.join(piece for piece in pieces if piece is not None)
    return None


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level names bound exactly once, to a string the expression always is."""
    counts: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            counts[node.id] = counts.get(node.id, 0) + 1
    found: dict[str, str] = {}
    for statement in tree.body:
        if isinstance(statement, (ast.Assign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            if len(targets) != 1 or not isinstance(targets[0], ast.Name):
                continue
            value = _folded(statement.value, found)
            if value is not None and counts.get(targets[0].id) == 1:
                found[targets[0].id] = value
    return found


def _own_submodule(node: ast.expr) -> bool:
    """f"{__name__}.x": a package's lazy loader reaching its own submodule (PEP 562)."""
    if not isinstance(node, ast.JoinedStr) or len(node.values) < 2:
        return False
    first, second = node.values[0], node.values[1]
    return (
        isinstance(first, ast.FormattedValue)
        and isinstance(first.value, ast.Name)
        and first.value.id == "__name__"
        and isinstance(second, ast.Constant)
        and str(second.value).startswith(".")
    )


_OWN_TAIL = re.compile(r"(?:\.[A-Za-z_]\w*)+")


def _own_package(call: ast.Call) -> bool:
    """`import_module(".x", __package__)` or `import_module(f"{__package__}.x")`: the calling
    package's own submodule, named literally (one leading dot: `..x` climbs out of it)."""
    if not call.args:
        return False
    name = call.args[0]
    if isinstance(name, ast.JoinedStr):
        first, rest = name.values[0], name.values[1:]
        return (
            isinstance(first, ast.FormattedValue)
            and isinstance(first.value, ast.Name)
            and first.value.id == "__package__"
            and first.format_spec is None
            and bool(rest)
            and all(isinstance(part, ast.Constant) for part in rest)
            and _OWN_TAIL.fullmatch("".join(str(getattr(p, "value", "")) for p in rest)) is not None
        )
    package = call.args[1] if len(call.args) > 1 else None
    for keyword in call.keywords:
        if keyword.arg == "package":
            package = keyword.value
    text = _literal(name)
    return (
        text is not None
        and _OWN_TAIL.fullmatch(text) is not None
        and isinstance(package, ast.Name)
        and package.id == "__package__"
    )


def _argument(call: ast.Call, index: int, keyword: str) -> ast.expr | None:
    for item in call.keywords:
        if item.arg == keyword:
            return item.value
    return call.args[index] if len(call.args) > index else None


def _resolve(name: str, anchor: str, level: int) -> str | None:
    """importlib's relative-name resolution: `name` `level` packages up from `anchor`."""
    bits = anchor.rsplit(".", level - 1)
    if len(bits) < level or not bits[0]:
        return None  # climbs above the top-level package: an ImportError
    return f"{bits[0]}.{name}" if name else bits[0]


def _entry_point(value: str) -> str:
    """The dotted name an entry point's value loads ("module:attribute [extras]")."""
    return value.partition("[")[0].strip().replace(":", ".")


class _Finder(ast.NodeVisitor):
    def __init__(self, lines: list[str], module: str | None = None, package: bool = False) -> None:
        self.lines = lines
        self.module = module
        """The module the source is, when known (relative names resolve against it)."""
        self.package = module if package or module is None else module.rpartition(".")[0]
        """Its __package__."""
        self.constants: dict[str, str] = {}
        """Module-level names bound once to a constant string (see _constants)."""
        self.aliases: dict[str, str] = {}
        self.bound: dict[str, str] = {}
        self.found: list[DynamicImport] = []
        self.seen: set[int] = set()

    def _marked(self, line: int) -> bool:
        around = self.lines[max(0, line - 2) : line]
        return any(USER_CODE_MARKER in text for text in around)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.aliases[alias.asname] = alias.name

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and not node.level:
            for alias in node.names:
                self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def target_of(self, node: ast.expr) -> tuple[bool, str | None]:
        """(is a dynamic import, what it reaches) for an expression."""
        if isinstance(node, ast.Call):
            function = _qualified(node.func, self.aliases)
            if function in _CODE_RUNNERS:
                return True, None
            if function in _IMPORTERS:
                return self._imported(function, node)
            if function in _LOOKUPS:
                return self._looked_up(function, node)
            if function == "sys.modules.get" and node.args:
                return True, _literal(node.args[0])
            if function in ("getattr", "builtins.getattr") and len(node.args) >= 2:
                dynamic, base = self.target_of(node.args[0])
                attribute = _literal(node.args[1])
                if dynamic or base is not None:
                    if base is None or attribute is None:
                        return dynamic, None
                    return True, f"{base}.{attribute}"
        if (
            isinstance(node, ast.Subscript)
            and _qualified(node.value, self.aliases) == "sys.modules"
        ):
            return True, _literal(node.slice)
        if isinstance(node, ast.Attribute):
            dynamic, base = self.target_of(node.value)
            if dynamic:
                return True, None if base is None else f"{base}.{node.attr}"
        if isinstance(node, ast.Name) and node.id in self.bound:
            return True, self.bound[node.id]
        # A bare reference (f = importlib.import_module; g = __builtins__["exec"]) hands the
        # importer on to a call the pass cannot follow: count it as a computed one.
        if (
            isinstance(node, (ast.Name, ast.Attribute, ast.Subscript))
            and _qualified(node, self.aliases) in _IMPORTERS | _CODE_RUNNERS
        ):
            return True, None
        return False, None

    def _anchor(self, node: ast.expr | None) -> str | None:
        """The package a relative name is resolved against, from the expression given."""
        if isinstance(node, ast.Name) and node.id == "__package__":
            return self.package
        if isinstance(node, ast.Name) and node.id == "__name__":
            return self.module
        return _folded(node, self.constants)

    def _globals_package(self, node: ast.expr | None) -> str | None:
        """The __package__ `__import__` reads from its globals argument."""
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("globals", "locals", "vars")
            and not node.args
        ):
            return self.package
        if isinstance(node, ast.Dict):
            values = {
                _literal(k): _literal(v)
                for k, v in zip(node.keys, node.values, strict=True)
                if k is not None
            }
            if values.get("__package__"):
                return values["__package__"]
            name = values.get("__name__")
            if name:
                return name if "__path__" in values else name.rpartition(".")[0]
        return None

    def _imported(self, function: str, node: ast.Call) -> tuple[bool, str | None]:
        """(True, the name an importer's call reaches, or None when computed)."""
        if function.endswith("EntryPoint"):
            value = _folded(_argument(node, 1, "value"), self.constants)
            return True, None if value is None else _entry_point(value)
        argument = _argument(node, 0, "name")
        if argument is None:
            return True, None
        if _own_submodule(argument) or _own_package(node):
            return False, None
        name = _folded(argument, self.constants)
        if name is None:
            return True, None
        if function == "pkgutil.resolve_name":
            return True, name.replace(":", ".")
        if function in _DUNDER_IMPORTS:
            level_node = _argument(node, 4, "level")
            level = level_node.value if isinstance(level_node, ast.Constant) else 0
            if not isinstance(level, int) or isinstance(level, bool):
                return True, None
            if level == 0:
                return True, name
            anchor = self._globals_package(_argument(node, 1, "globals"))
            return True, None if not anchor else _resolve(name, anchor, level)
        if name.startswith("."):
            level = len(name) - len(name.lstrip("."))
            anchor = self._anchor(_argument(node, 1, "package"))
            return True, None if not anchor else _resolve(name[level:], anchor, level)
        return True, name

    def fromlist(self, node: ast.Call) -> list[str]:
        """The submodules `__import__(name, ..., fromlist)` imports besides `name`."""
        if _qualified(node.func, self.aliases) not in _DUNDER_IMPORTS:
            return []
        _, base = self._imported("__import__", node)
        names = _argument(node, 3, "fromlist")
        if base is None or not isinstance(names, (ast.List, ast.Tuple, ast.Set)):
            return []
        items = [_literal(item) for item in names.elts]
        return [f"{base}.{item}" for item in items if item and item != "*"]

    def _looked_up(self, function: str, node: ast.Call) -> tuple[bool, str | None]:
        """(is an import, what it imports) for a call that imports by looking a name up."""
        argument = _argument(node, 0, "name" if _LOOKUPS[function] == "parent" else "package")
        if isinstance(argument, ast.Name) and argument.id in ("__name__", "__package__"):
            return False, None
        name = _folded(argument, self.constants)
        if name is None:
            # A computed name: find_spec imports its parents, so it is an importer; the others
            # are handed module objects as often as names, which import nothing.
            return function == "importlib.util.find_spec", None
        if name.startswith("."):
            level = len(name) - len(name.lstrip("."))
            anchor = self._anchor(_argument(node, 1, "package"))
            resolved = None if not anchor else _resolve(name[level:], anchor, level)
            if resolved is None:
                return True, None
            name = resolved
        if _LOOKUPS[function] == "parent":
            name = name.rpartition(".")[0]
            return (True, name) if name else (False, None)
        return True, name

    def _record(self, node: ast.expr) -> None:
        dynamic, target = self.target_of(node)
        if dynamic and id(node) not in self.seen:
            self.found.append(DynamicImport(node.lineno, target, self._marked(node.lineno)))

    def visit_Assign(self, node: ast.Assign) -> None:
        dynamic, target = self.target_of(node.value)
        if dynamic and target is not None:
            for name in node.targets:
                if isinstance(name, ast.Name):
                    self.bound[name.id] = target
        self.generic_visit(node)

    def generic_visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.Call):
            self.found += [DynamicImport(node.lineno, t, False) for t in self.fromlist(node)]
        if isinstance(node, ast.Call) and _qualified(
            node.func, self.aliases
        ) in _IMPORTERS | _CODE_RUNNERS | set(_LOOKUPS):
            # The importer of a call is judged with the call (its argument decides).
            self.seen.add(id(node.func))
        # The outermost expression of a chain is recorded (import_module("time").time names
        # time.time); the pieces inside it are marked seen so they are not counted again.
        if isinstance(node, ast.expr) and id(node) not in self.seen:
            dynamic, _ = self.target_of(node)
            if dynamic and not (isinstance(node, ast.Name) and node.id in self.bound):
                self._record(node)
                for inner in ast.walk(node):
                    self.seen.add(id(inner))
        super().generic_visit(node)


def dynamic_imports(
    source: str,
    filename: str,
    tree: ast.Module | None = None,
    *,
    module: str | None = None,
    is_package: bool = False,
) -> list[DynamicImport]:
    """Every dynamic import in `source` (parsed as `tree` if given), with the dotted name it
    reaches when it is literal. Given the dotted `module` the source is (and whether it is a
    package's `__init__`), relative names (`import_module("..cli", __package__)`,
    `__import__("cli", globals(), level=2)`) and module-level names bound once to a constant
    string resolve; without it they count as computed.

    Raises:
        SyntaxError: the source does not parse.
    """
    if tree is None:
        tree = ast.parse(source, filename=filename)
    finder = _Finder(source.splitlines(), module, is_package)
    if module is not None:
        # Names bound once to a constant string fold only where the caller says which module
        # the source is (the layer gate); the determinism gate counts them as computed.
        finder.constants = _constants(tree)
    # Aliases first, so a call before its import in the file still resolves.
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            finder.visit_Import(node)
        elif isinstance(node, ast.ImportFrom):
            finder.visit_ImportFrom(node)
    finder.visit(tree)
    # A name bound to a dynamic import counts where it is used with an attribute.
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in finder.bound
            and id(node) not in finder.seen
        ):
            base = finder.bound[node.value.id]
            finder.found.append(
                DynamicImport(node.lineno, f"{base}.{node.attr}", finder._marked(node.lineno))
            )
    return sorted(finder.found, key=lambda d: (d.line, d.target or ""))
