"""Loading a trained model and translating lines of text."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from nmt.config import Config, DecodeConfig
from nmt.data.anki import normalize_text
from nmt.data.batching import source_tensor, sorted_batches
from nmt.data.prepare import prepared_paths
from nmt.errors import NmtError
from nmt.fileio import read_lines, split_lines
from nmt.model.seq2seq import Seq2Seq
from nmt.search import beam_search, greedy_search, max_output_length
from nmt.tokenizer import BOS_ID, Tokenizer
from nmt.train.checkpoint import check_compatible, checkpoint_path, load_checkpoint


def resolve_device(name: str) -> torch.device:
    """auto | cpu | cuda -> the device. On a GPU, float32 matrix products and cuDNN RNNs may
    use TF32 tensor cores (10-bit mantissa inputs, float32 accumulation)."""
    if name == "cuda" and not torch.cuda.is_available():
        raise NmtError("Device 'cuda' was asked for, but PyTorch sees no CUDA GPU. Use --device cpu or auto.")
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if name == "auto" else name)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    return device


def load_tokenizers(config: Config) -> tuple[Tokenizer, Tokenizer]:
    paths = prepared_paths(config)
    return Tokenizer(paths.spm("src")), Tokenizer(paths.spm("tgt"))


@dataclass
class Translator:
    model: Seq2Seq
    src_tok: Tokenizer
    tgt_tok: Tokenizer
    decode: DecodeConfig
    device: torch.device

    @classmethod
    def from_checkpoints(cls, config: Config, checkpoints: list[str], device: torch.device) -> "Translator":
        """One checkpoint, or several (an ensemble) trained with this config."""
        src_tok, tgt_tok = load_tokenizers(config)
        models = []
        for checkpoint in checkpoints:
            path = checkpoint_path(config, checkpoint)
            payload = load_checkpoint(path)
            check_compatible(payload, config, {"src": src_tok.sha256, "tgt": tgt_tok.sha256}, path)
            model = Seq2Seq(config.model, src_tok.vocab_size, tgt_tok.vocab_size)
            model.load_state_dict(payload["model"])
            models.append(model.to(device).eval())
        return cls(_one_or_ensemble(models), src_tok, tgt_tok, config.decode, device)

    @classmethod
    def from_checkpoint(cls, config: Config, checkpoint: str, device: torch.device) -> "Translator":
        return cls.from_checkpoints(config, [checkpoint], device)

    @classmethod
    def from_packages(cls, model_dirs: list[Path], device: torch.device) -> tuple[Config, "Translator"]:
        """(config of the first, translator) from folders written by `nmt export`; several
        folders make an ensemble, and must share their SentencePiece models."""
        from nmt.export import load_package

        loaded = [load_package(model_dir, device) for model_dir in model_dirs]
        config, _, src_tok, tgt_tok = loaded[0]
        for model_dir, (_, _, other_src, other_tgt) in zip(model_dirs[1:], loaded[1:]):
            if (other_src.sha256, other_tgt.sha256) != (src_tok.sha256, tgt_tok.sha256):
                raise NmtError(f"{model_dir} uses other SentencePiece models than {model_dirs[0]}: they cannot be ensembled.")
        return config, cls(_one_or_ensemble([model for _, model, _, _ in loaded]), src_tok, tgt_tok, config.decode, device)

    def translate_ids(
        self, src_ids: list[list[int]], beam_size: int | None = None, progress: bool = False
    ) -> list[list[int]]:
        """Subword ids in -> subword ids out, same order. Batches are sorted by length."""
        beam_size = self.decode.beam_size if beam_size is None else beam_size
        outputs: list[list[int]] = [[] for _ in src_ids]
        todo = [i for i, ids in enumerate(src_ids) if ids]  # empty input -> empty output
        # Each sentence runs as beam_size hypotheses: the token budget is shared among them.
        batches = sorted_batches(
            [len(src_ids[i]) + 1 for i in todo], self.decode.batch_size, self.decode.batch_tokens // beam_size
        )
        was_training = self.model.training
        self.model.eval()
        bar = tqdm(total=len(todo), desc="translate", unit="sent", disable=not progress, leave=False)
        for batch in batches:
            rows = [todo[i] for i in batch]
            src, src_lengths = source_tensor([src_ids[r] for r in rows])
            src = src.to(self.device)
            max_len = max_output_length(src_lengths, self.decode.max_len_ratio, self.decode.max_len_offset)
            try:
                if beam_size == 1:
                    result = greedy_search(self.model, src, src_lengths, max_len)
                else:
                    result = beam_search(self.model, src, src_lengths, beam_size, max_len, self.decode.length_penalty)
            except torch.cuda.OutOfMemoryError:
                raise NmtError(
                    f"CUDA ran out of memory translating {len(rows)} sentences of up to {src.size(1)} subwords with beam "
                    f"{beam_size}. Lower decode.batch_tokens (now {self.decode.batch_tokens}) or decode.batch_size "
                    f"(now {self.decode.batch_size})."
                ) from None
            for row, tokens in zip(rows, result.tokens):
                outputs[row] = tokens
            bar.update(len(rows))
        bar.close()
        self.model.train(was_training)
        return outputs

    def translate(self, lines: list[str], beam_size: int | None = None, progress: bool = False) -> list[str]:
        """One output line per input line; an empty (or blank) line gives an empty line."""
        texts = [normalize_text(line) for line in lines]
        src_ids = [ids if text else [] for text, ids in zip(texts, self.src_tok.encode(texts))]
        limit = self.decode.max_input_len
        too_long = sum(len(ids) > limit for ids in src_ids)
        if too_long:
            tqdm.write(f"warning: {too_long} input line(s) longer than {limit} subwords clipped (decode.max_input_len).")
            src_ids = [ids[:limit] for ids in src_ids]
        hyp_ids = self.translate_ids(src_ids, beam_size, progress)
        return [" ".join(text.split()) for text in self.tgt_tok.decode(hyp_ids)]

    @torch.no_grad()
    def attention_matrix(self, line: str, hypothesis: str) -> tuple[list[str], list[str], torch.Tensor]:
        """Attention weights of the model forced to produce ``hypothesis`` for ``line``:
        (source pieces + <eos>, target pieces + <eos>, weights (T, S))."""
        text = normalize_text(line)
        src_ids = self.src_tok.encode([text])[0]
        tgt_ids = self.tgt_tok.encode([hypothesis])[0]
        src, src_lengths = source_tensor([src_ids])
        tgt_in = torch.tensor([[BOS_ID] + tgt_ids], dtype=torch.long)
        was_training = self.model.training
        self.model.eval()
        _, attn = self.model(src.to(self.device), src_lengths, tgt_in.to(self.device))
        self.model.train(was_training)
        src_labels = self.src_tok.id_to_piece(src_ids) + ["</s>"]
        tgt_labels = self.tgt_tok.id_to_piece(tgt_ids) + ["</s>"]
        return src_labels, tgt_labels, attn[0].float().cpu()


def _one_or_ensemble(models: list):
    from nmt.ensemble import Ensemble

    return models[0] if len(models) == 1 else Ensemble(models).eval()


def read_input_lines(path: str | None) -> list[str]:
    """Lines of a UTF-8 file, or of stdin when ``path`` is None or '-'.

    Bytes that are not UTF-8 become U+FFFD rather than an error: every line still gets
    exactly one output line.
    """
    if path in (None, "-"):
        return split_lines(sys.stdin.buffer.read().decode("utf-8", errors="replace").removeprefix("\ufeff"))
    if not Path(path).is_file():
        raise NmtError(f"Input file not found: {path}")
    return read_lines(path, errors="replace")
