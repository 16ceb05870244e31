"""LLM-as-a-judge: Answer Accuracy and Context Relevance, two prompts each.

These follow the LitSeg paper's Appendix E (RAGAS' NVIDIA metrics): Answer Accuracy asks two
differently worded prompts for a rating of 0, 2 or 4, the second with the roles of the answer and
the reference swapped; Context Relevance asks two prompts for 0, 1 or 2. Each rating is mapped to
[0, 1] and the two are averaged; when only one prompt yields a valid rating, that one counts;
when neither does, the question has no score (reported, not counted as 0). The prompts are this
project's own wording.

Small local models do not always reply with a bare number. A reply is read tolerantly
(``<think>`` blocks dropped; JSON ``{"rating": n}``; "Rating: n"; a single number from the allowed
set, or one that ends the reply); anything else is sent back to the model with a short repair
message naming the allowed values, up to ``max_retries`` times.

All four prompts share one system message and put the material (passages, question, answers)
before the instructions, so a server that reuses the longest common prompt prefix (llama.cpp
does) reads the passages once for both Context Relevance prompts.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from llama_index.core.base.llms.types import ChatMessage, MessageRole

from litrag.segment.quoting import DATA_RULE, neutralise, quoted

logger = logging.getLogger(__name__)

PROMPT_VERSION = "judge-v3"  # v3: answers, references, passages as quoted data

JUDGE_SYSTEM = (
    "You grade a question-answering system that answers questions about novels. Read what you "
    "are given, apply the scale exactly as stated, and reply with the rating number alone. "
    + DATA_RULE
)

# Answer Accuracy, prompt 1: the reference is the truth; rate the system's answer against it.
AA_DIRECT = (
    "Question: {question}\n\n"
    "Reference answer (known to be correct): <answer>{reference}</answer>\n\n"
    "Answer to grade: <answer>{answer}</answer>\n\n"
    "How well does the answer to grade agree with the reference answer?\n"
    "4 = it states the same facts as the reference (same people, events, places and numbers); "
    "wording may differ.\n"
    "2 = it agrees in part: something the reference says is missing, vague or slightly off.\n"
    "0 = it is wrong, contradicts the reference, says it does not know, or answers a different "
    "question.\n"
    "Reply with one number: 0, 2 or 4."
)
# Answer Accuracy, prompt 2: roles swapped; the system's answer is taken as right and the
# reference is checked against it (plain wording: small judges misread abstract framings).
AA_SWAPPED = (
    "Question: {question}\n\n"
    "First answer: <answer>{answer}</answer>\n\n"
    "Second answer: <answer>{reference}</answer>\n\n"
    "Take the first answer as correct. Does the second answer say the same thing?\n"
    "4 = yes: the same facts, in other words or the same.\n"
    "2 = partly: some facts match, others are missing or different.\n"
    "0 = no: it contradicts the first answer or answers something else.\n"
    "Reply with one number: 0, 2 or 4."
)
# Context Relevance, prompt 1: do the passages hold the answer?
CR_DIRECT = (
    "Passages from the book:\n{contexts}\n\n"
    "Question: {question}\n\n"
    "Do these passages contain what is needed to answer the question?\n"
    "2 = yes: the answer can be read from them.\n"
    "1 = partly: they concern the question, but the answer is incomplete or must be guessed.\n"
    "0 = no: they are not about what the question asks.\n"
    "Reply with one number: 0, 1 or 2."
)
# Context Relevance, prompt 2: a reader's view of the same passages.
CR_READER = (
    "Passages from the book:\n{contexts}\n\n"
    "Question: {question}\n\n"
    "A reader who has not read the book gets only these passages. Could they answer the question "
    "correctly from them?\n"
    "0 = no: the passages are about other matters.\n"
    "1 = only in part: related material is there, but key facts are missing.\n"
    "2 = fully: the passages give the answer.\n"
    "Reply with one number: 0, 1 or 2."
)

AA_SCALE = (0, 2, 4)
CR_SCALE = (0, 1, 2)
REPAIR = (
    "That reply did not give a rating I can read. Reply with exactly one of these numbers and "
    "nothing else: {allowed}."
)

_THINK = re.compile(r"<think>.*?(</think>|$)", re.S | re.I)
_LABELLED = re.compile(r"\b(?:rating|score|grade)\b\s*(?:is|of|=|:)?\s*\**\s*(\d+)", re.I)
_NUMBER = re.compile(r"(?<![\w.])(\d+)(?![\w]|\.\d)")
_LEADING = re.compile(r"[\s*#\[(\"']*(\d+)(?![\w]|\.\d)")
_OUT_OF = re.compile(r"(\d+)\s*(?:/|out of)\s*\d+", re.I)


def parse_rating(reply: str, allowed: Sequence[int]) -> int | None:
    """The rating in ``reply`` if it can be read unambiguously, else None.

    Order: JSON ``{"rating": n}``; a labelled number ("Rating: 4", "score = 2"); a number that
    opens the reply; the only allowed number in it; an allowed number that ends it. "2 out of 4"
    and "2/4" read as 2. A number outside ``allowed`` found by the first three rules is None.
    """
    text = _THINK.sub(" ", reply or "").strip()
    text = _OUT_OF.sub(r"\1", text)
    if not text:
        return None

    def check(n: int) -> int | None:
        return n if n in allowed else None

    for blob in re.findall(r"\{[^{}]*\}", text):
        try:
            data = json.loads(blob)
        except ValueError:
            continue
        if isinstance(data, dict):
            for key in ("rating", "score", "grade"):
                value = str(data.get(key, "")).strip()
                if value.isdigit():
                    return check(int(value))
    labelled = _LABELLED.findall(text)
    if labelled:
        return check(int(labelled[-1]))
    lead = _LEADING.match(text)
    if lead:
        return check(int(lead.group(1)))
    numbers = [int(x) for x in _NUMBER.findall(text)]
    in_scale = {n for n in numbers if n in allowed}
    if len(in_scale) == 1:
        return in_scale.pop()
    if numbers and numbers[-1] in allowed and text.rstrip(" .*!)\"'").endswith(str(numbers[-1])):
        return numbers[-1]
    return None


@dataclass
class Rating:
    """One prompt's verdict: the rating (None if never readable), every reply, any error."""

    prompt: str
    rating: int | None
    replies: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def attempts(self) -> int:
        return len(self.replies)


@dataclass
class JudgeResult:
    """A metric for one question: the score in [0, 1] (None: no valid rating) and its ratings."""

    metric: str
    score: float | None
    ratings: list[Rating]

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "score": self.score,
            "ratings": [asdict(r) for r in self.ratings],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JudgeResult:
        return cls(data["metric"], data["score"], [Rating(**r) for r in data["ratings"]])


class ChatLLM(Protocol):
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> Any: ...


class JudgeCache(Protocol):
    def get(self, kind: str, key: dict[str, Any]) -> dict[str, Any] | None: ...

    def put(self, kind: str, key: dict[str, Any], value: dict[str, Any]) -> None: ...


def format_references(references: Sequence[str]) -> str:
    """One reference as is; several (distinct) as alternatives, any of which is correct."""
    refs = list(dict.fromkeys(r.strip() for r in references if r.strip()))
    if len(refs) == 1:
        return refs[0]
    return "any of these is correct: " + " | ".join(refs)


def format_contexts(contexts: Sequence[str], max_chars: int) -> str:
    """Numbered passages, cut to ``max_chars`` in all (the later ones first lose their tail)."""
    per = max(max_chars // max(len(contexts), 1), 200)
    out = []
    for i, text in enumerate(contexts, start=1):
        body = " ".join(text.split())
        if len(body) > per:
            body = body[:per].rsplit(" ", 1)[0] + " [...]"
        out.append(quoted("passage", body, n=i))
    return "\n\n".join(out)


class Judge:
    """Rates answers and retrieved passages with an LLM; see the module docstring.

    ``identity`` names the judge model in caches and reports (e.g. ``"Qwen3-8B at http://..."``);
    ``context_chars`` bounds the passages in a Context Relevance prompt (the judge's window).
    """

    def __init__(
        self,
        llm: ChatLLM,
        identity: str,
        *,
        max_retries: int = 2,
        context_chars: int = 9000,
        cache: JudgeCache | None = None,
    ) -> None:
        self.llm = llm
        self.identity = identity
        self.max_retries = max_retries
        self.context_chars = context_chars
        self.cache = cache
        self.calls = 0
        self.cached = 0

    def rate(self, name: str, user: str, allowed: Sequence[int]) -> Rating:
        """Ask one prompt, repairing unreadable replies; LLM errors end it with ``error`` set."""
        messages = [
            ChatMessage(role=MessageRole.SYSTEM, content=JUDGE_SYSTEM),
            ChatMessage(role=MessageRole.USER, content=user),
        ]
        result = Rating(prompt=name, rating=None)
        allowed_text = ", ".join(str(a) for a in allowed)
        for _ in range(self.max_retries + 1):
            try:
                self.calls += 1
                reply = self.llm.chat(messages).message.content or ""
            except Exception as exc:  # network, timeout, HTTP: keep what we have
                result.error = (
                    f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                )
                logger.warning("judge call failed: %s", result.error)
                return result
            result.replies.append(reply)
            rating = parse_rating(reply, allowed)
            if rating is not None:
                result.rating = rating
                return result
            messages += [
                ChatMessage(role=MessageRole.ASSISTANT, content=reply),
                ChatMessage(role=MessageRole.USER, content=REPAIR.format(allowed=allowed_text)),
            ]
        return result

    def _metric(
        self, metric: str, prompts: dict[str, str], scale: Sequence[int], key: dict[str, Any]
    ) -> JudgeResult:
        cache_key = {"judge": self.identity, "version": PROMPT_VERSION, "metric": metric, **key}
        if self.cache is not None:
            hit = self.cache.get("judge", cache_key)
            if hit is not None:
                self.cached += 1
                return JudgeResult.from_json(hit)
        ratings = [self.rate(name, text, scale) for name, text in prompts.items()]
        valid = [r.rating / max(scale) for r in ratings if r.rating is not None]
        result = JudgeResult(metric, sum(valid) / len(valid) if valid else None, ratings)
        if self.cache is not None and not any(r.error for r in ratings):
            self.cache.put("judge", cache_key, result.to_json())
        return result

    def answer_accuracy(self, question: str, answer: str, references: Sequence[str]) -> JudgeResult:
        """Agreement of ``answer`` with the reference(s): ratings 0/2/4 -> [0, 1], two prompts."""
        ref = format_references(references)
        fields = {
            "question": question,
            "answer": neutralise(answer.strip()) or "(no answer)",
            "reference": neutralise(ref),
        }
        prompts = {
            "aa_direct": AA_DIRECT.format(**fields),
            "aa_swapped": AA_SWAPPED.format(**fields),
        }
        return self._metric("answer_accuracy", prompts, AA_SCALE, fields)

    def context_relevance(self, question: str, contexts: Sequence[str]) -> JudgeResult:
        """Relevance of the retrieved passages to the question: 0/1/2 -> [0, 1], two prompts."""
        if not contexts:
            return JudgeResult("context_relevance", 0.0, [])
        ctx = format_contexts(contexts, self.context_chars)
        fields = {"question": question, "contexts": ctx}
        prompts = {"cr_direct": CR_DIRECT.format(**fields), "cr_reader": CR_READER.format(**fields)}
        return self._metric("context_relevance", prompts, CR_SCALE, fields)


def build_judge(
    settings: Any,
    *,
    local: bool = False,
    url: str | None = None,
    model: str | None = None,
    answer_llm: Any = None,
    max_retries: int = 2,
    timeout: float | None = None,
) -> tuple[Judge | None, Any]:
    """The judge (None when none is asked for) and what to ``close()`` after the run.

    ``url`` (+ ``model``): any OpenAI-compatible server, through the configured backend's
    client (``LITRAG_LLM_BACKEND``: OpenAILike, or llama-index-llms-vllm). ``local``: the
    packaged llama.cpp model, sharing the answering LLM's server when that is the local one too
    (one model in memory).
    Ratings are short and deterministic: temperature 0, a few tokens, Qwen3 thinking off.
    """
    from litrag.answering.answer import CHARS_PER_TOKEN
    from litrag.builders import AnswerLLM, build_url_llm, local_server, thinking_off
    from litrag.models.served import describe, url_client
    from litrag.settings import llm_backend

    params: dict[str, Any] = {"max_tokens": 24, "temperature": 0.0}
    ctx = settings.llm_context
    if url:
        name = model or "local"
        backend = url_client(llm_backend(settings))  # a URL needs a client
        llm = build_url_llm(
            settings,
            url,
            name,
            backend=backend,
            context_window=ctx,
            timeout=timeout or 120.0,
            api_key=settings.llm_api_key,
            extra_body=thinking_off(name).get("extra_body"),
            **params,
        )
        closer, identity = None, describe(backend, name, url)
    elif local:
        server = getattr(answer_llm, "server", None)
        closer = None
        if server is None:
            server = local_server(settings, n_ctx=ctx)
            closer = AnswerLLM(None, "", server)
        llm = server.llm(timeout=timeout or 900.0, max_retries=0, **params)
        identity = f"{server.model_path.stem} (local llama.cpp)"
    else:
        return None, None
    chars = int((ctx - 700) * CHARS_PER_TOKEN)
    return Judge(llm, identity, max_retries=max_retries, context_chars=max(chars, 2000)), closer
