from pathlib import Path

import pytest
import yaml

from nmt.config.files import load_config
from nmt.config.parsing import config_from_dict, parse_override
from nmt.core.errors import NmtError


def write(tmp_path: Path, raw) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


MINIMAL = {
    "run_dir": "r",
    "data": {"path": "x.txt"},
    "train": {"epochs": 3, "batch_size": 8},
    "decode": {"beam_size": 4},
}


def test_defaults_fill_optional_keys(tmp_path):
    config = load_config(write(tmp_path, MINIMAL))
    assert config.train.epochs == 3 and config.decode.beam_size == 4
    assert config.model.attention == "bahdanau" and config.train.learning_rate == pytest.approx(1e-3)
    assert config.prepared_dir == Path("r") / "data"


def test_run_dir_defaults_to_config_name(tmp_path):
    raw = {k: v for k, v in MINIMAL.items() if k != "run_dir"}
    assert load_config(write(tmp_path, raw)).run_dir == str(Path("runs") / "exp")


def test_unknown_key_names_nearest_valid_key(tmp_path):
    raw = {**MINIMAL, "train": {**MINIMAL["train"], "batchsize": 4}}
    with pytest.raises(NmtError) as err:
        load_config(write(tmp_path, raw))
    assert "train.batchsize" in str(err.value) and "Did you mean 'train.batch_size'" in str(err.value)


def test_unknown_section_is_refused(tmp_path):
    with pytest.raises(NmtError, match=r"Unknown config key 'modle'.*Did you mean 'model'"):
        load_config(write(tmp_path, {**MINIMAL, "modle": {}}))


def test_wrong_type_names_key_value_and_allowed(tmp_path):
    with pytest.raises(NmtError, match=r"'train.batch_size': got 'big', expected an integer"):
        load_config(write(tmp_path, MINIMAL), ["train.batch_size=big"])


def test_bool_is_not_an_integer(tmp_path):
    with pytest.raises(NmtError, match=r"train\.epochs"):
        load_config(write(tmp_path, MINIMAL), ["train.epochs=true"])


def test_choice_lists_allowed_values(tmp_path):
    with pytest.raises(NmtError, match=r"'model.attention': got 'luong-dotty', expected one of 'bahdanau'"):
        load_config(write(tmp_path, MINIMAL), ["model.attention=luong-dotty"])


def test_out_of_range_value(tmp_path):
    with pytest.raises(NmtError, match=r"'model.dropout': got 1.5, expected a number in \[0, 1\)"):
        load_config(write(tmp_path, MINIMAL), ["model.dropout=1.5"])


@pytest.mark.parametrize("missing", ["run_dir", "data.path", "train.epochs", "train.batch_size", "decode.beam_size"])
def test_required_keys(missing):
    import copy

    raw = copy.deepcopy(MINIMAL)
    section, _, key = missing.rpartition(".")
    del (raw[section] if section else raw)[key]
    # training data is required in one of two forms (a TSV file or line-aligned files)
    message = "give the training data as 'data.path'" if missing == "data.path" else f"'{missing}' is required"
    with pytest.raises(NmtError, match=message):
        config_from_dict(raw)


def test_overrides_are_yaml_scalars(tmp_path):
    config = load_config(write(tmp_path, MINIMAL), ["train.learning_rate=5e-4", "data.tgt_lang=fr", "train.epochs=9"])
    assert config.train.learning_rate == pytest.approx(5e-4)
    assert config.data.tgt_lang == "fr" and config.train.epochs == 9


def test_override_without_equals_is_refused():
    with pytest.raises(NmtError, match="KEY=VALUE"):
        parse_override("train.epochs")


def test_int_widens_to_float(tmp_path):
    assert load_config(write(tmp_path, MINIMAL), ["train.learning_rate=1"]).train.learning_rate == 1.0


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(NmtError, match="not found"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("data: [unclosed", encoding="utf-8")
    with pytest.raises(NmtError, match="not valid YAML"):
        load_config(bad)


def test_section_must_be_mapping(tmp_path):
    with pytest.raises(NmtError, match="section 'train' must be a mapping"):
        load_config(write(tmp_path, {**MINIMAL, "train": [1, 2]}))


def test_shipped_configs_load():
    root = Path(__file__).resolve().parents[1] / "configs"
    for path in root.glob("*.yaml"):
        assert load_config(path).data.path


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["model.attention=none", "model.attention_window=local-p"], "model.attention 'none' cannot be windowed"),
        (["model.attention=bahdanau", "model.input_feeding=true"], "input_feeding=true is Luong"),
        (["model.attention=none", "model.lexical=true"], "model.lexical=true reads the source words .* has none"),
        (["model.attention=luong-dot", "model.decoder_hidden=100"], "must equal 2 x model.encoder_hidden"),
        (  # a setting to copy, as every other config error gives
            ["model.attention=luong-dot", "model.encoder_hidden=64", "model.decoder_hidden=100"],
            r"--set model\.decoder_hidden=128, or --set model\.encoder_hidden=50\.",
        ),
        (["model.attention_window=local"], "expected one of 'global', 'local-m', 'local-p'"),
        (["model.attention=luong"], "'luong-dot', 'luong-general', 'luong-concat', 'hard', 'none'"),
        (["model.window_width=0"], "model.window_width"),
    ],
)
def test_impossible_attention_combinations_are_refused(tmp_path, overrides, message):
    with pytest.raises(NmtError, match=message):
        load_config(write(tmp_path, MINIMAL), overrides)


def test_valid_attention_combinations_load(tmp_path):
    config = load_config(
        write(tmp_path, MINIMAL),
        [
            "model.attention=luong-general",
            "model.input_feeding=true",
            "model.attention_window=local-p",
            "model.window_width=10",
        ],
    )
    assert config.model.input_feeding and config.model.window_width == 10


REMOVED = {
    "train.curriculum_epochs": (1.0, "lost 0.9 test BLEU on eng-mar"),
    "train.concat_pairs": (0.25, "gained nothing on eng-mar"),
    "data.lexicon": ("glossary.tsv", "lost 3.3 test BLEU on eng-hin"),
    "data.synthetic_keep": (0.5, "lost 1.8 test BLEU"),
    "data.synthetic_noise": (0.1, "lost 1.8 test BLEU"),
}


@pytest.mark.parametrize("key", REMOVED)
def test_a_removed_key_is_refused_with_what_it_measured_unless_at_its_old_default(tmp_path, key):
    """Keys a study measured as losses are gone; a config that sets one is told why, and every
    run's config.yaml (which wrote each at its default) still loads."""
    from nmt.config.measured import removed_keys
    from nmt.runtime.loading import load_run_config

    value, measured = REMOVED[key]
    section, name = key.split(".")
    raw = {**MINIMAL, section: {**MINIMAL.get(section, {}), name: value}}
    with pytest.raises(NmtError, match=rf"Config key '{key}' was removed: .*{measured}"):
        config_from_dict(raw)
    raw[section][name] = removed_keys()[key].default  # as a saved config.yaml wrote it
    assert config_from_dict(raw).run_dir
    raw[section][name] = value  # a run trained with it still translates
    (tmp_path / "run").mkdir(exist_ok=True)
    (tmp_path / "run" / "config.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert not hasattr(load_run_config(tmp_path / "run").data, "lexicon")
