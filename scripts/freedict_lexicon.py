"""A FreeDict dictionary as a lexicon for ``data.lexicon``: source<TAB>target word pairs.

FreeDict's dictionaries (https://freedict.org, GPL) come as dictd files, e.g. Debian's
``dict-freedict-eng-hin`` package (``apt-get download dict-freedict-eng-hin`` and
``dpkg-deb -x`` it): ``/usr/share/dictd/freedict-eng-hin.dict.dz``. Each entry is a headword line
(``book /bˈʊk/ <N>``), numbered senses (``1. पुस्तक, किताब``: alternatives split by commas,
``~`` for a space, ``[...]``/``{...}``/``(...)`` notes) and quoted examples, which are skipped.

A dictionary of 25,000 headwords is mostly words a phrasebook corpus never uses, and trained
beside 2,000 sentence pairs those would take most of each epoch: ``--words-in`` keeps the
headwords whose every word occurs in a text's first column (e.g. the related corpus's English
sentences), ``--per-word`` the first translations of each.

    python scripts/freedict_lexicon.py freedict-eng-hin.dict.dz data/eng-hin-freedict/lexicon.tsv \\
        --words-in data/eng-mar/mar.txt --per-word 3
"""

from __future__ import annotations

import argparse
import gzip
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from nmt.core.fileio import write_lines_atomic

HEADWORD = re.compile(r"^(\S.*?) /[^/]*/ <[^>]*>\s*$")  # "book /bˈʊk/ <N>"
SENSE = re.compile(r"^\d+\. (.*)$")  # "1. पुस्तक, किताब"
NOTE = re.compile(r"\[[^\]]*\]|\{[^}]*\}|\([^)]*\)")  # grammatical notes inside a translation
WORD = re.compile(r"[a-z']+")
LATIN = re.compile(r"[A-Za-z]")


def dictionary_lines(path: Path) -> Iterator[str]:
    """The dictd file's lines (a .dict.dz is gzip-readable)."""
    opener = gzip.open if path.suffix in (".dz", ".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        yield from (line.rstrip("\n") for line in handle)


def entries(lines: Iterable[str]) -> dict[str, list[str]]:
    """headword -> its translations, in the dictionary's order (first sense first), without
    repeats, notes or translations that are English."""
    translations: dict[str, list[str]] = {}
    headword = None
    for line in lines:
        if match := HEADWORD.match(line):
            headword = match.group(1).strip()
        elif headword and (match := SENSE.match(line)):
            for alternative in NOTE.sub("", match.group(1)).split(","):
                text = " ".join(alternative.replace("~", " ").replace("_", " ").split()).strip(" .")
                known = translations.setdefault(headword, [])
                if text and not LATIN.search(text) and text not in known:
                    known.append(text)
    return {headword: known for headword, known in translations.items() if known}


def words_of(path: Path) -> set[str]:
    """The lower-cased words of a TSV file's first column."""
    found: set[str] = set()
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            found.update(WORD.findall(line.split("\t", 1)[0].lower()))
    return found


def lexicon(
    translations: dict[str, list[str]], known_words: set[str] | None, per_word: int, max_words: int
) -> list[tuple[str, str]]:
    """(headword, translation) pairs: headwords of at most ``max_words`` words, all of them in
    ``known_words`` (when given), each with its first ``per_word`` translations."""
    pairs = []
    for headword, known in translations.items():
        words = WORD.findall(headword.lower())
        if not words or len(words) > max_words or (known_words is not None and not set(words) <= known_words):
            continue
        pairs += [(headword, text) for text in known[:per_word]]
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dictionary", type=Path, help="a FreeDict dictd file (.dict or .dict.dz)")
    parser.add_argument("out", type=Path, help="the lexicon to write (TSV: source<TAB>target)")
    parser.add_argument("--words-in", type=Path, help="keep headwords whose words all occur in this TSV's first column")
    parser.add_argument("--per-word", type=int, default=3, help="translations kept per headword (default 3)")
    parser.add_argument("--max-words", type=int, default=3, help="longest headword kept, in words (default 3)")
    args = parser.parse_args()
    translations = entries(dictionary_lines(args.dictionary))
    known_words = words_of(args.words_in) if args.words_in else None
    pairs = lexicon(translations, known_words, args.per_word, args.max_words)
    write_lines_atomic(args.out, (f"{source}\t{target}" for source, target in pairs))
    print(f"{args.out}: {len(pairs):,} pairs of {len(translations):,} headwords in {args.dictionary}")


if __name__ == "__main__":
    main()
