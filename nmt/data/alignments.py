"""Word alignments: the Pharaoh format every aligner and scorer reads, agreement between two
alignments (Och & Ney 2003), subwords mapped back to words, and grow-diag-final-and.

A line of a Pharaoh file is one sentence pair's links, ``i-j`` for source word i and target word
j (0-based, words being the text's whitespace-separated tokens, as eflomal and fast_align read
them); a gold file may mark a link possible rather than sure with ``i?j`` (``i-j`` links are
sure, and every sure link is possible too). Agreement is read as Och & Ney define it for a
hypothesis A against sure links S and possible links P ⊇ S:

    precision = |A ∩ P| / |A|      recall = |A ∩ S| / |S|
    AER = 1 − (|A ∩ S| + |A ∩ P|) / (|A| + |S|)

summed over the sentences before dividing (the corpus figure, as the papers report it).
"""

from __future__ import annotations

import hashlib
import itertools
import re
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nmt import install_hint
from nmt.config.schema import DataConfig
from nmt.core.errors import NmtError
from nmt.core.fileio import write_lines_atomic, write_text_atomic
from nmt.data.pairs import ReadResult
from nmt.data.sources import read_corpus

Link = tuple[int, int]  # (source word, target word)
WORD_START = "▁"  # SentencePiece's mark of a piece that begins a whitespace-separated word
LINK = re.compile(r"^(\d+)([-?])(\d+)$")


@dataclass
class Links:
    """One sentence pair's alignment: its sure links, and the possible ones (sure included)."""

    sure: set[Link] = field(default_factory=set)
    possible: set[Link] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.possible = self.possible | self.sure

    def pharaoh(self) -> str:
        """``i-j`` for each sure link, ``i?j`` for each possible one that is not sure, in order."""
        marked = [(link, "-") for link in self.sure] + [(link, "?") for link in self.possible - self.sure]
        return " ".join(f"{i}{mark}{j}" for (i, j), mark in sorted(marked))


def parse_links(line: str, where: str = "") -> Links:
    """One Pharaoh line; ``where`` (file:line) names it in the error."""
    links = Links()
    for token in line.split():
        found = LINK.match(token)
        if found is None:
            raise NmtError(f"{where or 'a Pharaoh line'}: {token!r} is not a link: i-j (sure) or i?j (possible).")
        pair = (int(found.group(1)), int(found.group(3)))
        (links.sure if found.group(2) == "-" else links.possible).add(pair)
    links.possible |= links.sure
    return links


MAX_LINE_CHARACTERS = 1_000_000  # a Pharaoh line of a sentence pair is far shorter


def read_links(path: str | Path, pairs: int | None = None) -> list[Links]:
    """A Pharaoh file, one sentence pair a line (an empty line: no links). Read a line at a time,
    and no further than ``pairs`` lines where the count is known (``/dev/zero`` as a reference
    was read whole, 23 GB, before the kernel stopped it): a file that is not a regular file, a
    line past the bound, or more lines than pairs is refused naming the file."""
    path = Path(path)
    if not path.is_file():
        raise NmtError(f"{path}: not a regular file of alignments (Pharaoh: one line of i-j links a sentence pair).")
    found = []
    try:
        with open(path, encoding="utf-8", newline=None) as handle:
            for number in itertools.count(1):
                line = handle.readline(MAX_LINE_CHARACTERS + 1)
                if not line:
                    break
                if len(line) > MAX_LINE_CHARACTERS:
                    raise NmtError(f"{path}:{number}: over {MAX_LINE_CHARACTERS:,} characters: not alignments.")
                if pairs is not None and number > pairs:
                    raise NmtError(f"{path} has more lines than the {pairs:,} sentence pairs it should align.")
                found.append(parse_links(line.rstrip("\n"), f"{path}:{number}"))
    except (OSError, UnicodeDecodeError) as error:
        raise NmtError(f"{path}: cannot read its alignments ({error}).") from None
    return found


def check_links_fit(references: Sequence[Links], sources: Sequence[str], targets: Sequence[str], where: str) -> None:
    """Each reference link names a word its pair has (Pharaoh counts words from 0): a 1-based gold
    file was scored silently before (AER 0.769 where 0.490 was right)."""
    if len(references) != len(sources):
        raise NmtError(f"{where} has {len(references):,} lines for {len(sources):,} sentence pairs: give one a pair.")
    for number, (links, source, target) in enumerate(zip(references, sources, targets), start=1):
        source_words, target_words = len(source.split()), len(target.split())
        for i, j in sorted(links.possible):
            if i >= source_words or j >= target_words:
                raise NmtError(
                    f"{where}:{number}: link {i}-{j}, but the pair has {source_words} source and {target_words} "
                    "target words (Pharaoh counts words from 0: the first link of a pair is 0-0)."
                )


@dataclass(frozen=True)
class Agreement:
    """How far a hypothesis alignment agrees with a reference, over a corpus."""

    precision: float
    recall: float
    aer: float
    sentences: int
    links: int  # the hypothesis's
    sure: int  # the reference's sure links

    def to_dict(self) -> dict:
        return {
            "precision": round(self.precision, 4),
            "recall": round(self.recall, 4),
            "aer": round(self.aer, 4),
            "sentences": self.sentences,
        }

    def describe(self) -> str:
        """The figures as a line; one whose denominator is 0 is said to be undefined, not 0."""
        precision = f"{self.precision:.3f}" if self.links else "undefined (no links to score)"
        recall = f"{self.recall:.3f}" if self.sure else "undefined (the reference has no sure links)"
        aer = f"{self.aer:.3f}" if self.links + self.sure else "undefined (no links on either side)"
        return (
            f"AER {aer}, precision {precision}, recall {recall} "
            f"({self.sentences:,} sentence pairs, {self.links:,} links against {self.sure:,} sure)"
        )


def agreement(references: Sequence[Links], hypotheses: Sequence[Links]) -> Agreement:
    """Och & Ney's precision, recall and AER of ``hypotheses`` against ``references``, one each."""
    if len(references) != len(hypotheses):
        raise NmtError(f"{len(references)} reference alignments but {len(hypotheses)} to score: give one per pair.")
    found = sure = with_sure = with_possible = 0
    for reference, hypothesis in zip(references, hypotheses):
        links = hypothesis.sure
        found += len(links)
        sure += len(reference.sure)
        with_sure += len(links & reference.sure)
        with_possible += len(links & reference.possible)
    precision = with_possible / found if found else 0.0
    recall = with_sure / sure if sure else 0.0
    aer = 1.0 - (with_sure + with_possible) / (found + sure) if found + sure else 0.0
    return Agreement(precision, recall, aer, len(references), found, sure)


def word_of_pieces(pieces: Sequence[str], special: Iterable[str] = ()) -> list[int | None]:
    """The whitespace word each SentencePiece piece belongs to: a piece that starts with ``▁``
    starts the next word (a lone ``▁`` too: the piece after it continues that word); the others
    continue the current one. ``special`` pieces (``<eos>``, a target tag such as ``<2hi>``)
    belong to no word (None)."""
    specials = set(special)
    words: list[int | None] = []
    word = -1
    attached = False  # a lone ▁ began a word that has no letters yet
    for piece in pieces:
        if piece in specials:
            words.append(None)
            continue
        if piece.startswith(WORD_START) and not (attached and piece == WORD_START):
            word += 1
            attached = piece == WORD_START
        else:
            word = max(word, 0)
            attached = False
        words.append(word)
    return _without_empty_words(pieces, words)


def _without_empty_words(pieces: Sequence[str], words: list[int | None]) -> list[int | None]:
    """A word of lone ``▁`` pieces only (before another ``▁word``, or last) has no letters, and
    the text has no such word: its pieces join the next word (else the one before; else none),
    and the words are numbered again. Links had named words the translation did not have."""
    letters: dict[int, bool] = {}
    for piece, word in zip(pieces, words):
        if word is not None:
            letters[word] = letters.get(word, False) or bool(piece.replace(WORD_START, ""))
    empty = {word for word, has in letters.items() if not has}
    if not empty:
        return words
    kept = sorted(word for word, has in letters.items() if has)
    number = {word: index for index, word in enumerate(kept)}

    def home(word: int) -> int | None:
        after = [w for w in kept if w > word]
        before = [w for w in kept if w < word]
        return number[after[0]] if after else number[before[-1]] if before else None

    return [None if w is None else home(w) if w in empty else number[w] for w in words]


def word_weights(
    attention: np.ndarray, source_words: Sequence[int | None], target_words: Sequence[int | None]
) -> np.ndarray:
    """A subword attention matrix (target subwords × source subwords) summed over each word's
    subwords on both sides: (target words, source words). Subwords of no word (``<eos>``, tags,
    padding) count for nothing."""
    source = [w for w in source_words if w is not None]
    target = [w for w in target_words if w is not None]
    summed = np.zeros((max(target, default=-1) + 1, max(source, default=-1) + 1), dtype=np.float32)
    for row, tw in enumerate(target_words):
        if tw is None:
            continue
        for column, sw in enumerate(source_words):
            if sw is not None:
                summed[tw, sw] += attention[row, column]
    return summed


def word_links(attention: np.ndarray, source_words: Sequence[int | None], target_words: Sequence[int | None]) -> Links:
    """Links from a subword attention matrix (target subwords × source subwords): each target word
    linked to the source word it attends to most, over their subwords (``word_weights``)."""
    summed = word_weights(attention, source_words, target_words)
    if not summed.size:
        return Links()
    return Links({(int(summed[tw].argmax()), tw) for tw in range(summed.shape[0])})


def grow_diag_final_and(forward: Links, backward: Links) -> Links:
    """The symmetrisation of Koehn et al. (2003) as Moses writes it: the links both directions
    agree on, grown into their union through neighbours (diagonals included) that align a word
    not yet aligned, then the union's links whose two words are both still unaligned."""
    union = forward.sure | backward.sure
    aligned = set(forward.sure & backward.sure)
    neighbours = [(-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]
    grew = True
    while grew:
        grew = False
        for i, j in sorted(aligned):
            for di, dj in neighbours:
                link = (i + di, j + dj)
                if link in union and link not in aligned and _unaligned(link, aligned, either=True):
                    aligned.add(link)
                    grew = True
    for direction in (forward.sure, backward.sure):
        for link in sorted(direction):
            if link not in aligned and _unaligned(link, aligned, either=False):
                aligned.add(link)
    return Links(aligned)


def _unaligned(link: Link, aligned: set[Link], either: bool) -> bool:
    """Whether the link's source word or (``either``) its target word is unaligned; with
    ``either`` False, whether both are."""
    source = all(i != link[0] for i, _ in aligned)
    target = all(j != link[1] for _, j in aligned)
    return source or target if either else source and target


def eflomal_installed() -> bool:
    """Whether the reference aligner eflomal can be imported here."""
    try:
        import eflomal  # noqa: F401  (only whether it is installed)
    except ImportError:
        return False
    return True


def require_eflomal(why: str) -> None:
    """Refuse, before any work, what needs the reference aligner where it is not installed (a
    probe trained a whole epoch, and `evaluate --align` translated everything, before saying so)."""
    if not eflomal_installed():
        raise NmtError(f"{why} needs the reference aligner eflomal: {install_hint('align', 'eflomal')}.")


def eflomal_alignments(
    sources: Sequence[str], targets: Sequence[str], extra: tuple[Sequence[str], Sequence[str]] = ((), ())
) -> list[Links]:
    """eflomal's links for each pair (Östling & Tiedemann 2016), both ways and symmetrised
    (grow-diag-final-and); ``extra`` pairs are aligned beside them for their statistics and not
    returned. The reference aligner: a library made for it, not one of this toolkit's own."""
    try:
        import eflomal
    except ImportError:
        raise NmtError(f"The reference aligner is eflomal: {install_hint('align', 'eflomal')}.") from None
    if len(sources) != len(targets):
        raise NmtError(f"{len(sources)} sources but {len(targets)} targets: give one per source.")
    every_source = [" ".join(line.split()) for line in [*sources, *extra[0]]]
    every_target = [" ".join(line.split()) for line in [*targets, *extra[1]]]
    with tempfile.TemporaryDirectory() as folder:
        forward, backward = Path(folder, "forward"), Path(folder, "backward")
        eflomal.Aligner().align(
            every_source, every_target, links_filename_fwd=str(forward), links_filename_rev=str(backward)
        )
        ways = [path.read_text(encoding="utf-8").splitlines() for path in (forward, backward)]
    return [grow_diag_final_and(parse_links(f), parse_links(b)) for f, b in zip(*ways)][: len(sources)]


def kept_eflomal_alignments(
    path: Path, sources: Sequence[str], targets: Sequence[str], extra: tuple[Sequence[str], Sequence[str]] = ((), ())
) -> list[Links]:
    """eflomal's links of these pairs (``eflomal_alignments``), computed once and kept at ``path``
    in the Pharaoh format: read back while it holds a line per pair, so that a resumed run or a
    second evaluation reads the same links (eflomal samples; it need not give them again)."""
    key = path.with_name(path.name + ".sha256")  # what the links align: read back only for the same pairs
    fingerprint = pairs_fingerprint(sources, targets, extra)
    kept = path.is_file() and key.is_file() and key.read_text(encoding="utf-8").strip() == fingerprint
    links = read_links(path, len(sources)) if kept else []
    if len(links) == len(sources):  # a file read back names only words its pairs have (else: trained silently)
        check_links_fit(links, sources, targets, str(path))
    else:  # none yet, or of other pairs (the same name and count matched before)
        links = eflomal_alignments(sources, targets, extra)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_lines_atomic(path, [found.pharaoh() for found in links])
        write_text_atomic(key, fingerprint + "\n")
    return links


def corpus_links(data: DataConfig, unpack_dir: Path) -> dict[tuple[str, str], Links]:
    """``data.links`` read beside the training data's pairs: the links of each pair, by its text
    (as prepare writes it), so that the prepared pairs of any split find theirs. The file holds
    a line per line of the data (an empty one for a line without a pair, such as a header)."""
    lines = read_links(data.links)
    corpus = read_corpus(data, unpack_dir)
    found: dict[tuple[str, str], Links] = {}
    for pair in corpus.train_pairs(ReadResult(keep_problems=0)):
        if pair.line_no > len(lines):
            raise NmtError(
                f"data.links: {data.links} has {len(lines):,} lines, but line {pair.line_no:,} of {corpus.train_path} "
                "holds a pair: the links file needs a line for each line of the data (scripts/dev/corpus_links.py)."
            )
        found.setdefault((pair.src, pair.tgt), lines[pair.line_no - 1])
    return found


def given_links(data: DataConfig, unpack_dir: Path, sources: Sequence[str], targets: Sequence[str]) -> list[Links]:
    """The links ``data.links`` gives these prepared pairs, each checked against its words;
    refused naming how many it lacks (a links file of another corpus, or of other pairs)."""
    by_pair = corpus_links(data, unpack_dir)
    links = [by_pair.get((source, target)) for source, target in zip(sources, targets)]
    missing = sum(found is None for found in links)
    if missing:
        raise NmtError(
            f"data.links: {missing:,} of {len(links):,} prepared pairs have no line in {data.links} (links of "
            "another corpus, or of pairs before a change?): make them again with scripts/dev/corpus_links.py, or "
            "remove the key to let eflomal align the pairs."
        )
    checked = [found for found in links if found is not None]
    check_links_fit(checked, sources, targets, data.links)
    return checked


def pairs_fingerprint(
    sources: Sequence[str], targets: Sequence[str], extra: tuple[Sequence[str], Sequence[str]] = ((), ())
) -> str:
    """The sha256 of the pairs eflomal aligns and of the pairs beside them (its statistics)."""
    digest = hashlib.sha256()
    for part in (sources, targets, *extra):
        digest.update(b"\x1e")  # a part's end: ("a", "") and ("", "a") differ
        for line in part:
            digest.update(line.encode("utf-8", errors="surrogatepass") + b"\n")
    return digest.hexdigest()


def piece_links(links: Links, source_words: Sequence[int | None], target_words: Sequence[int | None]) -> np.ndarray:
    """Word links carried down to subwords: each target subword linked to every subword of the
    source words its word is linked to (sure and possible alike) -> (n, 2) int32 rows of
    (target subword, source subword), what guided alignment's target distribution is made of.
    A target word linked to nothing gives no row (its subwords are not guided)."""
    by_target: dict[int, list[int]] = {}
    for i, j in sorted(links.possible):
        by_target.setdefault(j, []).append(i)
    pieces_of: dict[int, list[int]] = {}
    for column, word in enumerate(source_words):
        if word is not None:
            pieces_of.setdefault(word, []).append(column)
    rows = [
        (row, column)
        for row, word in enumerate(target_words)
        if word is not None
        for source_word in by_target.get(word, ())
        for column in pieces_of.get(source_word, ())
    ]
    return np.array(rows, dtype=np.int32).reshape(-1, 2)
