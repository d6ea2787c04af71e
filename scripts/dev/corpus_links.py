"""Write a corpus's word links once, for `data.links`: eflomal's links of every pair (both ways,
symmetrised with grow-diag-final-and, as guided alignment computes them), a Pharaoh line per line
of the corpus file (an empty line where a line holds no pair, such as a header).

    python scripts/dev/corpus_links.py data/eng-mar/mar.txt data/eng-mar/mar.links --src-lang en

Needs eflomal (`pip install eflomal`, the [align] extra). eflomal samples: a second run gives
links of the same quality, not the same bytes. The shipped data/eng-mar/mar.links was made so.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from nmt.config.schema import DataConfig
from nmt.core.fileio import write_lines_atomic
from nmt.data.alignments import eflomal_alignments
from nmt.data.pairs import ReadResult
from nmt.data.sources import read_corpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", type=Path, help="a TSV of pairs (the source in its first column)")
    parser.add_argument("out", type=Path, help="the links file to write (Pharaoh)")
    parser.add_argument("--src-lang", default="en")
    parser.add_argument("--tgt-lang", default="mr")
    args = parser.parse_args()
    data = DataConfig(path=str(args.corpus), src_lang=args.src_lang, tgt_lang=args.tgt_lang)
    result = ReadResult(keep_problems=0)
    pairs = list(read_corpus(data, args.out.parent).train_pairs(result))
    lines = result.lines_read
    start = time.perf_counter()
    links = eflomal_alignments([p.src for p in pairs], [p.tgt for p in pairs])
    by_line = [""] * lines
    for pair, found in zip(pairs, links):
        by_line[pair.line_no - 1] = found.pharaoh()
    write_lines_atomic(args.out, by_line)
    seconds = time.perf_counter() - start
    print(f"{args.out}: {len(pairs):,} pairs aligned, {lines:,} lines, in {seconds:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
