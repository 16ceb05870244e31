"""Asset grounding (``litrag.narrative.grounding``): statements checked against their own block,
on a real block of The Call of the Wild."""

from __future__ import annotations

from litrag.ingestion.chapters import split_chapters
from litrag.ingestion.gutenberg import load_book
from litrag.narrative.grounding import BlockText, ground_extraction
from litrag.narrative.schema import BlockExtraction, Entity, Event, Fact, Relation


def first_block(books_dir) -> str:
    chapter = split_chapters(load_book(books_dir / "pg215_call_of_the_wild.txt"))[0]
    text = chapter.text
    start = text.index("Buck did not read the newspapers")
    return text[start : text.index("And this was the manner of dog Buck was", start)]


def test_a_statement_of_the_block_passes_and_one_from_elsewhere_does_not(books_dir):
    block = BlockText(first_block(books_dir))
    assert (
        block.why_unsupported("Buck lived at Judge Miller's place in the Santa Clara Valley.")
        is None
    )
    assert block.why_unsupported("Buck ruled over the terriers at the place.", ["Buck"]) is None
    why = block.why_unsupported("Spitz fights Buck for the lead.", ["Spitz", "Buck"])
    assert why is not None and "Spitz" in why
    assert block.why_unsupported("One of Buck's friends is the Judge's son, Elmo.") is None
    why = block.why_unsupported("He is a wolf pack leader who runs with his brothers.")
    assert why is not None and "words are in its block" in why
    assert block.why_unsupported("The dog is sad.", ["Thornton"]) is not None  # a named entity


def test_ground_extraction_drops_and_counts(books_dir):
    x = BlockExtraction(
        entities=[
            Entity(
                name="Buck",
                type="animal",
                description="Buck is a dog who lived at Judge Miller's place.",
            ),
            Entity(
                name="Elmo",
                type="animal",
                description="Elmo leads a pack of wolves in the Yukon forever.",
            ),
            Entity(name="John Thornton", type="person", description="A miner."),
        ],
        facts=[
            Fact(entity="Buck", fact="Buck lived at Judge Miller's place."),
            Fact(entity="Buck", fact="Buck becomes the leader of a wolf pack."),
        ],
        events=[Event(summary="Spitz attacks Buck on the ice.", participants=["Spitz", "Buck"])],
        relations=[Relation(source="Elmo", relation="father of", target="Buck")],
    )
    kept, g = ground_extraction(x, first_block(books_dir))
    assert [f.fact for f in kept.facts] == ["Buck lived at Judge Miller's place."]
    assert kept.events == [] and len(kept.relations) == 1
    assert [e.name for e in kept.entities] == ["Buck", "Elmo"]
    assert kept.entities[0].description and kept.entities[1].description == ""
    assert g.kept == 3 and len(g.dropped) == 4
    assert any("John Thornton" in d for d in g.dropped)
