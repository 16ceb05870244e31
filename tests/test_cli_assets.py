"""``litrag ingest --assets``, ``litrag assets`` and ``litrag characters --profile`` through the
CLI's own entry, on a real book ingested offline (MiniLM, Edge, the character index), with the
assets' replies from a scripted OpenAI-compatible server (valid JSON read off each passage):
the rerun served from the reply cache, the local server started only on a cache miss, a failed
asset build that leaves the ingest standing, the spoiler limit of a profile in the CLI and in
the chat UI's Characters panel. Last, the same cache rerun with the real SmolLM2 server."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from scripted_llm import ScriptedServer
from test_answer import free_port
from test_library import short_book

from litrag.ingestion.library import Library
from litrag.models.llama_server import LlamaServer
from litrag.narrative.asset_store import AssetStore
from litrag.narrative.assets import load_extractions
from litrag.settings import Settings

WILD, ALICE = "pg215", "pg11"


def guide(messages: list[dict]) -> str:
    """A valid asset reply for the passage asked about: its known characters as entities,
    a fact about each and an event naming the chapter and the passage's first words, so what
    a profile shows can be traced to its chapter."""
    user = next(m for m in messages if m["role"] == "user")["content"]
    if isinstance(user, list):
        user = "".join(p.get("text", "") for p in user)
    head = user
    found = re.search(r"<passage[^>]*>(.*?)</passage>", user, re.S)  # book text as tagged data
    passage = found.group(1) if found else ""
    chapter = int(re.search(r"^Chapter (\d+)", head, re.M).group(1))
    known = re.search(r"^Known characters named here: (.*)$", head, re.M).group(1)
    known = re.sub(r"</?names>", "", known)  # book text arrives as tagged data
    names = [n.strip() for n in known.split(",") if n.strip() and n.strip() != "none"][:4]
    words = " ".join(passage.split()[:6])[:80]
    more = " ".join(passage.split()[:40])[:140]  # grounded, as a faithful reader's items are
    return json.dumps(
        {
            "entities": [
                {"name": n, "type": "person", "description": f"{n} (chapter {chapter}): {more}"}
                for n in names
            ],
            "relations": (
                [{"source": names[0], "relation": "is near", "target": names[1]}]
                if len(names) > 1
                else []
            ),
            "events": (
                [
                    {
                        "summary": f"In chapter {chapter}: {words} {more}"[:200],
                        "participants": names[:2],
                    }
                ]
                if names
                else []
            ),
            "facts": [
                {"entity": n, "fact": f"{n} is read in chapter {chapter}, at: {words} {more}"[:200]}
                for n in names
            ],
        }
    )


def cli(home: Path, *args: str) -> tuple[int, str, str]:
    """``litrag ARGS`` through ``main`` in this process: (exit status, stdout, stderr)."""
    from litrag.cli import main

    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LITRAG_HOME", str(home))
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def llm():
    server = ScriptedServer(guide)
    yield server
    server.close()


def scripted(llm: ScriptedServer) -> list[str]:
    return ["--llm-url", llm.api_base, "--model", "scripted"]


@pytest.fixture(scope="module")
def shelf(books_dir, tmp_path_factory) -> SimpleNamespace:
    folder = tmp_path_factory.mktemp("cli-assets")
    return SimpleNamespace(
        home=folder / "home",
        wild=short_book(
            books_dir / "pg215_call_of_the_wild.txt", folder / "wild.txt", "Chapter III."
        ),
        alice=short_book(
            books_dir / "pg11_alice_in_wonderland.txt", folder / "alice.txt", "CHAPTER II."
        ),
    )


@pytest.fixture(scope="module")
def ingested(shelf, llm) -> SimpleNamespace:
    """The Call of the Wild, chapters 1-2: ``litrag ingest --assets`` with the scripted LLM."""
    code, out, err = cli(shelf.home, "ingest", str(shelf.wild), "--assets", "-q", *scripted(llm))
    return SimpleNamespace(code=code, out=out, err=err, calls=len(llm.requests))


@pytest.fixture(scope="module")
def alice_without_assets(shelf, ingested) -> SimpleNamespace:
    """Alice, chapter 1, ingested with ``--assets`` while the LLM cannot be reached."""
    dead = ["--llm-url", f"http://127.0.0.1:{free_port()}/v1", "--model", "m"]
    code, out, err = cli(shelf.home, "ingest", str(shelf.alice), "--assets", "-q", *dead)
    strict = cli(shelf.home, "ingest", str(shelf.alice), "--assets", "--strict-assets", *dead)
    return SimpleNamespace(code=code, out=out, err=err, strict=strict)


def test_ingest_with_assets_builds_them_after_the_book(shelf, llm, ingested):
    assert ingested.code == 0, ingested.err
    assert "ingested 1, unchanged 0, failed 0" in ingested.out
    line = (
        r"^assets pg215: (\d+) blocks \((\d+) valid, 0 repaired, 0 failed\), (\d+) calls "
        r"\(0 cached\), (\d+) assets, [\d.]+s \(extraction [\d.]+s\)$"
    )
    m = re.search(line, ingested.out, re.M)
    assert m, ingested.out
    blocks, valid, calls, assets = map(int, m.groups())
    (record,) = Library.read_registry(shelf.home)
    assert blocks == valid == calls == record.nodes == ingested.calls  # one call per block
    assert "local LLM" not in ingested.err  # a server URL: nothing to start
    book = load_extractions(shelf.home, WILD)
    assert book is not None and len(book.blocks) == blocks
    assert book.llm.startswith("OpenAILike:scripted@")
    with AssetStore.open(shelf.home) as store:
        assert store.count(WILD) == assets > blocks
    first = llm.requests[0]
    assert first["response_format"]["type"] == "json_schema"  # structured output by URL


def test_assets_rerun_is_served_from_the_cache(shelf, llm, ingested):
    before = len(llm.requests)
    code, out, err = cli(shelf.home, "assets", WILD, "-q", *scripted(llm))
    assert code == 0, err
    report = json.loads(out)
    assert report["llm_calls"] == report["cached_calls"] == report["blocks"] > 0
    assert report["valid"] == report["blocks"] and report["assets"]["entity_profile"] > 0
    assert len(llm.requests) == before  # not one call reached the LLM


def test_ingest_again_skips_the_complete_assets(shelf, llm, ingested):
    before = len(llm.requests)
    code, out, err = cli(shelf.home, "ingest", str(shelf.wild), "--assets", "-q", *scripted(llm))
    assert code == 0, err
    assert "ingested 0, unchanged 1, failed 0" in out
    assert "assets pg215: complete, skipped" in out
    assert len(llm.requests) == before


def test_profile_keeps_to_the_spoiler_limit(shelf, ingested):
    code, out, err = cli(
        shelf.home, "characters", WILD, "--profile", "buck", "--upto-chapter", "1", "--json"
    )
    assert code == 0, err
    early = json.loads(out)
    assert early["chapter_index"] == 1 and early["source_chapters"] == [1]
    assert "Buck is read in chapter 1" in early["text"] and "chapter 2" not in early["text"]
    assert {b for _, b in early["line_sources"]} <= set(early["source_blocks"])
    code, out, err = cli(
        shelf.home, "characters", WILD, "--profile", "Buck", "--upto-chapter", "2", "--json"
    )
    later = json.loads(out)
    assert code == 0 and later["chapter_index"] == 2 and later["source_chapters"] == [1, 2]
    assert "Buck is read in chapter 2" in later["text"]
    # Spitz is met in chapter 2: a reader of chapter 1 gets no profile of him
    code, out, err = cli(
        shelf.home, "characters", WILD, "--profile", "spitz", "--upto-chapter", "1"
    )
    assert code == 2 and out == ""
    assert err == f"error: no profile of 'spitz' (spitz) up to chapter 1 in the assets of {WILD}\n"
    code, out, err = cli(
        shelf.home, "characters", WILD, "--profile", "spitz", "--upto-chapter", "2"
    )
    assert code == 0 and "Spitz is read in chapter 2" in out
    assert out.rstrip().endswith("of chapters 2)")


def test_the_local_llm_starts_only_on_a_cache_miss(shelf, llm, ingested, monkeypatch):
    """The packaged model's path, with llama.cpp's server stood in for by the scripted one."""
    starts: list[Path] = []

    def scripted_start(self: LlamaServer) -> LlamaServer:
        starts.append(self.model_path)
        self.port = llm.port
        return self

    monkeypatch.setattr(LlamaServer, "start", scripted_start)
    args = ["assets", WILD, "--local-llm", "smollm2", "--upto-chapter", "1", "-q"]
    before = len(llm.requests)
    code, out, err = cli(shelf.home, *args, "--max-blocks", "2")
    assert code == 0, err
    first = json.loads(out)
    assert len(starts) == 1 and "local LLM smollm2: started" in err
    assert first["cached_calls"] == 0 and len(llm.requests) - before == first["blocks"] > 0
    assert "schema" in llm.requests[-1]["response_format"]  # llama.cpp: the schema as grammar

    def no_start(self: LlamaServer) -> LlamaServer:
        raise AssertionError("the server was started")

    monkeypatch.setattr(LlamaServer, "start", no_start)
    code, out, err = cli(shelf.home, *args, "--max-blocks", "2")
    assert code == 0, err
    again = json.loads(out)
    assert again["cached_calls"] == again["llm_calls"] == first["blocks"]
    assert "local LLM smollm2: not started (every call came from the reply cache)" in err
    # one more block per chapter: the first miss starts the server, once
    monkeypatch.setattr(LlamaServer, "start", scripted_start)
    code, out, err = cli(shelf.home, *args, "--max-blocks", "3")
    assert code == 0, err
    more = json.loads(out)
    assert len(starts) == 2 and more["cached_calls"] == first["blocks"] < more["blocks"]


def test_a_failed_asset_build_leaves_the_ingest_standing(shelf, alice_without_assets):
    run = alice_without_assets
    assert run.code == 0, run.err
    assert "ingested 1, unchanged 0, failed 0" in run.out
    assert "error: assets of pg11 not built: LLMUnavailableError: cannot reach the LLM" in run.err
    assert "the books themselves are ingested" in run.err
    done = {r.book_id: r.status for r in Library.read_registry(shelf.home)}
    assert done == {WILD: "complete", ALICE: "complete"}
    code, out, err = run.strict  # asked to: a book without assets fails the command
    assert code == 1 and "unchanged 1" in out and "assets of pg11 not built" in err
    with AssetStore.open(shelf.home) as store:
        assert not store.has_book(ALICE) and store.has_book(WILD)


def test_the_characters_panel_shows_the_profile_as_of_the_slider(shelf, alice_without_assets):
    pytest.importorskip("gradio")
    from gradio_client import Client

    from litrag.app.chat import ChatApp, build_app, launch
    from litrag.app.service import ChatService

    service = ChatService(Settings(home=shelf.home))
    try:
        ui = ChatApp(service)
        met = [v for _, v in ui.character_choices([WILD], 1)]
        assert "pg215:buck" in met and "pg215:spitz" not in met  # Spitz comes in chapter 2
        assert "pg215:spitz" in [v for _, v in ui.character_choices([WILD], 2)]
        assert ui.profile_choices([WILD], 1, "pg215:spitz").value == met[0]
        early = ui.profile_markdown([WILD], 1, "pg215:buck")
        assert "Buck is read in chapter 1" in early and "chapter 2" not in early
        assert "**Sources**" in early
        cited = re.findall(r"\(ch\. (\d+)\) · sentences", early)
        assert cited and set(cited) == {"1"}  # every cited passage is of chapter 1
        bullets = [ln for ln in early.splitlines() if ln.startswith("- ")]
        assert bullets and all(re.search(r" \[\d+\]$", ln) for ln in bullets)  # each cites
        whole = ui.profile_markdown([WILD], 2, "pg215:buck")  # the right end: no limit
        assert "Buck is read in chapter 2" in whole and "(ch. 2) · sentences" in whole
        stale = ui.profile_markdown([WILD], 1, "pg215:spitz")
        assert "Spitz" not in stale and "Nobody" in stale
        plain = ui.profile_markdown([ALICE], 1, "pg11:alice")  # no LLM assets: the index
        assert "no LLM assets yet" in plain and "litrag assets pg11" in plain
        assert "mentions by chapter: ch. 1:" in plain and "**Alice**" in plain
        loaded = ui.refresh({})  # what the page load fills in: the first book, no limit
        assert len(loaded) == 7 and loaded[4].value == "pg215:buck"  # the most-named first
        assert loaded[5] == ui.profile_markdown([WILD], 2, "pg215:buck")
        demo = build_app(service)
        url = launch(demo, port=free_port())
        try:
            shown = Client(url, verbose=False).predict([WILD], 1, "pg215:buck", api_name="/profile")
        finally:
            demo.close()
        assert shown == early
    finally:
        service.close()


def test_the_chat_routes_to_the_assets_and_a_replaced_book_loses_them(
    shelf, ingested, alice_without_assets, tmp_path
):
    """The UI's answers route as `litrag ask` does, through the asset store the service holds
    (one embedded lock per process); dropping the book through the UI's library (what an upload
    of a changed file does first) takes its assets with it, through that same store."""
    from litrag.app.service import ChatService

    home = tmp_path / "home"
    shutil.copytree(shelf.home, home)
    service = ChatService(Settings(home=home))
    try:
        stream, _ = service.ask("Who is Buck?", [WILD], upto_chapter=1, use_llm=False)
        answer = stream.answer()
        assert answer.route and answer.route["tool"] == "character_profile", answer.route
        assert "Buck is read in chapter 1" in answer.text and "chapter 2" not in answer.text
        assert answer.sources and {s.chapter_index for s in answer.sources} == {1}
        plain, _ = service.ask("Who is Buck?", [WILD, ALICE], use_llm=False)  # two books
        assert plain.answer().route is None
        assets = service.asset_store()
        assert assets is not None and assets.count(WILD) > 0
        service.library()._drop_nodes(WILD)
        assert assets.count(WILD) == 0 and load_extractions(home, WILD) is None
    finally:
        service.close()


def test_litrag_ask_without_assets_answers_who_is_spitz_from_the_book(shelf, tmp_path):
    """`litrag ask` as a user runs it (a subprocess), on a library ingested without assets: the
    printed answer is sentences of the book naming Spitz, not the index's counts; a reader of
    chapter 1 is told nothing of him."""
    home = tmp_path / "home"
    code, _out, err = cli(home, "ingest", str(shelf.wild), "-q")
    assert code == 0, err
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITRAG_LLM")}
    env["LITRAG_HOME"] = str(home)

    def ask(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "litrag.cli", "ask", "Who is Spitz?", "--no-llm", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    r = ask()
    assert r.returncode == 0, r.stderr
    text = r.stdout.split("\nSources (")[0]
    print(r.stdout, r.stderr)
    assert "sentences naming Spitz" in text and re.search(r"\bSpitz\b.*\.", text)
    assert not re.search(r"\bmentioned\b|\d+ times", text, re.I)
    assert "route: character_passages(name='Spitz'" in r.stderr
    assert "passages steered by the character index" in r.stderr
    cited = re.findall(r"^\[\d+\] .*\(ch\. (\d+)\)", r.stdout, re.M)
    assert cited and all(int(c) >= 2 for c in cited)
    r = ask("--upto-chapter", "1")
    assert r.returncode == 0, r.stderr
    cited = re.findall(r"^\[\d+\] .*\(ch\. (\d+)\)", r.stdout, re.M)
    assert cited and all(int(c) <= 1 for c in cited)
    # The reply may echo the reader's own word ("never mentions “Spitz” up to chapter 1"), and
    # nothing else of him: no sentence, source or name from a later chapter.
    assert "never mentions “Spitz” up to chapter 1" in r.stdout
    assert not re.search(r"\bSpitz\b", r.stdout.replace("never mentions “Spitz”", ""))


@pytest.mark.llm
def test_a_real_local_llm_is_not_started_for_a_cached_rerun(shelf, ingested, tmp_path):
    """SmolLM2 behind llama.cpp's server, started by the CLI itself on the first miss."""
    home = tmp_path / "home"
    shutil.copytree(shelf.home, home)
    args = ["assets", WILD, "--local-llm", "smollm2", "--upto-chapter", "1", "--max-blocks", "1"]
    args += ["--max-retries", "0", "--max-tokens", "200", "-q"]
    code, out, err = cli(home, *args)
    assert code == 0, err
    first = json.loads(out)
    assert first["llm_calls"] == first["blocks"] > 0 and first["cached_calls"] == 0
    assert re.search(r"local LLM smollm2: started in \d+\.\d s", err), err
    assert first["completion_tokens"] > 0
    logs = sorted((home / "logs").glob("llama-server-*.log"))
    code, out, err = cli(home, *args)
    assert code == 0, err
    again = json.loads(out)
    assert again["cached_calls"] == again["llm_calls"] == first["llm_calls"]
    assert "not started (every call came from the reply cache)" in err
    assert sorted((home / "logs").glob("llama-server-*.log")) == logs  # no server was launched


# ----------------------------------------------------------- bad arguments (issue 34, bug 10)
@pytest.fixture(scope="module")
def plain(shelf, tmp_path_factory) -> Path:
    """The Call of the Wild, chapters 1-2, ingested offline without assets, in its own home."""
    home = tmp_path_factory.mktemp("plain") / "home"
    code, _out, err = cli(home, "ingest", str(shelf.wild), "-q")
    assert code == 0, err
    return home


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--chapters", "x"], "--chapters wants chapter numbers like 1-3,5, got 'x'"),
        (["--chapters", "1,two"], "--chapters wants chapter numbers like 1-3,5"),
        (["--chapters", "99"], "--chapters must name chapters of the book (1-2), got 99"),
        (["--chapters", "0"], "--chapters must name chapters of the book (1-2), got 0"),
        (["--chapters", "2-1"], "--chapters: the range 2-1 runs backwards"),
        (["--upto-chapter", "-2"], "--upto-chapter must be a chapter of the book (1-2), got -2"),
        (["--upto-chapter", "0"], "--upto-chapter must be a chapter of the book (1-2), got 0"),
        (["--chapters", "2", "--upto-chapter", "1"], "--chapters 2 lies past --upto-chapter 1"),
        (["--max-blocks", "-1"], "--max-blocks must be at least 1, got -1"),
        (["--max-blocks", "0"], "--max-blocks must be at least 1, got 0"),
    ],
)
def test_assets_refuses_a_bad_selection_in_one_line(plain, llm, flags, message):
    """Each was an unexpected failure (``x``) or an empty run that exited 0 and wrote an
    extractions file; now one line naming the flag, exit 2, nothing written, no LLM call."""
    before = len(llm.requests)
    code, out, err = cli(plain, "assets", WILD, *flags, "-q", *scripted(llm))
    lines = err.splitlines()
    assert (code, out, len(lines)) == (2, "", 1) and lines[0].startswith(f"error: {message}"), err
    assert load_extractions(plain, WILD) is None and len(llm.requests) == before


def test_a_profile_of_a_book_without_assets_says_no_assets(plain):
    """The assets collection may exist (another book's, or an emptied one) while this book has
    none: that is "no assets", not "no profile of buck"."""
    expected = f"error: {WILD} has no narrative assets: build them with litrag assets {WILD}\n"
    code, out, err = cli(plain, "characters", WILD, "--profile", "buck")
    assert (code, out, err) == (2, "", expected)
    AssetStore.open(plain, "litrag").close()  # the collection now exists, without this book
    code, out, err = cli(plain, "characters", WILD, "--profile", "buck")
    assert (code, out, err) == (2, "", expected)
