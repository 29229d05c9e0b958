"""Make a tiny random-weight Llama that vLLM can serve with no hub access.

Run with the engine's interpreter (``.venv-vllm/bin/python``): it needs torch,
transformers and tokenizers, which the project's own venv does not carry.

* tokenizer: a byte-level BPE trained here on a few sentences (every byte is
  in its alphabet, so any prompt encodes), with ``<s>``, ``</s>``, ``<unk>``;
* model: ``LlamaConfig`` with head dimension 64 (vLLM's CPU attention kernel
  rejects 16), two layers, random weights from a fixed seed;
* the end-of-sequence token is unreachable, so every request generates
  exactly ``max_tokens``: coordinate 0 of the residual stream is a constant
  ``K`` (every embedding carries it, no layer writes to it), so after the
  final RMSNorm it is always positive; the lm_head row of ``</s>`` reads only
  that coordinate with a large negative weight, and no other row reads it.
  The ``</s>`` logit is then about ``-BIG · sqrt(hidden)``, beyond any sampling.

Usage: make_tiny_llama.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SENTENCES = [
    "The guard admits every floor-entitled request whatever the learner proposes.",
    "A request arrives, is admitted, is dispatched and completes before its deadline.",
    "Windows are tumbling intervals of one second; each tenant has a floor of credits.",
    "The quick brown fox jumps over the lazy dog while the server streams tokens.",
    "Service times grow with the batch size and the number of output tokens.",
    "0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ .,;:!?-_()[]{}",
]
HIDDEN, HEADS, LAYERS, INTERMEDIATE = 128, 2, 2, 256  # head dim 128 / 2 = 64
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)
K_CONST, BIG = 8.0, 1000.0
SEED = 20260101


def make_tokenizer(out: Path) -> object:
    """Train the byte-level BPE and save it as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=384,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(SENTENCES * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return fast


def make_model(out: Path, vocab: int, bos: int, eos: int) -> None:
    """Random Llama weights with the end-of-sequence token made unreachable (see module doc)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=HIDDEN,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=HEADS,
        head_dim=HIDDEN // HEADS,
        max_position_embeddings=2048,
        bos_token_id=bos,
        eos_token_id=eos,
        tie_word_embeddings=False,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        model.model.embed_tokens.weight[:, 0] = K_CONST
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight[0, :] = 0.0
            layer.mlp.down_proj.weight[0, :] = 0.0
        model.lm_head.weight[:, 0] = 0.0
        model.lm_head.weight[eos, :] = 0.0
        model.lm_head.weight[eos, 0] = -BIG
    model.save_pretrained(out, safe_serialization=True)
    check_eos_unreachable(model, eos, vocab)


def check_eos_unreachable(model: object, eos: int, vocab: int) -> None:
    """Fail loudly unless ``</s>`` has a hugely negative logit on random inputs."""
    import torch

    ids = torch.randint(0, vocab, (4, 32), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = model(input_ids=ids).logits  # type: ignore[operator]
    worst = float(logits[..., eos].max())
    if worst > -100.0:
        raise SystemExit(f"make_tiny_llama: </s> logit {worst} is reachable")


def main(argv: list[str]) -> int:
    """Write the tokenizer and the model into ``argv[1]``."""
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    tok = make_tokenizer(out)
    vocab = len(tok)  # type: ignore[arg-type]
    bos = tok.convert_tokens_to_ids("<s>")  # type: ignore[attr-defined]
    eos = tok.convert_tokens_to_ids("</s>")  # type: ignore[attr-defined]
    make_model(out, vocab, bos, eos)
    (out / "rvguard-model.json").write_text(json.dumps({"vocab": vocab, "eos": eos, "hidden": HIDDEN}))
    print(f"make_tiny_llama: wrote {out} (vocab {vocab}, eos {eos} unreachable)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
