"""Answer metrics against reference answers: EM, token F1, ROUGE-L, METEOR, optional BERTScore.

EM and F1 use SQuAD's normalisation (lower case, punctuation and the articles a/an/the removed,
whitespace collapsed), extended to Unicode punctuation so that typographic quotes in a model's
answer do not count as words. ROUGE-L is Google's ``rouge-score`` (Porter stemming on), METEOR is
NLTK's ``meteor_score``, BERTScore is the ``bert-score`` package: published implementations, not
re-derivations. With several references, every metric takes the best one (as SQuAD and the LitSeg
paper do).

METEOR's synonym stage needs WordNet, and nothing here may download it. It is read from disk with
NLTK's own reader, from the first of: ``$LITRAG_WORDNET``; NLTK's data folders
(``corpora/wordnet``); Debian's ``wordnet-base`` dictionary (``/usr/share/wordnet``, which
``scripts/setup.sh`` installs). Debian's copy lacks the ``lexnames`` file (a fixed list of the 45
lexicographer file names) that NLTK's reader insists on, so it is supplied from here. Without
WordNet, METEOR runs with exact and stem matching only and its label says so.
"""

from __future__ import annotations

import io
import re
import string
import unicodedata
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

ROUGE_EXTRA = "pip install 'litrag[eval]'"

# ------------------------------------------------------------------------ SQuAD normalisation
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCT = set(string.punctuation)


def _is_punct(ch: str) -> bool:
    return ch in _ASCII_PUNCT or unicodedata.category(ch).startswith("P")


def normalize_answer(text: str) -> str:
    """SQuAD's answer normalisation, with Unicode punctuation (‘’“”—…) removed as well."""
    text = "".join(ch for ch in text.lower() if not _is_punct(ch))
    return " ".join(_ARTICLES.sub(" ", text).split())


def _refs(references: str | Sequence[str]) -> list[str]:
    refs = [references] if isinstance(references, str) else list(references)
    if not refs:
        raise ValueError("at least one reference answer is needed")
    return refs


def exact_match(prediction: str, references: str | Sequence[str]) -> float:
    """1.0 when the normalised prediction equals some normalised reference."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(r) for r in _refs(references)))


def _f1(pred_tokens: list[str], ref_tokens: list[str]) -> float:
    if not pred_tokens or not ref_tokens:
        return float(pred_tokens == ref_tokens)  # both empty: 1 (SQuAD's no-answer rule)
    common = sum((Counter(pred_tokens) & Counter(ref_tokens)).values())
    if common == 0:
        return 0.0
    p, r = common / len(pred_tokens), common / len(ref_tokens)
    return 2 * p * r / (p + r)


def token_f1(prediction: str, references: str | Sequence[str]) -> float:
    """SQuAD token F1 over normalised words (multiset overlap), best over the references."""
    pred = normalize_answer(prediction).split()
    return max(_f1(pred, normalize_answer(r).split()) for r in _refs(references))


# ------------------------------------------------------------------------ ROUGE-L
@lru_cache(maxsize=1)
def _rouge_scorer() -> Any:
    try:
        from rouge_score import rouge_scorer
    except ImportError as exc:
        raise ImportError(f"ROUGE-L needs the rouge-score package: {ROUGE_EXTRA}") from exc
    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def rouge_l(prediction: str, references: str | Sequence[str]) -> float:
    """ROUGE-L F-measure (``rouge-score``, Porter stemmer), best over the references."""
    scorer = _rouge_scorer()
    return max(scorer.score(r, prediction)["rougeL"].fmeasure for r in _refs(references))


# ------------------------------------------------------------------------ WordNet and METEOR
WORDNET_DIRS = ("/usr/share/wordnet", "/usr/local/share/wordnet", "/usr/share/wordnet/dict")
_WORDNET_FILES = ("index.noun", "data.noun", "index.verb", "data.verb", "index.adj", "data.adj")

# WordNet 3.0's lexicographer files in number order, with their syntactic category: the content
# of the ``lexnames`` file (lexnames(5WN)) that some packagings, Debian's among them, leave out.
_LEXNAMES = (
    "adj.all 3, adj.pert 3, adv.all 4, noun.Tops 1, noun.act 1, noun.animal 1, noun.artifact 1, "
    "noun.attribute 1, noun.body 1, noun.cognition 1, noun.communication 1, noun.event 1, "
    "noun.feeling 1, noun.food 1, noun.group 1, noun.location 1, noun.motive 1, noun.object 1, "
    "noun.person 1, noun.phenomenon 1, noun.plant 1, noun.possession 1, noun.process 1, "
    "noun.quantity 1, noun.relation 1, noun.shape 1, noun.state 1, noun.substance 1, "
    "noun.time 1, verb.body 2, verb.change 2, verb.cognition 2, verb.communication 2, "
    "verb.competition 2, verb.consumption 2, verb.contact 2, verb.creation 2, verb.emotion 2, "
    "verb.motion 2, verb.perception 2, verb.possession 2, verb.social 2, verb.stative 2, "
    "verb.weather 2, adj.ppl 3"
)


def lexnames_text() -> str:
    rows = [item.split() for item in _LEXNAMES.split(", ")]
    return "".join(f"{i:02d}\t{name}\t{cat}\n" for i, (name, cat) in enumerate(rows))


def _is_wordnet_dir(path: Path) -> bool:
    return all((path / f).is_file() for f in _WORDNET_FILES)


def find_wordnet_dir(candidates: Sequence[str | Path] = WORDNET_DIRS) -> Path | None:
    """The first WordNet dictionary folder among ``candidates`` (or their ``dict/``), or None."""
    for cand in candidates:
        for folder in (Path(cand).expanduser(), Path(cand).expanduser() / "dict"):
            if _is_wordnet_dir(folder):
                return folder
    return None


def _dict_reader(folder: Path) -> Any:
    """NLTK's ``WordNetCorpusReader`` over a plain WordNet dictionary folder."""
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class DictWordNetReader(WordNetCorpusReader):  # type: ignore[misc]
        """Supplies ``lexnames`` when the folder lacks it; the data is WordNet 3.0 itself, so
        there is no mapping to NLTK's own copy to build (which would look for that copy)."""

        def open(self, fileid: str) -> Any:
            if fileid == "lexnames" and not (folder / "lexnames").is_file():
                return io.StringIO(lexnames_text())
            return super().open(fileid)

        def map_wn(self, version: str = "wordnet") -> Any:
            return None if version == "wordnet" else super().map_wn(version)

    # NLTK only opens corpus files under its data path (its path sandbox): allow this folder.
    if str(folder) not in [str(p) for p in nltk.data.path]:
        nltk.data.path.append(str(folder))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "multilingual functions are not available"
        return DictWordNetReader(str(folder), None)


@dataclass(frozen=True)
class WordNetSource:
    """The WordNet METEOR uses (``reader`` None: exact and stem matching only) and where from."""

    reader: Any
    description: str


@lru_cache(maxsize=1)
def load_wordnet() -> WordNetSource:
    """WordNet from disk, never from the network; see the module docstring for the order."""
    from litrag.settings import wordnet_dir

    env = wordnet_dir()
    if env:
        folder = find_wordnet_dir([env])
        if folder is None:
            return WordNetSource(None, f"$LITRAG_WORDNET={env} holds no WordNet dictionary")
        return WordNetSource(_dict_reader(folder), f"WordNet from {folder}")
    try:
        import nltk

        nltk.data.find("corpora/wordnet")  # looks on disk only; raises LookupError if absent
        from nltk.corpus import wordnet

        wordnet.ensure_loaded()
        return WordNetSource(wordnet, "WordNet from NLTK's data folder")
    except (LookupError, OSError):
        pass
    folder = find_wordnet_dir()
    if folder is not None:
        return WordNetSource(_dict_reader(folder), f"WordNet from {folder}")
    return WordNetSource(
        None,
        "WordNet not found (apt-get install wordnet-base, or set LITRAG_WORDNET to a WordNet "
        "dict folder)",
    )


class _NoSynonyms:
    """Stands in for WordNet: no synsets, so METEOR's synonym stage matches nothing."""

    def synsets(self, *_args: Any, **_kwargs: Any) -> list[Any]:
        return []


_TOKEN = re.compile(r"\w+(?:['’]\w+)*|[^\w\s]")


def meteor_tokens(text: str) -> list[str]:
    """Words (with inner apostrophes) and punctuation marks, as NLTK's word tokenizer splits
    plain prose; METEOR lower-cases them itself."""
    return _TOKEN.findall(text)


@dataclass(frozen=True)
class Meteor:
    """NLTK's METEOR with a fixed WordNet (or none); ``label`` says which."""

    wordnet: WordNetSource

    @property
    def label(self) -> str:
        if self.wordnet.reader is None:
            return f"METEOR (exact + stem only: {self.wordnet.description})"
        return f"METEOR (NLTK; exact, stem, synonym; {self.wordnet.description})"

    @property
    def full(self) -> bool:
        return self.wordnet.reader is not None

    def __call__(self, prediction: str, references: str | Sequence[str]) -> float:
        from nltk.translate.meteor_score import meteor_score

        wn = self.wordnet.reader if self.wordnet.reader is not None else _NoSynonyms()
        refs = [meteor_tokens(r) for r in _refs(references)]
        return float(meteor_score(refs, meteor_tokens(prediction), wordnet=wn))


def meteor_scorer() -> Meteor:
    return Meteor(load_wordnet())


# ------------------------------------------------------------------------ BERTScore
@dataclass
class BertScore:
    """``bert_score.BERTScorer`` over a local model folder (F1, no baseline rescaling)."""

    scorer: Any
    label: str

    def __call__(
        self, predictions: Sequence[str], references: Sequence[Sequence[str]]
    ) -> list[float]:
        if not predictions:
            return []
        refs = [list(r) for r in references]
        _p, _r, f1 = self.scorer.score(list(predictions), refs, verbose=False)
        return [float(x) for x in f1]


def load_bertscore(model: str | None) -> tuple[BertScore | None, str]:
    """A BERTScore scorer for ``model`` (``minilm``: the packaged all-MiniLM-L6-v2; else a
    local Hugging Face model folder), or None and why it is skipped. Never downloads."""
    if not model:
        return None, "skipped: no model given (--bertscore minilm|PATH)"
    if model == "minilm":
        try:
            from litrag.models.embedders import minilm_path

            path = minilm_path()
        except Exception as exc:  # the embeddings extra is missing
            return None, f"skipped: the packaged MiniLM is not installed ({exc})"
    else:
        path = Path(model).expanduser()
    if not (path / "config.json").is_file():
        return None, f"skipped: no local model at {path} (a folder with config.json)"
    try:
        from bert_score import BERTScorer
        from transformers import AutoConfig
    except ImportError:
        return None, f"skipped: the bert-score package is not installed ({ROUGE_EXTRA})"
    layers = int(AutoConfig.from_pretrained(str(path)).num_hidden_layers)
    scorer = BERTScorer(model_type=str(path), num_layers=layers, idf=False, lang="en")
    name = "all-MiniLM-L6-v2" if model == "minilm" else path.name
    return BertScore(scorer, f"BERTScore F1 ({name}, layer {layers}, no rescaling)"), ""


# ------------------------------------------------------------------------ all together
METRICS = ("em", "f1", "rouge_l", "meteor")


@dataclass
class AnswerScorer:
    """The per-answer metrics with their labels; ``bertscore`` runs over a batch at the end."""

    meteor: Meteor
    rouge: Callable[[str, Sequence[str]], float] | None
    rouge_note: str = ""
    bertscore: BertScore | None = None
    bertscore_note: str = ""

    @classmethod
    def create(cls, bertscore_model: str | None = None) -> AnswerScorer:
        rouge: Callable[[str, Sequence[str]], float] | None = rouge_l
        note = ""
        try:
            _rouge_scorer()
        except ImportError as exc:
            rouge, note = None, f"skipped: {exc}"
        bs, bs_note = load_bertscore(bertscore_model)
        return cls(meteor_scorer(), rouge, note, bs, bs_note)

    def labels(self) -> dict[str, str]:
        """Metric key -> what was computed (or why it was skipped)."""
        out = {
            "em": "EM (SQuAD normalisation)",
            "f1": "token F1 (SQuAD normalisation)",
            "rouge_l": "ROUGE-L F (rouge-score, Porter stemmer)" if self.rouge else self.rouge_note,
            "meteor": self.meteor.label,
        }
        out["bertscore"] = self.bertscore.label if self.bertscore else self.bertscore_note
        return out

    def score(self, prediction: str, references: Sequence[str]) -> dict[str, float | None]:
        return {
            "em": exact_match(prediction, references),
            "f1": token_f1(prediction, references),
            "rouge_l": self.rouge(prediction, references) if self.rouge else None,
            "meteor": self.meteor(prediction, references),
        }
