"""The one place a command's ``Translator`` is made: from a run's checkpoints (``--config``) or
from model packages (``--model``), on an engine, with the command's decoding settings and CPU
threads. The command line parses its options and calls ``open_translator``; so can code."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from nmt.config.files import load_config
from nmt.config.parsing import decoding_settings
from nmt.config.paths import CHECKPOINT_NAMES, run_paths
from nmt.core.device import prepare_device
from nmt.core.errors import NmtError
from nmt.core.threads import DECODING, make_tuner, parse_setting
from nmt.pipelines.translate import Translator
from nmt.runtime.loading import check_engine, load_checkpoints, load_packages


def open_translator(
    config: Path | None,
    overrides: list[str] | None,
    checkpoints: list[str] | None,
    models: list[Path] | None,
    device: str | None,
    engine: str = "torch",
    tgt_lang: str | None = None,
    beam_size: int | None = None,
    threads: str = "auto",
    say: Callable[[str], None] | None = None,
) -> Translator:
    """A Translator from ``config`` (+ ``checkpoints``, default best) or from ``models``
    (packages), into ``tgt_lang``. Its decoding settings are made in one place: the config's (a
    package's own, or ``config``'s with every override), then ``decode.*`` overrides for a package,
    then ``beam_size``. Its CPU threads (``threads``): a count is set before the model loads, which
    onnxruntime reads; auto paces PyTorch's decoding steps. ``say`` hears of a thread count that had
    to be capped (auto's choices are not worth a line before a translation's output)."""
    check_engine(engine)
    setting = parse_setting(threads, "--threads")
    said = say if setting != "auto" else None
    if models:
        if config is not None or checkpoints:
            raise NmtError(
                "--model carries its own config and weights: give --model alone (with --set decode.KEY=VALUE to "
                "change how it decodes), not with --config or --checkpoint."
            )
        chosen = prepare_device(device or "auto")
        paced = engine == "torch" or setting != "auto"  # another engine's auto threads are its own
        tuner = make_tuner(setting, chosen, settings=DECODING, say=said) if paced else None
        loaded = load_packages(models, chosen, engine)
        return Translator(loaded, tgt_lang, decoding_settings(loaded.config.decode, overrides, beam_size), tuner)
    if engine != "torch":
        raise NmtError(f"--engine {engine} runs model packages: give --model PKG (nmt export RUN PKG).")
    if config is None:
        raise NmtError("Give --config FILE (the training config), or --model DIR (a package from `nmt export`).")
    cfg = load_config(config, overrides or [])
    chosen = prepare_device(device or cfg.train.device)
    tuner = make_tuner(setting, chosen, settings=DECODING, say=said)
    loaded = load_checkpoints(cfg, checkpoints or ["best"], chosen)
    return Translator(loaded, tgt_lang, decoding_settings(cfg.decode, beam_size=beam_size), tuner)


def open_trained(
    paths: Path | str | list[Path | str],
    engine: str = "torch",
    device: str | None = None,
    checkpoint: str = "best",
    tgt_lang: str | None = None,
    threads: str = "auto",
) -> Translator:
    """A Translator of what ``paths`` name, each a run folder, a model package or a config file
    (its run); several: one ensemble, of packages or of runs of one config (and one vocabulary)."""
    given = [Path(path) for path in (paths if isinstance(paths, list) else [paths])]
    if not given:
        raise NmtError("Give a run folder, a model package or a config file to load.")
    kinds = {_kind(path) for path in given}
    if kinds == {"package"}:
        return open_translator(None, None, None, given, device, engine, tgt_lang, threads=threads)
    if "package" in kinds:
        raise NmtError("An ensemble is of packages or of runs, not both: export the runs (nmt export RUN PKG).")
    configs = [path if _kind(path) == "config" else path / "config.yaml" for path in given]
    names = [checkpoint] if len(configs) == 1 else [str(_run_checkpoint(c, checkpoint)) for c in configs]
    return open_translator(configs[0], None, names, None, device, engine, tgt_lang, threads=threads)


def _kind(path: Path) -> str:
    """package, run or config: what ``path`` is, or an error naming what it is not."""
    if (path / "manifest.json").is_file():
        return "package"
    if (path / "config.yaml").is_file():
        return "run"
    if path.is_file() and path.suffix in (".yaml", ".yml"):
        return "config"
    raise NmtError(
        f"{path} is neither a run folder (config.yaml and checkpoints/), a model package (manifest.json, from "
        "`nmt export`) nor a config file (.yaml)."
    )


def _run_checkpoint(config: Path, name: str) -> Path:
    """The checkpoint file ``name`` (best, last or a path) of ``config``'s run."""
    if name not in CHECKPOINT_NAMES:
        return Path(name)
    cfg = load_config(config)  # a run's own config.yaml reads its run where it is now
    return run_paths(cfg).checkpoint(name)
