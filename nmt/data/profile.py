"""What a corpus is, read once before anything is written (``nmt init``): its distinct pairs and
sources, sentence lengths, each side's script, and the languages its file names and scripts
name. A file ``nmt prepare`` would refuse is refused here, with its file and line."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nmt.core.errors import NmtError
from nmt.core.fonts import script_of
from nmt.data.aligned import aligned_pairs
from nmt.data.distinct import pair_digest
from nmt.data.download import tsv_file
from nmt.data.languages import LANGUAGES
from nmt.data.pairs import LINES, TSV, Pair, ReadResult, check_read
from nmt.data.split import check_enough_sources
from nmt.data.tsv import tsv_pairs


def length_stats(lengths: np.ndarray) -> dict[str, float]:
    ordered = np.sort(lengths)
    return {
        "mean": float(ordered.mean()),
        "median": float(np.median(ordered)),
        "p95": float(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]),
        "max": float(ordered[-1]),
    }


@dataclass
class CorpusProfile:
    """What ``nmt init`` found in the data: counts, lengths and scripts."""

    files: list[Path]
    pairs: int = 0  # distinct pairs: prepare drops exact duplicates, and the recipe is chosen by what it trains on
    duplicates: int = 0  # exact repeats of a pair, not counted in ``pairs``
    sources: int = 0  # distinct source sentences (a split keeps each in one split)
    problems: int = 0  # malformed lines (prepare skips them)
    header: str = ""
    src_words: list[int] = field(default_factory=list)
    tgt_words: list[int] = field(default_factory=list)
    src_scripts: Counter = field(default_factory=Counter)
    tgt_scripts: Counter = field(default_factory=Counter)

    def script(self, side: str) -> str:
        counts = self.src_scripts if side == "src" else self.tgt_scripts
        return counts.most_common(1)[0][0] if counts else "UNKNOWN"

    def describe(self, side: str, lang: str) -> str:
        """A side's script and sentence lengths in words (mean and 95th percentile, as prepare's
        report counts subwords)."""
        stats = length_stats(np.array(self.src_words if side == "src" else self.tgt_words))
        lengths = f"{stats['mean']:.1f} words a sentence (95 % up to {stats['p95']:.0f})"
        return f"{lang}: {self.script(side).lower()} script, {lengths}"


def profile_corpus(files: list[Path], unpack_dir: Path) -> CorpusProfile:
    """Read the corpus once: a TSV or Anki zip (one file) or line-aligned files (source, target),
    refused where ``nmt prepare`` would refuse it."""
    found = CorpusProfile(files)
    result = ReadResult(keep_problems=3)
    sources, seen = set(), set()
    for pair in _pairs(files, unpack_dir, result):
        if (key := pair_digest(pair.src, pair.tgt)) in seen:
            found.duplicates += 1
            continue
        seen.add(key)
        found.pairs += 1
        sources.add(pair.src)
        found.src_words.append(len(pair.src.split()))
        found.tgt_words.append(len(pair.tgt.split()))
        if found.pairs <= 2000:  # the scripts of a sample
            found.src_scripts.update(scripts_in(pair.src))
            found.tgt_scripts.update(scripts_in(pair.tgt))
    found.sources, found.problems, found.header = len(sources), result.problem_count, result.header
    check_read(result, files[0], TSV if len(files) == 1 else LINES, log=lambda _: None)  # prepare's rule
    if not found.pairs:
        where = f": {result.problems[0]}" if result.problems else ""
        raise NmtError(f"{files[0]} holds no sentence pairs{where}.")
    check_enough_sources(found.sources, found.pairs, ["dev", "test"], str(files[0]))
    return found


def _pairs(files: list[Path], unpack_dir: Path, result: ReadResult) -> Iterator[Pair]:
    for path in files:
        if not path.is_file():
            raise NmtError(f"Data file not found: {path}")
    if len(files) == 2:
        for pairs in aligned_pairs("nmt init", files[0], [files[1]], 1000, result):
            yield from pairs
        return
    yield from tsv_pairs(tsv_file(files[0], unpack_dir), result)


def scripts_in(text: str) -> Iterable[str]:
    """The script of each letter of ``text``."""
    return (script_of(char) for char in text if char.isalpha())


# ---- languages: from the file names, checked against the scripts ----

# Scripts written by one language of the table only: a side in one of them names its language.
SCRIPT_LANGUAGES = {
    "BENGALI": "bn",
    "GREEK": "el",
    "GUJARATI": "gu",
    "GURMUKHI": "pa",
    "HANGUL": "ko",
    "HEBREW": "he",
    "HIRAGANA": "ja",
    "KATAKANA": "ja",
    "KANNADA": "kn",
    "MALAYALAM": "ml",
    "TAMIL": "ta",
    "TELUGU": "te",
    "THAI": "th",
}
# The script each language of the table is written in, where it is not Latin.
LANGUAGE_SCRIPTS = {
    **{code: script for script, code in SCRIPT_LANGUAGES.items()},
    "ar": "ARABIC", "fa": "ARABIC", "ur": "ARABIC", "hi": "DEVANAGARI", "mr": "DEVANAGARI", "ne": "DEVANAGARI",
    "ru": "CYRILLIC", "uk": "CYRILLIC", "zh": "CJK", "ja": "CJK",
}  # fmt: skip


def script_fits(code: str, script: str) -> bool:
    """Whether a side in ``script`` may be language ``code`` (unknown codes fit any script)."""
    if code not in LANGUAGES:
        return True
    expected = LANGUAGE_SCRIPTS.get(code, "LATIN")
    return script == expected or (code == "ja" and script in ("HIRAGANA", "KATAKANA", "CJK"))


def written_in(script: str) -> list[str]:
    """The codes of the table whose language is written in ``script`` (Latin: those of no other),
    English first where it is one."""
    codes = [code for code in LANGUAGES if LANGUAGE_SCRIPTS.get(code, "LATIN") == script]
    return sorted(codes, key=lambda code: code != "en")


def anki_named(name: str) -> bool:
    """A name in the Tatoeba/Anki style — three-letter codes (``hin-eng.zip``, ``eng-hin.tsv``) or a
    zip — whose English column comes first whatever the name's order; two-letter names (``fr-en.tsv``)
    are read in their order, as the columns are."""
    three = {other for _, others in LANGUAGES.values() for other in others}
    words = [word.lower() for word in re.split(r"[^A-Za-z]+", Path(name).stem) if word]
    return Path(name).suffix.lower() == ".zip" or any(word in three for word in words)


def languages_named(name: str) -> list[str]:
    """The language codes a file name names, in order: ``eng-hin.tsv`` -> [en, hi], ``hin.txt``
    -> [hi], ``train.mr`` -> [mr], ``en-es.tsv`` -> [en, es] (two-letter codes only as a whole
    suffix or beside another language: "no" and "hi" are also words)."""
    path = Path(name)
    stem, suffix = path.stem, path.suffix.lower().lstrip(".")
    if suffix in LANGUAGES:
        return [suffix]
    words = [word.lower() for word in re.split(r"[^A-Za-z]+", stem) if word]
    three = {other: code for code, (full, others) in LANGUAGES.items() for other in (*others, full.lower())}
    found = [three[word] for word in words if word in three]
    if not found:  # two-letter codes, only as a pair: en-es, de_en
        pairs = [word for word in words if word in LANGUAGES]
        found = pairs if len(pairs) == 2 else []
    return list(dict.fromkeys(found))


def guess_languages(files: list[Path], src_script: str, tgt_script: str) -> tuple[str, str] | None:
    """(source, target) language codes from the file names, checked against each side's script:
    two files name a language each (``train.en``, ``train.es``); one file names both
    (``eng-hin.tsv``, ``en-es.tsv``: the first column's first, unless the scripts say otherwise)
    or one, the other side being English (an Anki export is named after the other language:
    ``hin.txt``, ``hin-eng.zip``). A side in a script only one language writes names it. None
    where the names and scripts cannot tell, or disagree."""
    by_name = [languages_named(f.name) for f in files]
    if len(files) == 2:
        named = [found[0] if len(found) == 1 else "" for found in by_name]
    else:
        found = by_name[0]
        if "en" in found and len(found) == 2 and anki_named(files[0].name):  # Anki's LANG-eng.zip: English first
            found = ["en", next(code for code in found if code != "en")]
        named = found if len(found) == 2 else (["en", found[0]] if len(found) == 1 and found[0] != "en" else ["", ""])
    src, tgt = (code or SCRIPT_LANGUAGES.get(script, "") for code, script in zip(named, (src_script, tgt_script)))
    if src and tgt and not (script_fits(src, src_script) and script_fits(tgt, tgt_script)):
        if script_fits(src, tgt_script) and script_fits(tgt, src_script):
            src, tgt = tgt, src  # the file names them in the other order than its columns
        else:
            return None
    return (src, tgt) if src and tgt and src != tgt else None
