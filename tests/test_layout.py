"""The package's stages, read from the source: a lower stage never imports a higher one, no
command imports another command, no module imports in a circle, and every subpackage says
what it holds."""
import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "mpibench"

# Lowest first. errors and the package's __init__ (its __version__) may be imported by all.
STAGES = ("launch", "measure", "results", "diagnose", "analysis", "commands", "cli")
TOP = {"errors": -1, "__init__": -1, "cli": STAGES.index("cli"), "__main__": STAGES.index("cli"),
       "resultsfile": STAGES.index("cli")}     # resultsfile: the documented alias of results.document


def module_name(path, package=PACKAGE):
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path, package=PACKAGE):
    """Every mpibench module the file imports (absolute names), with its line number."""
    name = module_name(path, package)
    here = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")[:len(here.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            yield target, node.lineno
            for alias in node.names:       # from pkg import module
                yield f"{target}.{alias.name}", node.lineno


def stage(name):
    """The stage index of an mpibench module name (None: not an mpibench module)."""
    parts = name.split(".")
    if parts[0] != "mpibench":
        return None
    if len(parts) == 1:
        return -1
    if parts[1:3] == ["commands", "common"]:
        return STAGES.index("commands") - 0.5     # below every command
    if parts[1] in STAGES:
        return STAGES.index(parts[1])
    return TOP.get(parts[1])


def command_of(name):
    """The command a module belongs to (None: not a command module; commands.common is shared)."""
    parts = name.split(".")
    if len(parts) >= 3 and parts[:2] == ["mpibench", "commands"] and parts[2] != "common":
        return parts[2]
    return None


def problems(package=PACKAGE):
    found = []
    for path in sorted(package.rglob("*.py")):
        me = module_name(path, package)
        mine = stage(me)
        if mine is None:
            found.append(f"{me}: in no stage (add it to a stage subpackage)")
            continue
        for target, line in imported(path, package):
            theirs = stage(target)
            if theirs is not None and theirs > mine:
                found.append(f"{me}:{line} imports {target}, a higher stage")
            if command_of(target) and command_of(target) != command_of(me) and \
                    me.startswith("mpibench.commands."):
                found.append(f"{me}:{line} imports the command {target}")
    return found


def test_no_stage_imports_a_higher_one_and_no_command_imports_another():
    assert problems() == []


def test_every_subpackage_says_what_it_holds_and_may_import():
    for init in sorted(PACKAGE.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc, f"{init.relative_to(PACKAGE.parent)} has no docstring"
        if init.parent.name in STAGES or init.parent.name == "common":
            assert "import" in doc, f"{init.relative_to(PACKAGE.parent)} does not say what it may import"


def listed_modules(init):
    """The modules and subpackages of init's package that its docstring names."""
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    names = {p.stem for p in init.parent.glob("*.py")} - {"__init__"}
    names |= {p.parent.name for p in init.parent.glob("*/__init__.py")}
    return sorted(n for n in names if re.search(rf"\b{re.escape(n)}\b", doc))


def test_no_package_docstring_lists_its_modules():
    # A list of modules in a docstring drifts from the files; the names say what each holds.
    for init in sorted(PACKAGE.rglob("__init__.py")):
        assert len(listed_modules(init)) <= 1, (init.relative_to(PACKAGE.parent), listed_modules(init))


def test_the_check_finds_a_listed_module(tmp_path):
    (tmp_path / "pkg").mkdir()
    for name in ("engine", "sizes"):
        (tmp_path / "pkg" / f"{name}.py").write_text("")
    init = tmp_path / "pkg" / "__init__.py"
    init.write_text('"""engine runs the sweep; sizes are its units."""\n')
    assert listed_modules(init) == ["engine", "sizes"]


def circles(package=PACKAGE):
    """The modules that import each other in a circle (import by import), one list a circle."""
    files = {module_name(p, package): p for p in package.rglob("*.py") if p.name != "__init__.py"}
    edges = {m: {t for t, _ in imported(p, package) if t in files and t != m} for m, p in files.items()}
    found, done = [], set()

    def walk(m, path):
        if m in path:
            found.append(path[path.index(m):])
        elif m not in done:
            for t in sorted(edges[m]):
                walk(t, path + [m])
            done.add(m)
    for m in sorted(files):
        walk(m, [])
    return found


def test_no_module_imports_in_a_circle(tmp_path):
    assert circles() == []
    copy = tmp_path / "mpibench"
    for path in PACKAGE.rglob("*.py"):
        target = copy / path.relative_to(PACKAGE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text())
    (copy / "results" / "document.py").write_text((copy / "results" / "document.py").read_text()
                                                  + "\nfrom . import reader\n")
    assert ["mpibench.results.document", "mpibench.results.reader"] in circles(copy)


@pytest.mark.parametrize("where, line, expected", [
    ("measure/engine.py", "from ..results import tables", "imports mpibench.results"),
    ("launch/faults.py", "from ..measure.sizes import parse_size", "imports mpibench.measure.sizes"),
    ("commands/run.py", "from .p2p import link_check", "imports the command mpibench.commands.p2p"),
    ("commands/common/classic.py", "from .. import run", "imports the command mpibench.commands.run"),
    ("results/tables.py", "import mpibench.analysis.scaling", "imports mpibench.analysis.scaling"),
])
def test_the_check_finds_a_bad_import(tmp_path, where, line, expected):
    copy = tmp_path / "mpibench"
    for path in PACKAGE.rglob("*.py"):
        target = copy / path.relative_to(PACKAGE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text())
    bad = copy / where
    bad.write_text(bad.read_text() + f"\n{line}\n")
    assert any(expected in p for p in problems(copy)), problems(copy)
