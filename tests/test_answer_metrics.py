"""Answer metrics against hand-computed cases: SQuAD normalisation, EM, token F1, ROUGE-L,
METEOR (same numbers as NLTK's own function, WordNet read from disk or labelled as missing),
and BERTScore with the packaged MiniLM."""

from __future__ import annotations

import math

import pytest
from nltk.translate.meteor_score import meteor_score, single_meteor_score

from litrag.eval import answer_metrics as am
from litrag.eval.answer_metrics import (
    AnswerScorer,
    Meteor,
    WordNetSource,
    exact_match,
    lexnames_text,
    load_bertscore,
    load_wordnet,
    meteor_tokens,
    normalize_answer,
    rouge_l,
    token_f1,
)


# --------------------------------------------------------------------------- EM and F1
def test_squad_normalisation() -> None:
    assert normalize_answer("The  Call of the Wild!") == "call of wild"
    # typographic quotes and dashes are punctuation too (SQuAD's ASCII list misses them)
    assert normalize_answer("‘An’ apple — “a” pear…") == "apple pear"
    assert normalize_answer("Buck's") == normalize_answer("Buck’s") == "bucks"
    assert normalize_answer("theatre anathema") == "theatre anathema"  # articles as words only


def test_exact_match_best_of_references() -> None:
    assert exact_match("the Sled dog.", ["a sled dog"]) == 1.0
    assert exact_match("Buck", ["Spitz", "buck!"]) == 1.0
    assert exact_match("Buck the dog", ["Buck"]) == 0.0
    with pytest.raises(ValueError):
        exact_match("x", [])


def test_token_f1_hand_computed() -> None:
    # pred tokens: john thornton saved buck (4); ref: thornton saved him (3); common 2
    # P = 2/4, R = 2/3, F1 = 2PR/(P+R) = 4/7
    assert token_f1("John Thornton saved Buck.", "Thornton saved him") == pytest.approx(4 / 7)
    # multiset overlap: "dog dog cat" vs "dog cat cat": common = min counts = 1 + 1 = 2 -> 2/3
    assert token_f1("dog dog cat", "dog cat cat") == pytest.approx(2 / 3)
    # best over references; no overlap is 0; empty vs empty is 1 (SQuAD's no-answer rule)
    assert token_f1("Dave", ["Sol-leks", "Dave"]) == 1.0
    assert token_f1("Spitz", "Buck") == 0.0
    assert token_f1("The.", "a") == 1.0  # both normalise to nothing


# --------------------------------------------------------------------------- ROUGE-L
def test_rouge_l_known_pair() -> None:
    # tokens (lower-cased, stemmed): ref "the cat sat on the mat" (6),
    # pred "the cat lay on the mat today" (7); LCS = the cat on the mat = 5
    # P = 5/7, R = 5/6, F = 2PR/(P+R) = 10/13
    assert rouge_l("The cat lay on the mat today", "the cat sat on the mat") == pytest.approx(
        10 / 13
    )
    # stemming: "dogs" ~ "dog"; best of two references
    assert rouge_l("dogs", ["cats", "dog"]) == pytest.approx(1.0)
    assert rouge_l("nothing shared", "Buck") == 0.0


# --------------------------------------------------------------------------- METEOR
@pytest.fixture(scope="module")
def wordnet() -> WordNetSource:
    source = load_wordnet()
    if source.reader is None:
        pytest.fail(f"WordNet missing ({source.description}): run scripts/setup.sh")
    return source


def test_wordnet_from_disk(wordnet: WordNetSource) -> None:
    wn = wordnet.reader
    assert "WordNet" in wordnet.description
    assert wn.get_version() == "3.0"
    assert "hound" in {lemma.name() for s in wn.synsets("dog") for lemma in s.lemmas()}
    assert wn.synsets("dog")[0].lexname() == "noun.animal"  # needs the supplied lexnames
    assert lexnames_text().splitlines()[5] == "05\tnoun.animal\t1"
    assert len(lexnames_text().splitlines()) == 45


def test_meteor_matches_nltk_and_its_docstring(wordnet: WordNetSource) -> None:
    # NLTK's own doctest pair: 0.6944 with WordNet 3.0
    hyp = (
        "It is a guide to action which ensures that the military always obeys the commands of "
        "the party"
    )
    ref = "It is a guide to action that ensures that the military will forever heed Party commands"
    meteor = Meteor(wordnet)
    assert meteor(hyp, ref) == pytest.approx(0.6944, abs=5e-5)
    assert meteor(hyp, ref) == single_meteor_score(ref.split(), hyp.split(), wordnet=wordnet.reader)
    # a literary pair, through our tokenizer, equals NLTK called directly on the same tokens
    pred = "Manuel, the gardener's helper, sold Buck."
    refs = ["Buck was sold by Manuel.", "The gardener's helper Manuel stole Buck"]
    expected = meteor_score(
        [meteor_tokens(r) for r in refs], meteor_tokens(pred), wordnet=wordnet.reader
    )
    assert meteor(pred, refs) == pytest.approx(expected)
    assert meteor_tokens("Buck’s team, ready.") == ["Buck’s", "team", ",", "ready", "."]


def test_meteor_synonyms_need_wordnet(wordnet: WordNetSource) -> None:
    # "dog" ~ "hound" only through WordNet. With it: 3 of 3 words match in 1 chunk, P = R = 1,
    # penalty 0.5 * (1/3)^3 -> 1 - 1/54. Without: 2 matches in 2 chunks, P = R = 2/3,
    # Fmean = PR / (0.9 P + 0.1 R) = 2/3, penalty 0.5 * (2/2)^3 -> 1/3.
    with_wn = Meteor(wordnet)
    without = Meteor(WordNetSource(None, "WordNet not found (test)"))
    assert with_wn("the dog barked", "the hound barked") == pytest.approx(1 - 1 / 54)
    assert without("the dog barked", "the hound barked") == pytest.approx(1 / 3)
    assert without.label.startswith("METEOR (exact + stem only: WordNet not found")
    assert with_wn.full and not without.full


def test_missing_wordnet_is_said_not_downloaded(monkeypatch, tmp_path) -> None:
    import nltk

    def no_download(*_a, **_k):
        raise AssertionError("METEOR must never download WordNet")

    monkeypatch.setattr(nltk, "download", no_download)
    monkeypatch.setenv("LITRAG_WORDNET", str(tmp_path))  # an empty folder
    am.load_wordnet.cache_clear()
    try:
        source = load_wordnet()
        assert source.reader is None and str(tmp_path) in source.description
        meteor = Meteor(source)
        assert "exact + stem only" in meteor.label
        # exact and stem matches still score: identical strings give the maximum METEOR
        assert meteor("Buck pulled the sled", "Buck pulled the sled") == pytest.approx(
            single_meteor_score(
                "buck pulled the sled".split(),
                "buck pulled the sled".split(),
                wordnet=am._NoSynonyms(),
            )
        )
    finally:
        am.load_wordnet.cache_clear()


# --------------------------------------------------------------------------- BERTScore
def test_bertscore_skips_without_model(tmp_path) -> None:
    scorer, note = load_bertscore(None)
    assert scorer is None and note.startswith("skipped: no model given")
    scorer, note = load_bertscore(str(tmp_path / "nowhere"))
    assert scorer is None and "no local model" in note
    labels = AnswerScorer.create().labels()
    assert labels["bertscore"].startswith("skipped")


def test_bertscore_with_packaged_minilm() -> None:
    scorer, note = load_bertscore("minilm")
    assert scorer is not None, note
    assert "all-MiniLM-L6-v2" in scorer.label
    same, other = scorer(
        ["Buck was stolen by Manuel.", "Buck was stolen by Manuel."],
        [["Buck was stolen by Manuel."], ["The Queen played croquet with flamingos."]],
    )
    assert same == pytest.approx(1.0, abs=1e-4) and other < same
    assert not math.isnan(other)


def test_scorer_scores_all_four() -> None:
    scores = AnswerScorer.create().score("Sled dog", ["sled dog", "a sled dog"])
    assert set(scores) == {"em", "f1", "rouge_l", "meteor"}
    assert scores["em"] == scores["f1"] == scores["rouge_l"] == 1.0
    assert 0.9 < scores["meteor"] <= 1.0
