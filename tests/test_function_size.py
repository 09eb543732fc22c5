"""Function size and signatures across dpopt/: no function over 60 lines, none with more than 8 positional
parameters, and in the release layers (records, the privacy models, the hierarchy library,
estimation, the writers, the release front door and the command line) no public function with more
than 12 parameters in all; every parameter and result annotated (a sibling of tests/test_layers.py;
:mod:`ast` only, nothing imported).

Lines count from ``def`` to the last line of the body (decorators excluded, docstring included);
parameters count every positional, keyword-only, ``*args`` and ``**kwargs`` one, without ``self``
or ``cls``; positional ones are the positional-only and ordinary ones. Private functions (leading
underscore) may take more keyword-only parameters, not more lines or positional ones.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "dpopt"
#: the release layers, top-level parts of dpopt (privacy holds the user model's library, and hierarchy is
#: included: choose_bounds and measure_levels take typed option objects, BoundsRule and LevelPlan/LevelNoise)
RELEASE_LAYERS = ("records", "privacy", "hierarchy", "estimation", "writers", "release", "cli")
FRONT_MODULES = ("__main__.py",)
MAX_LINES = 60
MAX_PARAMETERS = 12
MAX_POSITIONAL = 8


def _files() -> list[Path]:
    out = [p for part in RELEASE_LAYERS for p in sorted((ROOT / part).rglob("*.py"))]
    return out + [ROOT / name for name in FRONT_MODULES if (ROOT / name).exists()]


def _all_files() -> list[Path]:
    return sorted(ROOT.rglob("*.py"))


def _positional(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    names = [x.arg for x in fn.args.posonlyargs + fn.args.args]
    return len(names) - (bool(names) and names[0] in ("self", "cls"))


def _parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return len(names) + (a.vararg is not None) + (a.kwarg is not None)


def oversized(files: list[Path], root: Path = ROOT, *, all_parameters: bool = True) -> list[str]:
    """``path:function lines/params`` of every function breaking the rules (with ``all_parameters``
    also the release layers' limit on a public function's parameters in all)."""
    bad = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            lines = node.end_lineno - node.lineno + 1
            params, positional = _parameters(node), _positional(node)
            wide = all_parameters and params > MAX_PARAMETERS and not node.name.startswith("_")
            if lines > MAX_LINES or positional > MAX_POSITIONAL or wide:
                bad.append(f"{path.relative_to(root.parent)}:{node.name} {lines} lines, {params} parameters "
                           f"({positional} positional)")
    return bad


def test_release_layers_have_small_functions():
    assert len(_files()) > 20
    assert oversized(_files()) == []


def test_every_function_is_short_and_takes_few_positional_parameters():
    files = _all_files()
    assert len(files) > 150
    assert oversized(files, all_parameters=False) == []


def test_the_user_model_library_and_the_hierarchy_are_checked():
    names = {p.relative_to(ROOT).as_posix() for p in _files()}
    assert {"privacy/user/bounds.py", "privacy/user/levels.py", "privacy/user/mechanism.py", "privacy/user/engine.py",
            "privacy/user/strategies/fixed.py", "hierarchy/blup.py"} <= names


def test_the_check_finds_a_long_function_and_a_wide_one(tmp_path):
    long_body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    wide = ", ".join(f"a{i}" for i in range(MAX_PARAMETERS + 1))
    (tmp_path / "m.py").write_text(f"def long():\n{long_body}\n\n\ndef wide({wide}):\n    pass\n\n\n"
                                   f"def _private_wide({wide}):\n    pass\n\n\nclass C:\n"
                                   f"    def ok(self, {', '.join(f'b{i}' for i in range(MAX_PARAMETERS))}):\n"
                                   "        pass\n")
    found = oversized([tmp_path / "m.py"], root=tmp_path)
    assert [f.split(":")[1].split()[0] for f in found] == ["long", "wide", "_private_wide", "ok"]


def test_the_check_allows_keyword_only_parameters(tmp_path):
    many = ", ".join(f"a{i}" for i in range(MAX_POSITIONAL))
    (tmp_path / "m.py").write_text(f"def _ok({many}, *, b, c, d, e):\n    pass\n\n\n"
                                   f"def _nine({many}, extra):\n    pass\n\n\n"
                                   f"class C:\n    def ok(self, {many}):\n        pass\n")
    found = oversized([tmp_path / "m.py"], root=tmp_path, all_parameters=False)
    assert [f.split(":")[1].split()[0] for f in found] == ["_nine"]


def unannotated(files: list[Path], root: Path = ROOT) -> list[str]:
    """``path:function`` of every function with a parameter (other than self/cls) or a return
    without a type annotation."""
    bad = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                named = [x for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")]
                star = [x for x in (a.vararg, a.kwarg) if x is not None]
                if node.returns is None or any(x.annotation is None for x in named + star):
                    bad.append(f"{path.relative_to(root.parent)}:{node.name}")
    return bad


def test_every_function_has_typed_parameters_and_result(tmp_path):
    assert unannotated(_all_files()) == []
    (tmp_path / "m.py").write_text("def ok(a: int, *b: str, **c: float) -> None:\n    pass\n\n\n"
                                   "def bare(a):\n    pass\n\n\nclass C:\n    def m(self, x: int):\n        pass\n")
    assert [f.split(":")[1] for f in unannotated([tmp_path / "m.py"], root=tmp_path)] == ["bare", "m"]
