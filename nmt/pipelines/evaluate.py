"""``nmt evaluate``: translate a test set and score it (BLEU, chrF, TER) against every reference."""

from __future__ import annotations

import json
from pathlib import Path

from nmt.config.paths import PackagePaths, prepared_paths, run_paths
from nmt.config.schema import Config
from nmt.core.errors import NmtError
from nmt.core.fileio import read_lines, refuse_link, write_lines_atomic, write_text_atomic
from nmt.data.references import ReferenceSet, read_references
from nmt.decoding.scoring import repeated_word_share, score
from nmt.pipelines.translate import Translator


def evaluation_set(config: Config, src: Path | None, refs: list[Path]) -> tuple[ReferenceSet, str]:
    """(sources with their references, name) from --src/--ref files or the prepared test split."""
    if src is None:
        if refs:
            raise NmtError("--ref needs --src.")
        path = prepared_paths(config).multi("test")  # a package's own: the split it was trained beside
        refuse_link(path)
        if not path.is_file():
            if PackagePaths(Path(config.run_dir)).manifest.is_file():  # a package exported without one
                raise NmtError(
                    f"{path.parent} carries no test set (exported before packages did, or from a run with none): "
                    "give the sentences to score, --src FILE --ref FILE [--ref FILE ...]."
                )
            raise NmtError(f"No prepared test set at {path}. Run `nmt prepare --config ...` first.")
        return read_references(path), "test"
    if not refs:
        raise NmtError("--src needs at least one --ref file to score against.")
    for path in [src, *refs]:
        if not path.is_file():
            raise NmtError(f"File not found: {path}")
    sources = read_lines(src, errors="replace")
    columns = [read_lines(path, errors="replace") for path in refs]
    for path, lines in zip(refs, columns):
        if len(lines) != len(sources):
            raise NmtError(
                f"{path} has {len(lines)} lines but {src} has {len(sources)}: references must be line-aligned."
            )
    references = [[col[i] for col in columns if col[i].strip()] for i in range(len(sources))]
    missing = [i + 1 for i, r in enumerate(references) if not r]
    if missing:
        raise NmtError(f"Line(s) {missing[:10]} of {src} have no reference in any --ref file.")
    return ReferenceSet(sources, references), src.stem


def evaluate(translator: Translator, test_set: ReferenceSet, name: str, checkpoints: list[str]) -> dict:
    """Translate and score ``test_set``; write to <run_dir>/eval/ the hypotheses, the sources they
    translate (line for line), both beside the references (a TSV) and the report."""
    beam_size = translator.decode.beam_size  # the command's decoding settings, whole
    hypotheses = translator.translate(test_set.sources, progress=True)
    report = score(hypotheses, test_set.references)
    report["repeated_words"] = {  # % of sentences with a word repeated back to back
        "hypotheses": round(repeated_word_share(hypotheses), 2),
        "references": round(repeated_word_share([ref for refs in test_set.references for ref in refs]), 2),
    }
    run_dir = translator.loaded.config.run_dir
    report.update({"set": name, "checkpoint": checkpoints, "beam_size": beam_size, "run_dir": run_dir})
    if translator.device.type == "cpu":  # the count search ended with (--threads auto chooses it as it goes)
        report["threads"] = translator.threads.threads
    run = run_paths(translator.loaded.config)
    run.writable(run.eval_hypotheses(name), run.eval_report(name))
    write_lines_atomic(run.eval_hypotheses(name), hypotheses)
    write_lines_atomic(run.eval_sources(name), test_set.sources)  # line for line with the hypotheses
    rows = zip(test_set.sources, hypotheses, test_set.references)
    write_lines_atomic(run.eval_table(name), ("\t".join([src, hyp, *refs]) for src, hyp, refs in rows))
    write_report(translator, name, report)
    return report


def write_report(translator: Translator, name: str, report: dict) -> None:
    """<run_dir>/eval/NAME.report.json."""
    path = run_paths(translator.loaded.config).eval_report(name)
    write_text_atomic(path, json.dumps(report, indent=2, ensure_ascii=False) + "\n")
