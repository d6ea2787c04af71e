"""The GPU tier: ``pytest -m gpu``. Each test runs on every accelerator PyTorch sees (CUDA,
Apple's MPS) and skips with the reason where there is none; the rest of the suite stays on
the CPU (tests/conftest.py).

``NMT_GPU_TIER_ALSO=cpu pytest -m gpu`` runs the same tests on the CPU as well: a check, on a
machine without a GPU, that the tier itself is sound.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.core.device import BF16, FLOAT32, mps_available, select_precision
from nmt.training import trainer as trainer_module

from .helpers import TINY_TRANSFORMER, TRANSFORMER_SCHEDULE, model_config, small_model, write_run_config
from .test_device import batch_of

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()

ACCELERATORS = [
    pytest.param(
        "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU (PyTorch sees none)")
    ),
    pytest.param("mps", marks=pytest.mark.skipif(not mps_available(), reason="no Apple GPU (MPS)")),
]
if os.environ.get("NMT_GPU_TIER_ALSO") == "cpu":
    ACCELERATORS.append(pytest.param("cpu"))

pytestmark = pytest.mark.gpu


ARCHS = ["rnn", "transformer"]


def write_config(tmp_path: Path, name: str, arch: str = "rnn", **train) -> Path:
    """A tiny run of either family (the Transformer with its warm-up schedule); ``train`` updates it."""
    if arch == "transformer":
        return write_run_config(
            tmp_path, name, {"epochs": 2, "batch_size": 16, **TRANSFORMER_SCHEDULE, **train}, TINY_TRANSFORMER
        )
    return write_run_config(tmp_path, name, {"epochs": 2, "batch_size": 16, **train}, {"dropout": 0.2})


def nmt(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def translate(config: str, device: str, source: Path) -> list[str]:
    output = source.with_suffix(f".{device}.out")
    nmt("translate", "--config", config, "--device", device, "--input", str(source), "--output", str(output))
    return output.read_text(encoding="utf-8").splitlines()


def last_checkpoint(tmp_path: Path, name: str) -> dict:
    return torch.load(tmp_path / name / "checkpoints" / "last.pt", map_location="cpu", weights_only=True)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("device", ACCELERATORS)
def test_train_translate_evaluate_end_to_end(tmp_path, device, arch):
    config = str(write_config(tmp_path, "run", arch, epochs=3))
    nmt("train", "--config", config, "--device", device)
    log = (tmp_path / "run" / "train.log").read_text(encoding="utf-8")
    assert f"device {device}" in log
    assert select_precision("auto", torch.device(device)).describe(recurrent=arch == "rnn") in log
    source = tmp_path / "in.txt"
    source.write_text("I see apples.\nwe like tea.\n", encoding="utf-8")
    assert len(translate(config, device, source)) == 2
    assert "BLEU" in nmt("evaluate", "--config", config, "--device", device)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("device", ACCELERATORS)
def test_deterministic_resume_is_bit_exact(tmp_path, device, arch):
    """The Transformer's attention too: its fused kernels' backward is not deterministic, so
    deterministic mode runs the math kernel on CUDA (nmt.core.device.make_deterministic)."""
    straight = str(write_config(tmp_path, "straight", arch, deterministic=True, epochs=2))
    nmt("train", "--config", straight, "--device", device)
    split = str(write_config(tmp_path, "split", arch, deterministic=True, epochs=2))
    nmt("train", "--config", split, "--device", device, "--set", "train.epochs=1")
    nmt("train", "--config", split, "--device", device, "--resume")
    a, b = last_checkpoint(tmp_path, "straight"), last_checkpoint(tmp_path, "split")
    assert a["progress"]["step"] == b["progress"]["step"] > 0
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name


@pytest.mark.parametrize(
    "order", [dict(attention="bahdanau"), dict(attention="luong-concat", input_feeding=True)], ids=["bahdanau", "luong"]
)
@pytest.mark.parametrize("device", ACCELERATORS)
def test_autocast_keeps_recurrences_float32_with_finite_gradients(device, order):
    precision = select_precision("auto", torch.device(device))
    if precision == FLOAT32:
        precision = BF16  # the CPU and MPS train in float32 by default; check autocast there all the same
    model = small_model(**order).to(device)
    model_config(**order)
    batch = batch_of().to(torch.device(device))
    with torch.autocast(device, dtype=precision.autocast):
        memory, state = model.encode(batch.src, batch.src_lengths)
        logits, _ = model(batch.src, batch.src_lengths, batch.tgt_in)
    assert memory.enc_outputs.dtype == state.hidden.dtype == torch.float32
    assert logits.dtype == precision.autocast
    logits.float().logsumexp(-1).sum().backward()
    for name, parameter in model.named_parameters():
        assert torch.isfinite(parameter.grad).all() and parameter.grad.abs().sum() > 0, name


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("device", ACCELERATORS)
def test_a_checkpoint_trained_on_the_gpu_translates_the_same_on_the_cpu(tmp_path, device, arch):
    if arch == "transformer":  # it learns the synthetic pairs in about 40 epochs (tests/test_transformer.py)
        config = str(write_config(tmp_path, "run", arch, epochs=40, patience=0))
        nmt("train", "--config", config, "--device", device)
    else:
        config = str(write_config(tmp_path, "run", epochs=12))
        nmt("train", "--config", config, "--device", device, "--set", "train.learning_rate=0.005")
    source = tmp_path / "in.txt"
    source.write_text("I see apples.\nwe like tea.\nthey eat rice.\nshe wants water.\n", encoding="utf-8")
    on_device = translate(config, device, source)
    assert on_device == translate(config, "cpu", source)
    log = (tmp_path / "run" / "train.log").read_text(encoding="utf-8")
    # it has learned something: no empty translation, not one sentence for every input (an H100 run
    # whose dev BLEU stayed 0.00 kept epoch 1 as its best, and translated all four to "")
    assert all(on_device) and len(set(on_device)) >= 2, log


@pytest.mark.parametrize(
    ("arch", "mode"), [("rnn", "default"), ("rnn", "reduce-overhead"), ("transformer", "reduce-overhead")]
)
@pytest.mark.parametrize("device", ACCELERATORS)
def test_compiled_steps_train_on_the_device(tmp_path, device, arch, mode):
    """reduce-overhead: on CUDA, graphs replayed over batches padded to the graph buckets."""
    if device == "cpu" and not (shutil.which("g++") or shutil.which("c++")):
        pytest.skip("torch.compile on the CPU needs a C++ compiler")
    config = str(write_config(tmp_path, "run", arch, compile=mode, epochs=1))
    nmt("train", "--config", config, "--device", device)
    weights = last_checkpoint(tmp_path, "run")["model"]
    assert all(torch.isfinite(tensor).all() for tensor in weights.values() if tensor.is_floating_point())


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 or more CUDA GPUs")
def test_torchrun_with_nccl_on_every_gpu(tmp_path):
    gpus = torch.cuda.device_count()
    config = write_config(tmp_path, "parallel", batch_size=8, epochs=1, precision="float32")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={gpus}"]
    command += ["-m", "nmt", "train", "--config", str(config), "--device", "cuda", "--set", "model.dropout=0.0"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Data parallel over {gpus} processes" in (tmp_path / "parallel" / "train.log").read_text(encoding="utf-8")
    parallel = last_checkpoint(tmp_path, "parallel")
    assert isinstance(parallel["rng"], list) and len(parallel["rng"]) == gpus  # one random state per rank
    # DDP equals one process with the global batch (within what TF32 and reduction order allow)
    single = str(write_config(tmp_path, "single", batch_size=8 * gpus, epochs=1, precision="float32"))
    nmt("train", "--config", single, "--device", "cuda", "--set", "model.dropout=0.0")
    one = last_checkpoint(tmp_path, "single")
    assert one["progress"]["step"] == parallel["progress"]["step"]
    for name, tensor in one["model"].items():
        assert torch.allclose(tensor, parallel["model"][name], rtol=1e-2, atol=2e-3), name


@pytest.mark.parametrize("device", ACCELERATORS)
def test_the_padded_encoder_runs_on_contiguous_weights_and_equals_the_packed(device, recwarn):
    packed = small_model(rnn_input="packed").to(device)
    padded = small_model(rnn_input="padded").to(device)
    padded.load_state_dict(packed.state_dict())
    batch = batch_of().to(torch.device(device))
    for _ in range(2):  # the second call finds the weights already laid out per direction
        out_padded, final_padded = padded.encoder(batch.src, batch.src_lengths)
    out_packed, final_packed = packed.encoder(batch.src, batch.src_lengths)
    # TF32 keeps 10 mantissa bits: cuDNN's RNN kernels use it by default (torch.backends.cudnn.allow_tf32),
    # whether or not a CLI run before this test in the process switched it on for matrix products
    tolerance = 2e-3 if device == "cuda" else 1e-5
    assert torch.allclose(out_padded, out_packed, atol=tolerance)
    assert torch.allclose(final_padded, final_packed, atol=tolerance)
    assert not [w for w in recwarn if "contiguous chunk of memory" in str(w.message)]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("device", ACCELERATORS)
def test_fp16_with_loss_scaling_trains_on_any_gpu(tmp_path, device, arch):
    """An H100 picks bf16 and never runs the scaler: fp16 is forced here so that its path runs."""
    config = str(write_config(tmp_path, "run", arch, precision="fp16", epochs=2))
    nmt("train", "--config", config, "--device", device)
    assert "fp16 autocast with loss scaling" in (tmp_path / "run" / "train.log").read_text(encoding="utf-8")
    saved = last_checkpoint(tmp_path, "run")
    assert "scaler" in saved and saved["progress"]["step"] > 0
    assert saved["progress"]["nonfinite_steps"] < saved["progress"]["step"]
    assert all(torch.isfinite(t).all() for t in saved["model"].values() if t.is_floating_point())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU (PyTorch sees none)")
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("precision", ["float32", "bf16", "fp16"])
def test_steady_state_training_steps_do_not_sync_the_host(tmp_path, precision, arch):
    """torch.cuda.set_sync_debug_mode("error") raises on any host-device sync in the steps."""
    from nmt.config.files import load_config
    from nmt.pipelines.prepare import prepare
    from nmt.training.trainer import build_trainer

    config = load_config(write_config(tmp_path, "run", arch, precision=precision, loader_workers=0))
    prepare(config, log=lambda _: None)
    trainer = build_trainer(config, torch.device("cuda"), show_bar=False)
    batches = [b.pin_memory() for b in trainer.loader.batches(trainer.data.train, [list(range(16))] * 8)]
    meter = trainer_module.EpochMeter(trainer.progress, trainer.device)
    for number, batch in enumerate(batches, start=1):
        tokens = batch.num_tgt_tokens  # on the CPU batch, as the loop counts them
        if number > 3:  # after warm-up (cuDNN plans, the scaler's first scale)
            torch.cuda.set_sync_debug_mode("error")
        try:
            meter.add(trainer.train_batch(batch, tokens, 1, number, 16), tokens)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    assert meter.grad_norm() > 0


@pytest.mark.parametrize(
    "model",
    [
        dict(rnn="gru", encoder_layers=2, decoder_layers=2),
        dict(rnn="lstm", encoder_layers=2, decoder_layers=2),
        dict(rnn_input="padded"),
        dict(attention="luong-general", input_feeding=False),
    ],
    ids=["gru-2-layers", "lstm-2-layers", "padded-encoder", "luong-without-feeding"],
)
@pytest.mark.parametrize("device", ACCELERATORS)
def test_variants_train_and_translate_on_the_device(tmp_path, device, model):
    config = write_config(tmp_path, "run", epochs=2)
    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    raw["model"].update(model)
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    nmt("train", "--config", str(config), "--device", device)
    source = tmp_path / "in.txt"
    source.write_text("I see apples.\nwe like tea.\n", encoding="utf-8")
    assert len(translate(str(config), device, source)) == 2


@pytest.mark.parametrize("rnn", ["gru", "lstm", "transformer"])
@pytest.mark.parametrize("device", ACCELERATORS)
def test_mid_epoch_resume_with_two_layers_and_dropout_is_exact(tmp_path, monkeypatch, device, rnn):
    """Dropout between stacked encoder layers: on CUDA the encoder runs padded (auto), drawing it
    from PyTorch's generator, which the checkpoint carries (cuDNN's own dropout state it could not).
    The Transformer's dropout on the attention weights and every residual branch likewise."""

    def config(name: str) -> str:
        arch = "transformer" if rnn == "transformer" else "rnn"
        path = write_config(tmp_path, name, arch, deterministic=True, epochs=2, batch_size=8, checkpoint_every=5)
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        if arch == "transformer":
            raw["model"].update(dropout=0.3, attention_dropout=0.3)
        else:
            raw["model"].update(rnn=rnn, encoder_layers=2, decoder_layers=2, dropout=0.3)
        path.write_text(yaml.safe_dump(raw), encoding="utf-8")
        return str(path)

    straight = config("straight")
    nmt("train", "--config", straight, "--device", device)
    split = config("split")
    train_batch = trainer_module.Trainer.train_batch

    def signalled_at_step_7(self, *args):
        if self.progress.step == 6:  # the 7th step is its last
            self.control.signal.signal_name = "SIGTERM"
        return train_batch(self, *args)

    with monkeypatch.context() as patch:
        patch.setattr(trainer_module.Trainer, "train_batch", signalled_at_step_7)
        result = runner.invoke(app, ["train", "--config", split, "--device", device])
    assert result.exit_code == 130, result.output  # stopped mid-epoch 1, as by a signal
    assert last_checkpoint(tmp_path, "split")["progress"]["batch_in_epoch"] == 7
    nmt("train", "--config", split, "--device", device, "--resume")
    a, b = last_checkpoint(tmp_path, "straight"), last_checkpoint(tmp_path, "split")
    assert a["progress"]["step"] == b["progress"]["step"] > 0
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("device", ACCELERATORS)
def test_a_gpu_checkpoint_resumes_training_on_the_cpu(tmp_path, device, arch):
    config = str(write_config(tmp_path, "run", arch, epochs=2))
    nmt("train", "--config", config, "--device", device, "--set", "train.epochs=1")
    nmt("train", "--config", config, "--device", "cpu", "--resume")
    saved = last_checkpoint(tmp_path, "run")
    assert saved["progress"]["epoch"] == 2
    assert all(torch.isfinite(t).all() for t in saved["model"].values() if t.is_floating_point())


# Hugging Face models on the device: an imported Marian or NLLB-200 (M2M100's class) model
# computes and searches there as transformers does there, and fine-tunes there under the
# device's precision; a model trained there in Marian's shape exports to transformers whose
# generate() translates on the device as this toolkit does
HF_MODELS = ["marian-shared", "marian-separate", "nllb"]


class ieee_float32:
    """No TF32 inside: this toolkit's model and transformers' compared in float32 itself."""

    def __enter__(self):
        self.saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False

    def __exit__(self, *exc):
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = self.saved


@pytest.mark.parametrize("kind", HF_MODELS)
@pytest.mark.parametrize("device", ACCELERATORS)
def test_an_imported_hf_model_scores_and_searches_as_transformers_on_the_device(tmp_path, device, kind):
    transformers = pytest.importorskip("transformers")
    from nmt.pipelines.translate import Translator
    from nmt.runtime.loading import load_trained

    from .hf_models import imported
    from .test_huggingface import PAIRS, generated, limit, our_log_probs, their_log_probs

    folder, run, code = imported(tmp_path, kind)
    hf_model = transformers.AutoModelForSeq2SeqLM.from_pretrained(folder).to(device).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    loaded = load_trained(run, torch.device(device))
    with ieee_float32():
        for source, target in PAIRS:
            theirs, ours = (
                their_log_probs(hf_model, tokenizer, source, target),
                our_log_probs(loaded, source, target, device),
            )
            torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-4)
        translator = Translator(loaded)
        sources = [source for source, _ in PAIRS]
        for source, (best,) in zip(sources, translator.search(sources, beam_size=1)):
            most = limit(translator, len(tokenizer(source).input_ids))
            ours = translator.tgt_tok.id_to_piece(best.tokens) + (["</s>"] if best.ended else [])
            if code is None:
                assert ours == generated(hf_model, tokenizer, source, 1, most), source
                continue
            with torch.no_grad():
                ids = hf_model.generate(
                    **tokenizer(source, return_tensors="pt").to(device),
                    forced_bos_token_id=tokenizer.convert_tokens_to_ids(code),
                    num_beams=1,
                    do_sample=False,
                    max_new_tokens=most + 1,  # generate counts the forced code
                )[0, 1:].tolist()
            assert ours == tokenizer.convert_ids_to_tokens(ids), source


@pytest.mark.parametrize("kind", ["marian-separate", "nllb"])
@pytest.mark.parametrize("device", ACCELERATORS)
def test_an_imported_hf_model_fine_tunes_on_the_device(tmp_path, monkeypatch, device, kind):
    """`nmt init --from-hf`, then `nmt train` on the device under its precision (bf16 autocast
    on a recent GPU): the dev loss falls, and the child translates there and on the CPU alike."""
    import json

    from .helpers import synthetic_pairs, write_anki
    from .hf_models import imported

    folder, _, _ = imported(tmp_path / "hf", kind)
    write_anki(tmp_path / "pairs.txt", synthetic_pairs())
    monkeypatch.chdir(tmp_path)
    languages = ["--src-lang", "en", "--tgt-lang", "mr"] if kind == "nllb" else []
    nmt("init", "pairs.txt", "--from-hf", str(folder), *languages, "--to", "ft.yaml")
    nmt("prepare", "--config", "ft.yaml")
    settings = ["train.max_minutes=0", "train.epochs=4", "train.learning_rate=0.003", "train.precision=auto"]
    nmt("train", "--config", "ft.yaml", "--device", device, *[f"--set={setting}" for setting in settings])
    records = [json.loads(line) for line in (tmp_path / "runs" / "ft" / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 4 and records[-1]["dev_loss"] < records[0]["dev_loss"]
    source = tmp_path / "in.txt"
    source.write_text("I see apples.\nwe like tea.\n", encoding="utf-8")
    on_device = translate("ft.yaml", device, source)
    assert len(on_device) == 2 and on_device == translate("ft.yaml", "cpu", source)


@pytest.mark.parametrize("device", ACCELERATORS)
def test_a_model_trained_in_marians_shape_on_the_device_translates_there_in_transformers(tmp_path, device):
    """Post-norm layers and Marian's positions trained on the device (bf16 autocast on a recent
    GPU) and exported with `nmt export --hf`: generate() on the device gives this toolkit's greedy
    translations there."""
    transformers = pytest.importorskip("transformers")
    from nmt.pipelines.translate import Translator
    from nmt.runtime.loading import load_trained

    from .test_huggingface import PAIRS, limit

    config = write_run_config(
        tmp_path,
        "run",
        {"epochs": 6, "batch_size": 16, "precision": "auto", **TRANSFORMER_SCHEDULE},
        {**TINY_TRANSFORMER, "norm": "post", "positions": "marian"},
    )
    nmt("train", "--config", str(config), "--device", device)
    nmt("export", str(tmp_path / "run"), str(tmp_path / "hf"), "--hf")
    hf_model = transformers.AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "hf").to(device).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    loaded = load_trained(tmp_path / "run", torch.device(device))
    loaded.config.decode.no_repeat_span = 0  # generate() has no such rule
    translator = Translator(loaded)
    sources = [source for source, _ in PAIRS]
    with ieee_float32():
        for source, expected in zip(sources, translator.translate(sources, beam_size=1)):
            inputs = tokenizer([source], return_tensors="pt").to(device)
            with torch.no_grad():
                ids = hf_model.generate(
                    **inputs, num_beams=1, max_new_tokens=limit(translator, inputs.input_ids.size(1))
                )
            assert tokenizer.batch_decode(ids, skip_special_tokens=True) == [expected], source
