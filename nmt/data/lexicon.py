"""A bilingual word list trained beside the pairs (``data.lexicon``): a glossary the user has,
or a dictionary's headwords, as short training pairs.

The lexicon is a TSV of ``source<TAB>target`` lines (a word or a phrase each side; a word with
several translations on several lines). Its pairs are appended to the prepared training text
after the split, so dev and test stay the corpus's sentences; an entry whose source is a dev or
test source is left out. The tokenizers learn from the corpus's sentences only: the lexicon's
words are cut by them, and do not reshape the vocabulary. Beside related corpora
(``data.related``) the lexicon is part of the pair's text: led by the pair's tag and
oversampled with it. ``scripts/freedict_lexicon.py`` writes
such a file from a FreeDict dictionary (docs/small-data.md measures one).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from nmt.config.paths import PreparedPaths
from nmt.config.schema import DataConfig
from nmt.core.fileio import atomic_text_writer
from nmt.data.pairs import MAX_PROBLEMS_SHOWN, ReadResult, check_read
from nmt.data.related import dev_and_test_sources
from nmt.data.tsv import tsv_pairs

LEXICON = "a word list (a TSV of source<TAB>target word pairs, one a line)"


@dataclass
class LexiconMix:
    pairs: int = 0  # lexicon pairs added to the training text
    held_out: int = 0  # left out: their source is a dev or test source
    malformed: int = 0  # lines of the file that are not source<TAB>target


def add_lexicon(data: DataConfig, paths: PreparedPaths, log=print) -> LexiconMix:
    """Append data.lexicon's pairs to the prepared training text (sources, targets,
    attribution); refuses a file that is not a lexicon, naming its first bad lines."""
    path = Path(data.lexicon)
    result = ReadResult(keep_problems=MAX_PROBLEMS_SHOWN)
    pairs = list(tsv_pairs(path, result, data.max_chars, None, data.src_lang, header=False))
    check_read(result, path, LEXICON, data.on_malformed, log, key="data.lexicon")
    held = set().union(*dev_and_test_sources(paths))
    distinct = list(dict.fromkeys((p.src, p.tgt) for p in pairs))
    kept = [(src, tgt) for src, tgt in distinct if src not in held]
    label = f"lexicon: {path}"
    _append(paths.text("train", "src"), [src for src, _ in kept])
    _append(paths.text("train", "tgt"), [tgt for _, tgt in kept])
    _append(paths.attribution("train"), [label] * len(kept))
    return LexiconMix(pairs=len(kept), held_out=len(distinct) - len(kept), malformed=result.problem_count)


def _append(path: Path, lines: list[str]) -> None:
    """``path`` with ``lines`` after its own, replaced atomically; the training text is copied
    through, never held (a corpus of millions of pairs stays out of memory)."""
    with atomic_text_writer(path) as out, open(path, encoding="utf-8", newline="") as before:
        shutil.copyfileobj(before, out)
        out.writelines(f"{line}\n" for line in lines)
