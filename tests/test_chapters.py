"""Chapter detection on the six real books, their variants, and the heading styles they lack."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from litrag.ingestion.chapters import detect_units, split_chapters
from litrag.ingestion.gutenberg import Book, iter_book_files, load_book

ROMAN = ["I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X"]
ROMAN += ["XI", "XII", "XIII", "XIV", "XV", "XVI", "XVII", "XVIII", "XIX"]

# file, unit count, first title, last title, first words of the first unit's body
BOOKS = [
    (
        "pg11_alice_in_wonderland.txt",
        12,
        "CHAPTER I. Down the Rabbit-Hole",
        "CHAPTER XII. Alice’s Evidence",
        "Alice was beginning to get very tired",
    ),
    (
        "pg84_frankenstein.txt",
        28,
        "Letter 1",
        "Chapter 24",
        "_To Mrs. Saville, England._",
    ),
    (
        "pg158_emma.txt",
        55,
        "VOLUME I, CHAPTER I",
        "VOLUME III, CHAPTER XIX",
        "Emma Woodhouse, handsome, clever, and rich",
    ),
    (
        "pg215_call_of_the_wild.txt",
        7,
        "Chapter I. Into the Primitive",
        "Chapter VII. The Sounding of the Call",
        "“Old longings nomadic leap,",
    ),
    (
        "pg1342_pride_and_prejudice.txt",
        61,
        "Chapter 1",
        "Chapter 61",
        "It is a truth universally acknowledged",
    ),
    (
        "pg1661_adventures_of_sherlock_holmes.txt",
        12,
        "ADVENTURE I. A SCANDAL IN BOHEMIA",
        "XII. THE ADVENTURE OF THE COPPER BEECHES",
        "I.\n\nTo Sherlock Holmes she is always THE woman.",
    ),
]
SHERLOCK_TITLES = [
    "ADVENTURE I. A SCANDAL IN BOHEMIA",
    "ADVENTURE II. THE RED-HEADED LEAGUE",
    "ADVENTURE III. A CASE OF IDENTITY",
    "ADVENTURE IV. THE BOSCOMBE VALLEY MYSTERY",
    "ADVENTURE V. THE FIVE ORANGE PIPS",
    "ADVENTURE VI. THE MAN WITH THE TWISTED LIP",
    "VII. THE ADVENTURE OF THE BLUE CARBUNCLE",
    "VIII. THE ADVENTURE OF THE SPECKLED BAND",
    "IX. THE ADVENTURE OF THE ENGINEER'S THUMB",
    "X. THE ADVENTURE OF THE NOBLE BACHELOR",
    "XI. THE ADVENTURE OF THE BERYL CORONET",
    "XII. THE ADVENTURE OF THE COPPER BEECHES",
]


@pytest.fixture(scope="module")
def chapters(books_dir: Path) -> dict[str, tuple[Book, list]]:
    """Every book and variant, loaded and split once."""
    return {
        p.name: (b := load_book(p), split_chapters(b))
        for p in iter_book_files(books_dir, recursive=True)
    }


@pytest.mark.parametrize(("name", "count", "first", "last", "body"), BOOKS)
def test_real_books_units(
    chapters: dict, name: str, count: int, first: str, last: str, body: str
) -> None:
    _, docs = chapters[name]
    titles = [d.metadata["chapter_title"] for d in docs]
    assert len(docs) == count
    assert (titles[0], titles[-1]) == (first, last)
    assert docs[0].text.startswith(body)
    assert len(set(titles)) == count


@pytest.mark.parametrize(
    "name",
    [b[0] for b in BOOKS] + ["alice30_1994_oldstyle_header.txt", "pg1661_sherlock_ascii.txt"],
)
def test_documents_are_exact_slices_with_metadata(chapters: dict, name: str) -> None:
    book, docs = chapters[name]
    assert [d.metadata["chapter_index"] for d in docs] == list(range(1, len(docs) + 1))
    previous_end = 0
    for doc in docs:
        meta = doc.metadata
        start, end = meta["chapter_start_char"], meta["chapter_end_char"]
        assert book.text[start:end] == doc.text != ""
        assert doc.text == doc.text.strip()
        assert start >= previous_end
        previous_end = end
        assert doc.id_ == f"{book.book_id}:ch{meta['chapter_index']:04d}"
        assert (meta["book_id"], meta["title"]) == (book.book_id, book.title)
        assert meta["author"] == (book.author or "Unknown")
        assert not doc.text.startswith(meta["chapter_title"].split(",")[-1].strip())
        assert "chapter_start_char" in doc.excluded_embed_metadata_keys
        assert "chapter_title" not in doc.excluded_llm_metadata_keys
    covered = sum(len(d.text) for d in docs)
    assert covered > 0.99 * len(book.text)  # only the title page, TOC and headings are left out


def test_frankenstein_letters_then_chapters_not_the_contents(chapters: dict) -> None:
    _, docs = chapters["pg84_frankenstein.txt"]
    titles = [d.metadata["chapter_title"] for d in docs]
    assert titles == [f"Letter {i}" for i in range(1, 5)] + [f"Chapter {i}" for i in range(1, 25)]
    assert "CONTENTS" not in "".join(d.text for d in docs)
    # "On my return, I found the following letter..." is the body, not a chapter subtitle.
    assert docs[10].text.startswith("On my return, I found the following letter from my father")


def test_emma_volumes_restart_chapter_numbers(chapters: dict) -> None:
    _, docs = chapters["pg158_emma.txt"]
    expected = [
        f"VOLUME {vol}, CHAPTER {ROMAN[i]}"
        for vol, n in (("I", 18), ("II", 18), ("III", 19))
        for i in range(n)
    ]
    assert [d.metadata["chapter_title"] for d in docs] == expected
    assert docs[-1].text.endswith("FINIS")


def test_pride_and_prejudice_and_call_of_the_wild(chapters: dict) -> None:
    _, docs = chapters["pg1342_pride_and_prejudice.txt"]
    assert [d.metadata["chapter_title"] for d in docs] == [f"Chapter {i}" for i in range(1, 62)]
    _, docs = chapters["pg215_call_of_the_wild.txt"]
    assert docs[4].metadata["chapter_title"] == "Chapter V. The Toil of Trace and Trail"
    assert "Contents" not in docs[0].text


def test_sherlock_stories_and_ascii_variant(chapters: dict) -> None:
    for name in ("pg1661_adventures_of_sherlock_holmes.txt", "pg1661_sherlock_ascii.txt"):
        _, docs = chapters[name]
        assert [d.metadata["chapter_title"] for d in docs] == SHERLOCK_TITLES
    # The numbered parts inside "A Scandal in Bohemia" stay inside it.
    first = chapters["pg1661_sherlock_ascii.txt"][1][0].text
    assert "\n\nII.\n\n" in first and "\n\nIII.\n\n" in first


def test_alice_variants_agree(chapters: dict) -> None:
    new = [d.metadata["chapter_title"] for d in chapters["pg11_alice_in_wonderland.txt"][1]]
    old_docs = chapters["alice30_1994_oldstyle_header.txt"][1]
    # The 1994 file puts the chapter title on its own line under "CHAPTER I".
    assert [d.metadata["chapter_title"] for d in old_docs] == [t.replace("’", "'") for t in new]
    assert old_docs[10].metadata["chapter_title"] == "CHAPTER XI. Who Stole the Tarts?"
    assert old_docs[0].text.startswith("Alice was beginning")
    assert old_docs[0].metadata["author"] == "Lewis Carroll"  # from its title page


def test_ids_are_deterministic(books_dir: Path) -> None:
    path = books_dir / "pg215_call_of_the_wild.txt"
    first, second = split_chapters(load_book(path)), split_chapters(load_book(path))
    assert [(d.id_, d.hash) for d in first] == [(d.id_, d.hash) for d in second]
    assert first[0].id_ == "pg215:ch0001"


def test_each_book_loads_and_splits_fast(books_dir: Path) -> None:
    for path in iter_book_files(books_dir, recursive=True):
        start = time.perf_counter()
        split_chapters(load_book(path))
        assert time.perf_counter() - start < 1.0, path.name


PROSE = (
    "It was a bright cold day in April, and the clocks were striking thirteen while the wind "
    "swept the streets, and everybody in the town went about their business as they always had "
    "done, without a thought for what the morning might yet bring to any of them."
)


def _book(text: str) -> Book:
    return Book(
        text=text,
        book_id="t1",
        title="Test Book",
        author=None,
        ebook_id=None,
        language=None,
        release_date=None,
        encoding="utf-8",
        source="t1.txt",
    )


def _titles(text: str) -> list[str | None]:
    return [u.title for u in detect_units(text)]


def test_no_headings_is_one_document() -> None:
    docs = split_chapters(_book(f"\n\n{PROSE}\n\n{PROSE}\n"))
    assert len(docs) == 1
    assert docs[0].text == f"{PROSE}\n\n{PROSE}"
    assert docs[0].metadata["chapter_title"] == "Test Book"
    assert (docs[0].id_, docs[0].metadata["chapter_index"]) == ("t1:ch0001", 1)


def test_number_words_and_staves() -> None:
    text = f"CHAPTER ONE\n\n{PROSE}\n\nChapter Twenty-One: The End\n\n{PROSE}\n\nCHAPTER THE LAST\n"
    assert _titles(text) == ["CHAPTER ONE", "Chapter Twenty-One: The End"]
    text = f"STAVE I: MARLEY'S GHOST\n\n{PROSE}\n\nSTAVE II.\n\n"
    text += f"The First of the Three Spirits\n\n{PROSE}"
    assert _titles(text) == ["STAVE I: MARLEY'S GHOST", "STAVE II. The First of the Three Spirits"]


def test_books_and_parts_prefix_their_chapters() -> None:
    text = (
        f"BOOK ONE\n\nCHAPTER I\n\n{PROSE}\n\nCHAPTER II\n\n{PROSE}\n\n"
        f"BOOK TWO\n\nPART 1\n\nCHAPTER I\n\n{PROSE}\n\nPART 2\n\nCHAPTER I\n\n{PROSE}"
    )
    assert _titles(text) == [
        "BOOK ONE, CHAPTER I",
        "BOOK ONE, CHAPTER II",
        "BOOK TWO, PART 1, CHAPTER I",
        "BOOK TWO, PART 2, CHAPTER I",
    ]
    # Parts with prose and no chapters inside are the units.
    assert _titles(f"PART I\n\n{PROSE}\n\nPART II\n\n{PROSE}") == ["PART I", "PART II"]


def test_contents_skipped_and_preface_kept_as_front_matter() -> None:
    toc = "CONTENTS\n\nPREFACE\n\nCHAPTER I. The Start\n\nCHAPTER II. The End\n\n"
    text = f"A NOVEL\n\n{toc}PREFACE\n\n{PROSE}\n\nCHAPTER I. The Start\n\n{PROSE}\n\n"
    text += f"CHAPTER II. The End\n\n{PROSE}"
    units = detect_units(text)
    assert [(u.index, u.title) for u in units] == [
        (1, "PREFACE"),
        (2, "CHAPTER I. The Start"),
        (3, "CHAPTER II. The End"),
    ]
    # Untitled prose before the first chapter is front matter, index 0 (id ...:ch0000).
    docs = split_chapters(_book(f"{PROSE}\n\nCHAPTER I\n\n{PROSE}"))
    assert [(d.id_, d.metadata["chapter_title"]) for d in docs] == [
        ("t1:ch0000", "Front matter"),
        ("t1:ch0001", "CHAPTER I"),
    ]
    # A title page and contents list alone are dropped.
    assert [
        u.index for u in detect_units(f"A NOVEL\n\nby Someone\n\n{toc}CHAPTER I\n\n{PROSE}")
    ] == [1]


def test_headings_must_stand_alone() -> None:
    text = (
        f"CHAPTER I\n\n{PROSE}\nChapter 2 of the report was read aloud.\n{PROSE}\n\n"
        f"Part one of the plan was done.\n\n{PROSE}\n\nCHAPTER II\n{PROSE}"
    )
    assert _titles(text) == ["CHAPTER I"]


def test_subtitle_line_only_when_it_looks_like_a_title() -> None:
    text = f"CHAPTER I\n\nIt rained and rained all night long\n\n{PROSE}\n\nCHAPTER II\n\n"
    text += f"A Mad Tea-Party\n\n{PROSE}"
    units = detect_units(text)
    assert [u.title for u in units] == ["CHAPTER I", "CHAPTER II. A Mad Tea-Party"]
    assert text[units[0].start :].startswith("It rained")
    assert text[units[1].start :].startswith("It was a bright cold day")


def test_bare_numerals_only_without_keyword_headings() -> None:
    text = f"I.\n\n{PROSE}\n\nII.\n\n{PROSE}\n\nIII\n\n{PROSE}"
    assert _titles(text) == ["I.", "II.", "III"]
    # Not a run that starts at one: page or section numbers, not chapters.
    assert _titles(f"4\n\n{PROSE}\n\n5\n\n{PROSE}") == [None]
    units = detect_units(f"CHAPTER I\n\n{text}")
    assert [u.title for u in units] == ["CHAPTER I"]


# issue 50, bug 12: the headings of the other languages of a Gutenberg library. Each is tried
# on the real chapters of The Call of the Wild, their English headings replaced, so that a
# book in French or German is cut into its chapters, not left one unit whose spoiler limit
# hides nothing.
FOREIGN_HEADINGS = [
    ("CHAPITRE PREMIER", "CHAPITRE II", "CHAPITRE III"),
    ("Chapitre I", "Chapitre II", "Chapitre III"),
    ("KAPITEL 1", "KAPITEL 2", "KAPITEL 3"),
    ("CAPÍTULO PRIMERO", "CAPÍTULO II", "CAPÍTULO III"),
    ("CAPITOLO I", "CAPITOLO II", "CAPITOLO III"),
    ("HOOFDSTUK I", "HOOFDSTUK II", "HOOFDSTUK III"),
    ("CAPÍTULO 1", "CAPÍTULO 2", "CAPÍTULO 3"),
]


@pytest.mark.parametrize("headings", FOREIGN_HEADINGS, ids=lambda h: h[1])
def test_headings_in_other_languages_are_chapters(books_dir: Path, headings) -> None:
    book = load_book(books_dir / "pg215_call_of_the_wild.txt")
    english = [u for u in detect_units(book.text) if u.index >= 1][:3]
    parts = [f"{h}\n\n{book.text[u.start : u.end]}" for h, u in zip(headings, english, strict=True)]
    text = "\n\n\n".join(parts) + "\n"
    units = detect_units(text)
    assert [u.title for u in units] == list(headings)
    for unit, source in zip(units, english, strict=True):
        assert text[unit.start : unit.end] == book.text[source.start : source.end]
