"""Settings read from the environment: defaults that follow the configured LLM, numbers that are
checked (and named, in one line, when the CLI meets a bad one), and the data directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from litrag.settings import (
    DEFAULT_READ_WORDS,
    Settings,
    SettingsError,
    home,
    read_words,
)


def test_home_follows_litrag_home(monkeypatch, tmp_path):
    monkeypatch.setenv("LITRAG_HOME", str(tmp_path))
    assert home() == tmp_path == Settings().home
    monkeypatch.delenv("LITRAG_HOME")
    assert home() == Path.home() / ".litrag"


def test_reading_defaults_follow_the_llm():
    # the local model reads the best blocks whole, within a word budget; a server all it is given
    assert read_words(Settings(llm_url=None)) == DEFAULT_READ_WORDS
    assert read_words(Settings(llm_url="http://gpu:8000/v1")) == 0
    assert read_words(Settings(llm_url="http://gpu:8000/v1", llm_backend="local")) > 0
    assert read_words(Settings(llm_url=None, read_words=0)) == 0


def test_the_local_model_goes_by_its_real_name(monkeypatch):
    """Qwen2.5-Coder-1.5B is called so; the older setting name still selects it."""
    assert Settings().local_llm == "qwen2.5-coder-1.5b"
    for alias in ("qwen2.5-1.5b", "qwen"):
        monkeypatch.setenv("LITRAG_LOCAL_LLM", alias)
        assert Settings().local_llm == "qwen2.5-coder-1.5b"
    monkeypatch.setenv("LITRAG_LOCAL_LLM", "smollm2")
    assert Settings().local_llm == "smollm2"
    monkeypatch.setenv("LITRAG_LOCAL_LLM", "qwen2.5-7b")
    with pytest.raises(SettingsError, match="LITRAG_LOCAL_LLM"):
        Settings()


def test_numbers_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("LITRAG_READ_WORDS", " 700 ")
    monkeypatch.setenv("LITRAG_LLM_TIMEOUT", "30.5")
    monkeypatch.setenv("LITRAG_LLM_CONTEXT", "")
    s = Settings()
    assert (s.read_words, s.llm_timeout, s.llm_context) == (700, 30.5, 4096)
    monkeypatch.setenv("LITRAG_READ_WORDS", "many")
    with pytest.raises(SettingsError, match="LITRAG_READ_WORDS must be a whole number"):
        Settings()
    # the CLI says which variable is wrong, in one line, instead of a traceback
    env = {**os.environ, "LITRAG_HOME": str(tmp_path), "LITRAG_LLM_CONTEXT": "4k"}
    env.pop("LITRAG_READ_WORDS")
    proc = subprocess.run(
        [sys.executable, "-m", "litrag.cli", "books"], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: LITRAG_LLM_CONTEXT must be a whole number, got '4k'"


def cli_line(monkeypatch, capsys, tmp_path: Path, *args: str, **env: str) -> tuple[int, str]:
    """A CLI command, in this process: its exit code and the whole of its stderr."""
    from litrag.cli import main

    for name in ("LITRAG_READ_WORDS", "LITRAG_LLM_TIMEOUT", "QDRANT_URL", "LITRAG_EMBED_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LITRAG_HOME", str(tmp_path / "home"))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code = main(list(args))
    return code, capsys.readouterr().err


# (command, environment, the one line it must end in) -- every one a traceback or silently
# accepted before the settings model
BAD_SETTINGS = [
    (
        ["books"],
        {"LITRAG_LLM_TIMEOUT": "-1"},
        "error: LITRAG_LLM_TIMEOUT must be greater than 0.0, got '-1'",
    ),
    (
        ["ask", "q", "--timeout", "-1"],
        {},
        "error: --timeout must be greater than 0.0, got '-1.0'",
    ),
    (
        ["ingest", "--max-mb", "-1", "x.txt"],
        {},
        "error: --max-mb must be greater than 0.0, got '-1.0'",
    ),
    (["ask", "q", "--top-k", "-3"], {}, "error: --top-k must be at least 1, got '-3'"),
    (
        ["books"],
        {"LITRAG_READ_WORDS": "-5"},
        "error: LITRAG_READ_WORDS must be at least 0, got '-5'",
    ),
    (
        ["books"],
        {"LITRAG_RETRIEVAL_ALPHA": "abc"},
        "error: LITRAG_RETRIEVAL_ALPHA must be a number, got 'abc'",
    ),
    (
        ["books"],
        {"LITRAG_RETRIEVAL_TOPK": "3"},
        "error: unknown setting LITRAG_RETRIEVAL_TOPK; did you mean LITRAG_RETRIEVAL_TOP_K?",
    ),
    # a typo was ignored silently (issue 33, bug 6), and inf/nan were taken as numbers
    (
        ["books"],
        {"LITRAG_LLM_TIMEOUTS": "5"},
        "error: unknown setting LITRAG_LLM_TIMEOUTS; did you mean LITRAG_LLM_TIMEOUT?",
    ),
    (["books"], {"LITRAG_ZZZ": "1"}, "error: unknown setting LITRAG_ZZZ"),
    (
        ["books"],
        {"LITRAG_LLM_TEMPERATURE": "inf"},
        "error: LITRAG_LLM_TEMPERATURE must be a finite number, got 'inf'",
    ),
    (
        ["books"],
        {"LITRAG_LLM_TIMEOUT": "nan"},
        "error: LITRAG_LLM_TIMEOUT must be a finite number, got 'nan'",
    ),
    (
        ["ask", "q", "--timeout", "inf"],
        {},
        "error: --timeout must be a finite number, got 'inf'",
    ),
    (
        ["ingest", "--max-mb", "inf", "x.txt"],
        {},
        "error: --max-mb must be a finite number, got 'inf'",
    ),
    (
        ["ingest", "x.txt"],
        {"LITRAG_EMBED_MODEL": "/nonexistent"},
        "error: LITRAG_EMBED_MODEL must be minilm, nomic (presets fast, quality) or a "
        "sentence-transformers folder, but /nonexistent does not exist",
    ),
    (
        ["books"],
        {"LITRAG_HOME": "/etc/hostname"},
        "error: LITRAG_HOME must be a folder, but it is a file, got '/etc/hostname'",
    ),
    # issue 33: raw exception text, pydantic's wording
    (
        ["ingest", "x.txt"],
        {"LITRAG_HOME": "/proc/nope"},
        "error: LITRAG_HOME must be a folder litrag can write, but /proc/nope lies in /proc (a "
        "kernel filesystem)",
    ),
    (
        ["books"],
        {"LITRAG_CHILDREN": "maybe"},
        "error: LITRAG_CHILDREN must be true or false (also 1/0, yes/no, on/off), got 'maybe'",
    ),
]


@pytest.mark.parametrize(("args", "env", "line"), BAD_SETTINGS, ids=lambda v: str(v)[:40])
def test_a_bad_setting_is_one_line_naming_it(monkeypatch, capsys, tmp_path, args, env, line):
    code, err = cli_line(monkeypatch, capsys, tmp_path, *args, **env)
    assert "Traceback" not in err
    assert (code, err.strip().splitlines()[-1]) == (2, line), err


def test_a_mistyped_variable_stops_ask_with_exit_2(tmp_path):
    """The acceptance line: ``LITRAG_LLM_TIMEOUTS=5 litrag ask ...`` exits 2 before any model
    loads, with the suggestion as its one line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITRAG_")}
    env.update(LITRAG_HOME=str(tmp_path), LITRAG_LLM_TIMEOUTS="5")
    proc = subprocess.run(
        [sys.executable, "-m", "litrag.cli", "ask", "Who is Buck?"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (proc.returncode, proc.stderr.strip()) == (
        2,
        "error: unknown setting LITRAG_LLM_TIMEOUTS; did you mean LITRAG_LLM_TIMEOUT?",
    ), proc.stderr


def test_every_variable_litrag_reads_is_known():
    """The check must not refuse a variable litrag itself reads: every ``LITRAG_*`` name in the
    package and its scripts is in the known list."""
    import re

    from litrag.settings import check_environment, known_variables

    root = Path(__file__).resolve().parents[1]
    files = [*(root / "litrag").rglob("*.py"), *(root / "scripts").glob("*.sh")]
    names = set()
    for f in files:
        names |= set(re.findall(r"LITRAG_[A-Z0-9_]*[A-Z0-9]", f.read_text(encoding="utf-8")))
    missing = sorted(n for n in names if n not in known_variables())
    assert not missing
    check_environment({n: "1" for n in known_variables()})
    with pytest.raises(SettingsError, match="did you mean LITRAG_HOME"):
        check_environment({"LITRAG_HOM": "/tmp"})


def test_a_server_that_is_down_is_named_with_its_url(monkeypatch, capsys, tmp_path):
    book = tmp_path / "x.txt"  # a book that is there: a missing path is refused first
    book.write_text("Chapter I.\n\nA short book.\n", encoding="utf-8")
    code, err = cli_line(
        monkeypatch, capsys, tmp_path, "ingest", str(book), QDRANT_URL="http://127.0.0.1:9"
    )
    assert "Traceback" not in err and code == 2, err
    assert err.strip().splitlines()[-1] == (
        "error: QDRANT_URL: the Qdrant server at http://127.0.0.1:9 is unreachable (connection "
        "refused): start it, or unset QDRANT_URL to use the embedded store"
    )


def test_a_folder_that_is_no_embedding_model_is_named(monkeypatch, capsys, tmp_path):
    (tmp_path / "empty").mkdir()
    book = tmp_path / "x.txt"  # a book that is there: a missing path is refused first
    book.write_text("Chapter I.\n\nA short book.\n", encoding="utf-8")
    code, err = cli_line(
        monkeypatch,
        capsys,
        tmp_path,
        "ingest",
        str(book),
        LITRAG_EMBED_MODEL=str(tmp_path / "empty"),
    )
    assert "Traceback" not in err and code == 2, err
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith(
            f"error: LITRAG_EMBED_MODEL must be minilm, nomic or a sentence-transformers folder; "
            f"{tmp_path / 'empty'} does not load"
        )
    )


def test_ingest_of_a_device_is_not_no_such_file(monkeypatch, capsys, tmp_path):
    code, err = cli_line(monkeypatch, capsys, tmp_path, "ingest", "-q", "/dev/null")
    assert code == 1 and "Traceback" not in err
    assert "error: /dev/null: is not a regular file (a device): not a book" in err
    assert "no such file" not in err


def test_flags_and_the_environment_go_through_one_model(monkeypatch):
    """Settings() reads each variable once, typed and in range; flags override them with their
    own names in the error."""
    from litrag.settings import RETRIEVAL_PRESETS, retrieval_overrides

    monkeypatch.setenv("LITRAG_RETRIEVAL_TOP_K", "7")
    monkeypatch.setenv("LITRAG_RETRIEVAL_MODE", "sparse")
    assert Settings().retrieval_overrides == {"top_k": 7, "mode": "sparse"}
    monkeypatch.setenv("LITRAG_RETRIEVAL_MODE", "fuzzy")
    with pytest.raises(SettingsError, match="LITRAG_RETRIEVAL_MODE must be one of"):
        retrieval_overrides()
    with pytest.raises(SettingsError, match=r"^--workers must be at least 1, got '0'$"):
        Settings(names_={"workers": "--workers"}, workers=0, retrieval_overrides={})
    from litrag.retrieval.retriever import PRESETS

    assert tuple(sorted(PRESETS)) == RETRIEVAL_PRESETS


# issue 50: a home of another user who does not exist was a RuntimeError from Path.expanduser,
# and a home of three spaces made a folder named so
@pytest.mark.parametrize(
    ("value", "line"),
    [
        (
            "~nosuchuser/lib",
            "error: LITRAG_HOME must be a folder, but ~nosuchuser names no user on this machine",
        ),
        ("   ", "error: LITRAG_HOME must be a folder, but '   ' is blank"),
    ],
)
def test_a_home_that_names_no_folder_is_one_line(monkeypatch, capsys, tmp_path, value, line):
    monkeypatch.chdir(tmp_path)
    code, err = cli_line(monkeypatch, capsys, tmp_path, "books", LITRAG_HOME=value)
    assert "Traceback" not in err
    assert (code, err.strip().splitlines()[-1].split(", got ")[0]) == (2, line), err
    assert list(tmp_path.iterdir()) == []  # no folder made


@pytest.mark.parametrize(("value", "on"), [("0", False), ("no", False), ("", False), ("on", True)])
def test_litrag_debug_reads_as_a_boolean(monkeypatch, value, on):
    """``LITRAG_DEBUG=0`` turned tracebacks on (any non-empty value did)."""
    from litrag.settings import debug

    monkeypatch.setenv("LITRAG_DEBUG", value)
    assert debug() is on
