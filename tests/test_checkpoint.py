"""The checkpoint format: round trip, atomic writes, rotation, safe loading, compatibility, averaging."""

import collections

import pytest
import torch

from nmt.config.paths import RunPaths
from nmt.config.schema import Config
from nmt.core.errors import NmtError
from nmt.runtime.checkpoint import check_compatible, load_checkpoint, save_checkpoint, save_training_checkpoint

from .helpers import model_settings, random_sources, small_model

Point = collections.namedtuple("Point", "x y")  # any class instance: loading it needs unpickling code


def payload_for(model, config: Config) -> dict:
    return {"model": model.state_dict(), "config": config.to_dict(), "spm_sha256": {"src": "a" * 64, "tgt": "b" * 64}}


def test_round_trip_restores_identical_outputs(tmp_path):
    model = small_model(seed=1).eval()
    path = tmp_path / "ckpt" / "last.pt"
    save_checkpoint(path, payload_for(model, Config()))
    assert [p.name for p in path.parent.iterdir()] == ["last.pt"]  # no temp file left behind
    restored = small_model(seed=2).eval()
    restored.load_state_dict(load_checkpoint(path)["model"])
    src, lengths = random_sources(3)
    tgt_in = torch.full((3, 4), 5)
    assert torch.equal(model(src, lengths, tgt_in)[0], restored(src, lengths, tgt_in)[0])


def test_overwrite_is_atomic_and_replaces(tmp_path):
    path = tmp_path / "last.pt"
    save_checkpoint(path, {"step": 1})
    save_checkpoint(path, {"step": 2})
    assert load_checkpoint(path)["step"] == 2


def test_pickled_object_is_refused(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"format_version": 1, "model": {}, "extra": Point(1, 2)}, path)
    with pytest.raises(NmtError, match=r"contains a pickled object \(tests.test_checkpoint.Point\)"):
        load_checkpoint(path)


def test_not_a_checkpoint_and_missing(tmp_path):
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a zip file at all")
    with pytest.raises(NmtError, match="Cannot read checkpoint"):
        load_checkpoint(junk)
    with pytest.raises(NmtError, match="Checkpoint not found"):
        load_checkpoint(tmp_path / "none.pt")


def test_mismatched_vocabulary_and_model_are_refused():
    config = Config()
    payload = payload_for(small_model(), config)
    check_compatible(payload, config, {"src": "a" * 64, "tgt": "b" * 64}, "x.pt")  # matches: no error
    with pytest.raises(NmtError, match=r"tgt SentencePiece model.*different vocabulary"):
        check_compatible(payload, config, {"src": "a" * 64, "tgt": "c" * 64}, "x.pt")
    bigger = Config(model=model_settings(embed_dim=512))
    with pytest.raises(NmtError, match=r"model\.embed_dim: checkpoint has 256, config has 512"):
        check_compatible(payload, bigger, {"src": "a" * 64, "tgt": "b" * 64}, "x.pt")


def test_averaging_two_checkpoints_gives_the_mean_of_their_weights(tmp_path):
    from nmt.runtime.checkpoint import average_checkpoints

    config = Config()
    a, b = small_model(seed=1), small_model(seed=2)
    save_checkpoint(tmp_path / "step-00000001.pt", {**payload_for(a, config), "progress": {"step": 1}})
    save_checkpoint(tmp_path / "step-00000002.pt", {**payload_for(b, config), "progress": {"step": 2}})
    averaged = average_checkpoints([tmp_path / "step-00000001.pt", tmp_path / "step-00000002.pt"])
    for name, tensor in averaged["model"].items():
        assert torch.allclose(tensor, (a.state_dict()[name] + b.state_dict()[name]) / 2)
    assert averaged["progress"]["step"] == 2
    other = Config(model=model_settings(embed_dim=8))
    save_checkpoint(tmp_path / "x.pt", payload_for(small_model(dim=8), other))
    with pytest.raises(NmtError, match="cannot average"):
        average_checkpoints([tmp_path / "x.pt", tmp_path / "step-00000002.pt"])


def test_checkpoint_rotation_keeps_last_k_and_points_last_and_best(tmp_path):
    run = RunPaths(tmp_path)
    for step in range(1, 6):
        save_training_checkpoint(run, {"step": step}, step, keep=2, best=step == 3)
    assert [p.name for p in run.step_checkpoints()] == ["step-00000004.pt", "step-00000005.pt"]
    assert load_checkpoint(run.checkpoint("last"))["step"] == 5
    assert load_checkpoint(run.checkpoint("best"))["step"] == 3  # survives its step file's deletion
    assert not list(run.checkpoints.glob(".*tmp"))
