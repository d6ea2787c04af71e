"""Related corpora trained beside the user's pair (``data.related``): one model for several
targets, each source sentence led by its target's tag (Johnson et al., 2017).

After the user's pair is split, the prepared training text becomes: the pair's own training
pairs ``data.oversample`` times, then every related corpus's pairs, each source tagged
(``<2hi> I am tall.``). A related pair whose source is one of the pair's dev or test sources is
left out (the test stays unseen, and the report counts them). Dev, test and the best
checkpoint stay the pair's own. The tokenizers learn from a balanced sample: as many sentences
of each related corpus as of the pair, so the pair's target has its own pieces in a shared
vocabulary (from a parent of a related target, its tokenizers extended instead:
``nmt.runtime.parent.related_child_tokenizers``). Which related pairs an epoch trains on
(``train.related_per_epoch``, ``train.related_until``) is the trainer's: ``nmt.training.data``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from nmt.config.paths import PreparedPaths
from nmt.config.schema import DataConfig
from nmt.core.errors import NmtError
from nmt.core.fileio import read_lines, write_lines_atomic
from nmt.data.download import tsv_file
from nmt.data.pairs import MAX_PROBLEMS_SHOWN, TSV, Pair, ReadResult, check_read
from nmt.data.tokenizer import tagged, target_tag
from nmt.data.tsv import tsv_pairs


@dataclass
class RelatedMix:
    pairs: dict[str, int] = field(default_factory=dict)  # related pairs trained on, by target language
    held_out: dict[str, int] = field(default_factory=dict)  # left out: their source is a dev/test source
    test_sources_in_related: int = 0  # of the pair's test sources, those a related corpus also translates
    src_sample: list[str] = field(default_factory=list)  # related sentences the tokenizers also learn from
    tgt_sample: list[str] = field(default_factory=list)
    train_pairs: int = 0  # the training text's pairs, oversampled ones counted each time


def symbols(data: DataConfig) -> list[str]:
    """The tags of a model of several targets; none for one target."""
    return [target_tag(lang) for lang in data.targets] if data.related else []


def source_tag(data: DataConfig, lang: str | None = None) -> str | None:
    """The language whose tag leads a source asking for ``lang`` (default: this pair's target),
    or None for a model of one target."""
    return (lang or data.tgt_lang) if data.related else None


def dev_and_test_sources(paths: PreparedPaths) -> tuple[set[str], set[str]]:
    """The prepared pair's dev and test sources: no related or synthetic pair is trained on them."""
    return set(read_lines(paths.text("dev", "src"))), set(read_lines(paths.text("test", "src")))


def related_pairs(path: Path, data: DataConfig, unpack_dir: Path, log=print) -> list[Pair]:
    """A related corpus's pairs (source first, as Anki exports are), read and judged as the
    corpus is (``check_read``): malformed lines skipped and shown, or the file refused."""
    if not path.is_file():
        raise NmtError(f"Data file not found: {path} (config key 'data.related').")
    result = ReadResult(keep_problems=MAX_PROBLEMS_SHOWN)
    pairs = list(tsv_pairs(tsv_file(path, unpack_dir), result, data.max_chars, None, data.src_lang))
    check_read(result, path, TSV, data.on_malformed, log, key="data.related")
    return pairs


def mix_related(data: DataConfig, paths: PreparedPaths, sample_size: int, unpack_dir: Path, log=print) -> RelatedMix:
    """Rewrite the prepared training text as the pair's pairs (oversampled) and the related
    corpora's, every source tagged; the balanced sample the tokenizers add (``sample_size``
    related pairs per corpus at most, seeded)."""
    mix = RelatedMix()
    src, tgt = read_lines(paths.text("train", "src")), read_lines(paths.text("train", "tgt"))
    attribution = read_lines(paths.attribution("train"))
    dev_sources, test_sources = dev_and_test_sources(paths)
    held = dev_sources | test_sources
    out_src = tagged(src, data.tgt_lang) * data.oversample
    out_tgt = tgt * data.oversample
    out_attribution = attribution * data.oversample
    seen_in_related: set[str] = set()
    rng = random.Random(data.split_seed)
    for lang, file in data.related.items():
        pairs = list({(p.src, p.tgt): p for p in related_pairs(Path(file), data, unpack_dir / lang, log)}.values())
        kept = [pair for pair in pairs if pair.src not in held]
        mix.held_out[lang] = len(pairs) - len(kept)
        if 0 < data.related_pairs < len(kept):  # a seeded sample, in file order: the budget's share
            kept = [kept[i] for i in sorted(rng.sample(range(len(kept)), data.related_pairs))]
        seen_in_related |= {pair.src for pair in pairs} & test_sources
        mix.pairs[lang] = len(kept)
        out_src += tagged([pair.src for pair in kept], lang)
        out_tgt += [pair.tgt for pair in kept]
        out_attribution += [pair.attribution for pair in kept]
        sample = rng.sample(kept, min(sample_size, len(kept)))
        mix.src_sample += [pair.src for pair in sample]
        mix.tgt_sample += [pair.tgt for pair in sample]
    write_lines_atomic(paths.text("train", "src"), out_src)
    write_lines_atomic(paths.text("train", "tgt"), out_tgt)
    write_lines_atomic(paths.attribution("train"), out_attribution)
    mix.test_sources_in_related, mix.train_pairs = len(seen_in_related), len(out_src)
    return mix
