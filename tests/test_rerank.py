"""Qwen3Reranker on a tiny random Qwen3ForCausalLM with a byte-level BPE tokenizer built here.

No weights are downloaded: the tokenizer is trained in the test on a few lines, the model is
randomly initialised. The prompt layout is checked against a literal copy of the model card's
template, and the scores against P(yes) computed by hand from the model's own logits.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode  # noqa: E402

from litrag.retrieval.rerank import Qwen3Reranker  # noqa: E402

EXPECTED_PREFIX = (
    "<|im_start|>system\n"
    "Judge whether the Document meets the requirements based on the Query and the Instruct "
    'provided. Note that the answer can only be "yes" or "no".<|im_end|>\n'
    "<|im_start|>user\n"
)
EXPECTED_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
INSTRUCTION = (
    "Given a literary question, retrieve relevant literature text chunks that answer the question."
)
QUERY = "Who stole Buck from Judge Miller's place?"
DOCS = [
    "Manuel, one of the gardener's helpers, stole Buck and sold him to a stranger.",
    "Buck lived at a big house in the sun-kissed Santa Clara Valley.",
    "Spitz was the leader of the team; Buck fought him in the snow under the moon.",
    "John Thornton won sixteen hundred dollars on the wager when Buck broke out the sled.",
    "The yes and no of it: a dog.",
    "Buck",
]
CORPUS = [EXPECTED_PREFIX + EXPECTED_SUFFIX, INSTRUCTION, QUERY, *DOCS, "title: book chapter"] * 20


@pytest.fixture(scope="module")
def tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(CORPUS, trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
        extra_special_tokens=["<|im_start|>"],
        clean_up_tokenization_spaces=False,
    )
    tok.add_tokens(["<think>", "</think>"])  # plain added tokens, as in Qwen3's tokenizer
    for word in ("yes", "no"):
        assert tok.convert_tokens_to_ids(word) != tok.unk_token_id, word
    return tok


@pytest.fixture(scope="module")
def model(tokenizer):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=1024,
        tie_word_embeddings=False,
        initializer_range=0.3,  # spread the random yes/no logits so the ranking is not a tie
        pad_token_id=tokenizer.pad_token_id,
    )
    return Qwen3ForCausalLM(config).eval()


@pytest.fixture()
def reranker(model, tokenizer) -> Qwen3Reranker:
    return Qwen3Reranker.from_model(model, tokenizer, batch_size=4)


def p_yes_by_hand(model, tokenizer, ids: list[int]) -> float:
    with torch.no_grad():
        last = model(input_ids=torch.tensor([ids])).logits[0, -1]
    yes, no = tokenizer.convert_tokens_to_ids("yes"), tokenizer.convert_tokens_to_ids("no")
    return torch.softmax(torch.stack([last[yes], last[no]]), dim=0)[0].item()


def test_prompt_layout_is_the_model_cards(reranker, tokenizer):
    (ids,) = reranker.encode(QUERY, [DOCS[0]])
    expected = (
        EXPECTED_PREFIX
        + f"<Instruct>: {INSTRUCTION}\n<Query>: {QUERY}\n<Document>: {DOCS[0]}"
        + EXPECTED_SUFFIX
    )
    assert tokenizer.decode(ids, skip_special_tokens=False) == expected
    # prefix and suffix are tokenised on their own, as in the recipe
    prefix = tokenizer.encode(EXPECTED_PREFIX, add_special_tokens=False)
    suffix = tokenizer.encode(EXPECTED_SUFFIX, add_special_tokens=False)
    assert ids[: len(prefix)] == prefix
    assert ids[-len(suffix) :] == suffix
    assert reranker.instruction == INSTRUCTION
    assert reranker.top_n == 5


def test_truncation_cuts_the_document_never_the_suffix(model, tokenizer):
    prefix = tokenizer.encode(EXPECTED_PREFIX, add_special_tokens=False)
    suffix = tokenizer.encode(EXPECTED_SUFFIX, add_special_tokens=False)
    pair = f"<Instruct>: {INSTRUCTION}\n<Query>: {QUERY}\n<Document>: {DOCS[0]}"
    pair_len = len(tokenizer.encode(pair, add_special_tokens=False))
    keep = pair_len - 8
    rr = Qwen3Reranker.from_model(model, tokenizer, max_length=len(prefix) + len(suffix) + keep)
    (ids,) = rr.encode(QUERY, [DOCS[0]])
    assert len(ids) == rr.max_length
    text = tokenizer.decode(ids, skip_special_tokens=False)
    assert text.startswith(EXPECTED_PREFIX)
    assert text.endswith(EXPECTED_SUFFIX)
    middle = text[len(EXPECTED_PREFIX) : -len(EXPECTED_SUFFIX)]
    assert pair.startswith(middle) and len(middle) < len(pair)
    assert f"<Query>: {QUERY}\n<Document>: Manuel" in middle
    assert "stranger." not in middle
    # a short document in the same call is left whole
    short = rr.encode(QUERY, [DOCS[-1]])[0]
    assert tokenizer.decode(short, skip_special_tokens=False).endswith(
        f"<Document>: {DOCS[-1]}{EXPECTED_SUFFIX}"
    )
    # the truncated prompt is what gets scored
    assert rr.score(QUERY, [DOCS[0]])[0] == pytest.approx(
        p_yes_by_hand(model, tokenizer, ids), abs=1e-5
    )


def test_max_length_without_room_for_the_pair_is_refused(model, tokenizer):
    with pytest.raises(ValueError, match="no room"):
        Qwen3Reranker.from_model(model, tokenizer, max_length=10)


def test_batches_are_left_padded(reranker, model, tokenizer):
    seen: list[dict] = []

    def hook(_module, _args, kwargs):
        seen.append({k: v.clone() for k, v in kwargs.items() if torch.is_tensor(v)})

    handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        reranker.score(QUERY, DOCS[:4])
    finally:
        handle.remove()
    assert len(seen) == 1
    ids, mask = seen[0]["input_ids"], seen[0]["attention_mask"]
    prompts = reranker.encode(QUERY, DOCS[:4])
    lengths = sorted((len(p) for p in prompts), reverse=True)
    assert ids.shape == (4, lengths[0])
    assert mask.sum(1).tolist() == lengths  # longest first
    assert bool(mask[:, -1].all())  # every row ends on a real token
    for row in range(4):
        n = int(mask[row].sum())
        assert mask[row, : ids.shape[1] - n].sum() == 0
        assert (ids[row, : ids.shape[1] - n] == tokenizer.pad_token_id).all()
        assert ids[row, ids.shape[1] - n :].tolist() in prompts
    pos = seen[0]["position_ids"]
    assert pos[-1, -1].item() == lengths[-1] - 1  # the shortest row counts from its first token


def test_score_is_p_yes_from_the_last_logits(reranker, model, tokenizer):
    prompts = reranker.encode(QUERY, DOCS)
    by_hand = [p_yes_by_hand(model, tokenizer, ids) for ids in prompts]
    assert reranker.score(QUERY, DOCS) == pytest.approx(by_hand, abs=1e-5)
    assert all(0.0 < p < 1.0 for p in by_hand)
    assert max(by_hand) - min(by_hand) > 1e-3  # the random model does separate them


def test_batching_gives_one_by_one_scores(model, tokenizer):
    one = Qwen3Reranker.from_model(model, tokenizer, batch_size=1).score(QUERY, DOCS)
    for bs in (2, 3, len(DOCS)):
        many = Qwen3Reranker.from_model(model, tokenizer, batch_size=bs).score(QUERY, DOCS)
        assert many == pytest.approx(one, abs=1e-5)


def test_postprocess_orders_by_p_yes_and_keeps_top_n(model, tokenizer):
    rr = Qwen3Reranker.from_model(model, tokenizer, top_n=3)
    nodes = [
        NodeWithScore(
            node=TextNode(
                id_=f"n{i}",
                text=doc,
                metadata={"title": "book chapter"},
                excluded_llm_metadata_keys=[],
            ),
            score=1.0 - i / 10,
        )
        for i, doc in enumerate(DOCS)
    ]
    out = rr.postprocess_nodes(nodes, query_bundle=QueryBundle(QUERY))
    llm_docs = [n.node.get_content(metadata_mode=MetadataMode.LLM) for n in nodes]
    assert "title: book chapter" in llm_docs[0]  # the document is the LLM view of the node
    expected = rr.score(QUERY, llm_docs)
    best = sorted(range(len(DOCS)), key=lambda i: -expected[i])[:3]
    assert [n.node.node_id for n in out] == [f"n{i}" for i in best]
    assert [n.score for n in out] == pytest.approx([expected[i] for i in best], abs=1e-6)
    assert out[0].score >= out[1].score >= out[2].score
    # the inputs keep their retrieval scores; nothing written into metadata
    assert [n.score for n in nodes] == [1.0 - i / 10 for i in range(len(DOCS))]
    assert all(set(n.node.metadata) == {"title"} for n in nodes)
    # text-only documents give other scores
    plain = Qwen3Reranker.from_model(model, tokenizer, metadata_mode=MetadataMode.NONE)
    assert plain.score(QUERY, DOCS) != pytest.approx(expected, abs=1e-6)


def test_postprocess_edge_cases(reranker):
    assert reranker.postprocess_nodes([], query_bundle=QueryBundle(QUERY)) == []
    with pytest.raises(ValueError, match="query"):
        reranker.postprocess_nodes([NodeWithScore(node=TextNode(text="x"))])
    every = Qwen3Reranker.from_model(reranker.model, reranker.tokenizer, top_n=None)
    nodes = [NodeWithScore(node=TextNode(text=d)) for d in DOCS]
    assert len(every.postprocess_nodes(nodes, query_str=QUERY)) == len(DOCS)
    assert Qwen3Reranker.class_name() == "Qwen3Reranker"


def test_loads_a_checkpoint_folder(model, tokenizer, tmp_path):
    folder = tmp_path / "tiny-qwen3-reranker"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    loaded = Qwen3Reranker(model_path=folder, device="cpu", batch_size=2)
    assert loaded.model_path == str(folder)
    assert loaded.tokenizer.padding_side == "left"
    expected = Qwen3Reranker.from_model(model, tokenizer).score(QUERY, DOCS)
    assert loaded.score(QUERY, DOCS) == pytest.approx(expected, abs=1e-5)
    assert loaded.encode(QUERY, DOCS) == Qwen3Reranker.from_model(model, tokenizer).encode(
        QUERY, DOCS
    )


def test_missing_checkpoint_or_bad_settings_fail_clearly(tmp_path, model, tokenizer):
    with pytest.raises(FileNotFoundError):
        Qwen3Reranker(model_path=tmp_path / "absent")
    with pytest.raises(ValueError, match="model_path"):
        Qwen3Reranker()
    with pytest.raises(ValueError, match="dtype"):
        Qwen3Reranker.from_model(model, tokenizer, dtype="int3")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_bf16_matches_cpu(model, tokenizer):
    import copy

    cpu = Qwen3Reranker.from_model(model, tokenizer).score(QUERY, DOCS)
    gpu_model = copy.deepcopy(model)
    rr = Qwen3Reranker.from_model(gpu_model, tokenizer, device="cuda", dtype="bfloat16")
    assert next(rr.model.parameters()).device.type == "cuda"
    batched = rr.score(QUERY, DOCS)
    single = Qwen3Reranker.from_model(rr.model, tokenizer, batch_size=1).score(QUERY, DOCS)
    assert batched == pytest.approx(single, abs=1e-2)
    assert batched == pytest.approx(cpu, abs=5e-2)
