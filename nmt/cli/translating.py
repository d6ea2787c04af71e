"""``nmt translate``, ``score``, ``align`` and ``evaluate``: a trained model over sentences."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer

from nmt.cli.common import (
    PLOT_SUFFIXES,
    PLOT_SUFFIXES_BY_NAME,
    BeamOption,
    CheckpointsOption,
    DeviceOption,
    EngineOption,
    ModelOption,
    NBestOption,
    OptionalConfigOption,
    PlotAttentionOption,
    SetOption,
    TgtLangOption,
    ThreadsOption,
    command_config,
    open_translator,
    user_errors,
    write_output,
)
from nmt.core.errors import NmtError


@user_errors
def translate(
    config: OptionalConfigOption = None,
    set_: SetOption = None,
    checkpoint: CheckpointsOption = None,
    model: ModelOption = None,
    input_: Annotated[
        Path | None, typer.Option("--input", "-i", help="Text file, one sentence per line (default: stdin).")
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Where to write translations (default: stdout).")
    ] = None,
    text: Annotated[
        list[str] | None,
        typer.Option("--text", help="Translate this sentence instead of a file; repeat for several, in order."),
    ] = None,
    beam_size: BeamOption = None,
    plot_attention: PlotAttentionOption = None,
    plot_count: Annotated[int, typer.Option("--plot-count", min=1, help="How many sentences to plot.")] = 5,
    plot_format: Annotated[
        str, typer.Option("--plot-format", help="png, svg or pdf: the heatmaps' format in a --plot-attention folder.")
    ] = "png",
    n_best: NBestOption = None,
    device: DeviceOption = None,
    engine: EngineOption = "torch",
    tgt_lang: TgtLangOption = None,
    threads: ThreadsOption = "auto",
) -> None:
    """Translate text: exactly one output line per input line (an empty line gives an empty line).

    Sentences are batched by length and the original order is restored. Greedy (--beam-size 1) or
    beam search with length normalisation (decode.length_penalty). With --n-best K: K lines per
    input line instead, "number<TAB>score<TAB>translation" (score: the ranking score of search).
    """
    from nmt.pipelines.translate import read_input_lines

    if text and input_ is not None:
        raise NmtError("Give either --text or --input, not both.")
    translator = open_translator(config, set_, checkpoint, model, device, engine, tgt_lang, beam_size, threads)
    lines = list(text) if text else read_input_lines(str(input_) if input_ else None)
    if n_best is None:
        written = translator.translate(lines, progress=input_ is not None)
    else:
        found = translator.search(lines, n_best=n_best, progress=input_ is not None)
        written = [
            f"{number}\t{hypothesis.score:.4f}\t{translator.detokenize(hypothesis)}"
            for number, hypotheses in enumerate(found, 1)
            for hypothesis in hypotheses
        ]
    write_output(written, output)
    if plot_attention is not None:
        _plot_attention(translator, lines, plot_attention, plot_count, plot_format)


@user_errors
def score(
    config: OptionalConfigOption = None,
    set_: SetOption = None,
    checkpoint: CheckpointsOption = None,
    model: ModelOption = None,
    src: Annotated[Path, typer.Option("--src", help="Source sentences, one per line.")] = ...,  # type: ignore[assignment]
    tgt: Annotated[Path, typer.Option("--tgt", help="Their translations, line-aligned with --src.")] = ...,  # type: ignore[assignment]
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Where to write (default: stdout).")] = None,
    device: DeviceOption = None,
) -> None:
    """Forced decoding: how probable the model finds given translations of given sources.

    One TSV line per pair: total log-probability (natural log, <eos> included), log-probability
    per subword, subwords (+ <eos>). The corpus perplexity goes to stderr.
    """
    from nmt.pipelines.translate import read_input_lines

    sources, targets = read_input_lines(str(src)), read_input_lines(str(tgt))
    if len(sources) != len(targets):
        raise NmtError(f"{src} has {len(sources)} lines but {tgt} has {len(targets)}: they must be line-aligned.")
    translator = open_translator(config, set_, checkpoint, model, device)
    scored = translator.score(sources, targets, progress=True)
    counts = [len(h.token_logprobs) for h in scored]
    write_output([f"{h.log_prob:.4f}\t{h.log_prob / n:.4f}\t{n}" for h, n in zip(scored, counts)], output)
    total = sum(h.log_prob for h in scored)
    typer.echo(
        f"{len(scored)} pairs, {sum(counts)} subwords: log-probability {total:.2f}, "
        f"perplexity {math.exp(-total / max(1, sum(counts))):.2f}",
        err=True,
    )


def _plot_attention(translator, lines: list[str], target: Path, count: int, image_format: str = "png") -> None:
    """Heatmaps of the first ``count`` non-empty lines: into a folder, or one file for one sentence."""
    from nmt.core.plotting import plot_attention

    if image_format not in PLOT_SUFFIXES_BY_NAME:
        raise NmtError(f"--plot-format: got {image_format!r}, expected one of {', '.join(PLOT_SUFFIXES_BY_NAME)}.")

    from nmt.core.registry import ARCHITECTURES

    model = translator.loaded.config.model
    if not ARCHITECTURES[model.arch].shows_attention(model):
        family = ARCHITECTURES[model.arch]
        typer.echo(f"The model ({family.summary(model)}) has no attention weights to plot.", err=True)
        return
    single_file = target.suffix.lower() in PLOT_SUFFIXES
    if single_file and len(lines) != 1:
        raise NmtError(
            f"--plot-attention {target} names one file; use it with --text, or give a folder for a file of lines."
        )
    numbered = [(number, line) for number, line in enumerate(lines, 1) if line.strip()][:count]
    heatmaps = translator.heatmaps([line for _, line in numbered])
    for (number, _), heatmap in zip(numbered, heatmaps):
        path = target if single_file else target / f"attention_{number:04d}.{image_format}"
        plot_attention(
            heatmap.src_labels,
            heatmap.tgt_labels,
            heatmap.weights,
            path,
            title=f"{heatmap.source}\n{heatmap.translation}",
        )
    typer.echo(f"Wrote {len(heatmaps)} attention heatmap(s) to {target}", err=True)


@user_errors
def align(
    source: Annotated[Path, typer.Option("--src", help="The source sentences, one a line.")],
    target: Annotated[
        Path | None,
        typer.Option("--tgt", help="Their translations, one a line (default: the model's own, written beside)."),
    ] = None,
    config: OptionalConfigOption = None,
    set_: SetOption = None,
    checkpoint: CheckpointsOption = None,
    model: ModelOption = None,
    aligner: Annotated[
        str, typer.Option("--aligner", help="model (its attention) or eflomal (the reference aligner).")
    ] = "model",
    layer: Annotated[
        int | None, typer.Option("--layer", help="A Transformer's decoder layer to read (default: its aligning layer).")
    ] = None,
    heads: Annotated[
        str, typer.Option("--heads", help="A Transformer's heads to average, e.g. 0,2 (default: all).")
    ] = "",
    step: Annotated[
        str,
        typer.Option(
            "--step", help="produced (the step that emits a target word) or input (the step it is fed: Shift-Att)."
        ),
    ] = "produced",
    reference: Annotated[
        Path | None,
        typer.Option("--reference", help="A Pharaoh file to score against (AER, precision, recall on stderr)."),
    ] = None,
    device: DeviceOption = None,
) -> None:
    """Write word alignments in the Pharaoh format (i-j: source word i, target word j), one line per
    sentence pair: from the model's attention under forced decoding, or (--aligner eflomal) from the
    reference aligner run both ways over the pairs and the run's training pairs. Without --tgt, the
    model translates first and each line is "translation ||| links". Words are whitespace-separated."""
    from nmt.data.alignments import read_links
    from nmt.pipelines.align import align_pairs, gold_agreement
    from nmt.pipelines.translate import read_input_lines

    sources = read_input_lines(str(source))
    targets = read_input_lines(str(target)) if target is not None else None
    if targets is not None and len(targets) != len(sources):
        raise NmtError(f"{source} has {len(sources)} lines and {target} {len(targets)}: give one translation a line.")
    gold = read_links(reference, len(sources)) if reference is not None else None  # before any work
    written, found = align_pairs(
        aligner,
        sources,
        targets,
        translator=lambda: open_translator(config, set_, checkpoint, model, device),
        training=lambda: _training_pairs(config, set_),
        layer=layer,
        heads=heads,
        step=step,
    )
    if gold is not None:
        typer.echo(gold_agreement(gold, sources, targets, written, found, str(reference)), err=True)
    write_output(written, None)


def _training_pairs(config: Path | None, set_: list[str] | None) -> tuple[list[str], list[str]]:
    """The prepared training pairs of --config's run, for eflomal's statistics (none without one)."""
    if config is None:
        return [], []
    from nmt.pipelines.align import training_pairs

    pairs = training_pairs(command_config(config, set_))
    if not pairs[0]:
        raise NmtError(f"{config}'s run has no prepared training pairs: run nmt prepare --config {config} first.")
    return pairs


@user_errors
def evaluate(
    config: OptionalConfigOption = None,
    set_: SetOption = None,
    checkpoint: CheckpointsOption = None,
    model: ModelOption = None,
    src: Annotated[
        Path | None, typer.Option("--src", help="Source file to translate (default: the prepared test split).")
    ] = None,
    ref: Annotated[
        list[Path] | None,
        typer.Option(
            "--ref",
            help="Reference file, line-aligned with --src; repeat for several references (an empty line = none).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")] = False,
    align: Annotated[
        bool,
        typer.Option(
            "--align", help="Also hold the model's attention against eflomal's word alignments of the pairs (AER)."
        ),
    ] = False,
    beam_size: BeamOption = None,
    device: DeviceOption = None,
    engine: EngineOption = "torch",
    threads: ThreadsOption = "auto",
) -> None:
    """Translate a test set and score it with sacrebleu (BLEU, chrF, TER) against all references.

    Scores are computed on detokenized text. To <run_dir>/eval/ go the translations (NAME.hyp), the
    sources they translate line for line (NAME.src), both beside the references (NAME.tsv) and a
    JSON report. With --align, the word alignments of every (source, reference) pair by the model's
    attention and by eflomal (NAME.model.align, NAME.eflomal.align) and their agreement.
    """
    from nmt.config.paths import run_paths
    from nmt.pipelines.evaluate import evaluate as run_evaluate
    from nmt.pipelines.evaluate import evaluation_set
    from nmt.pipelines.evaluate import write_report as run_evaluate_report

    if align:
        from nmt.data.alignments import require_eflomal

        require_eflomal("nmt evaluate --align")  # before anything is translated
    translator = open_translator(config, set_, checkpoint, model, device, engine, beam_size=beam_size, threads=threads)
    cfg = translator.loaded.config
    test_set, name = evaluation_set(cfg, src, ref or [])
    report = run_evaluate(translator, test_set, name, checkpoint or ["best"])
    if align:
        from nmt.pipelines.align import alignment_agreement, training_pairs

        report["alignment"] = alignment_agreement(translator, test_set, name, training_pairs(cfg))
        run_evaluate_report(translator, name, report)
    if as_json:
        typer.echo(json.dumps(report, ensure_ascii=False))
        return
    _print_report(report, name, run_paths(cfg).eval_dir)


def _print_report(report: dict, name: str, eval_dir: Path) -> None:
    """``nmt evaluate``'s report, as people read it."""
    references = "1 reference" if report["num_references"] == 1 else f"up to {report['num_references']} references"
    typer.echo(f"{name}: {report['num_sentences']} sentences, {references} each")
    for metric in ("bleu", "chrf", "ter"):
        typer.echo(f"{metric.upper():5s} {report[metric]:6.2f}   {report['signature'][metric]}")
    repeats = report["repeated_words"]
    typer.echo(
        f"Outputs with a word repeated back to back: {repeats['hypotheses']:.1f} % "
        f"(references: {repeats['references']:.1f} %)"
    )
    if "alignment" in report:
        found = report["alignment"]
        typer.echo(
            f"Attention against eflomal's word alignments: AER {found['aer']:.3f}, precision "
            f"{found['precision']:.3f}, recall {found['recall']:.3f} ({found['sentences']:,} pairs)"
        )
    typer.echo(f"Hypotheses and report in {eval_dir}")
