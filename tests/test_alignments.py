"""Word alignments: Pharaoh files, agreement (AER), subwords to words, the model's attention under
forced decoding, eflomal as the reference, and `nmt align` from the command line."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.config.files import load_config
from nmt.core.errors import NmtError
from nmt.data.alignments import (
    Links,
    agreement,
    check_links_fit,
    grow_diag_final_and,
    parse_links,
    read_links,
    word_links,
    word_of_pieces,
)
from nmt.data.batching import source_tensor
from nmt.data.tokenizer import BOS_ID
from nmt.pipelines.align import model_alignments, target_ids
from nmt.pipelines.translate import Translator
from nmt.runtime.loading import load_checkpoints

from .helpers import synthetic_pairs, tiny_config, write_anki

runner = CliRunner()


# ---- the format and the scores ----


def test_pharaoh_lines_parse_back_with_sure_and_possible_links():
    links = parse_links("0-0 2?1 1-2 2-1")
    assert links.sure == {(0, 0), (1, 2), (2, 1)} and links.possible == {(0, 0), (1, 2), (2, 1)}
    maybe = parse_links("0-0 1?1")
    assert maybe.sure == {(0, 0)} and maybe.possible == {(0, 0), (1, 1)}
    assert parse_links(maybe.pharaoh()) == maybe and maybe.pharaoh() == "0-0 1?1"
    assert parse_links("") == Links()
    with pytest.raises(NmtError, match=r"gold\.txt:3: '0:1' is not a link"):
        parse_links("0:1", "gold.txt:3")


def test_a_bad_pharaoh_file_names_its_line(tmp_path):
    path = tmp_path / "gold.txt"
    path.write_text("0-0\n0-1 x\n", encoding="utf-8")
    with pytest.raises(NmtError, match=r"gold\.txt:2: 'x' is not a link"):
        read_links(path)


def test_aer_precision_and_recall_as_och_and_ney_count_them():
    """Hand-computed: reference S = {0-0, 1-1}, P = S + {1-2}; hypothesis A = {0-0, 1-2, 2-2}.
    |A∩S| = 1, |A∩P| = 2: precision 2/3, recall 1/2, AER = 1 - (1 + 2) / (3 + 2) = 0.4."""
    reference = Links({(0, 0), (1, 1)}, {(1, 2)})
    scored = agreement([reference], [Links({(0, 0), (1, 2), (2, 2)})])
    assert scored.precision == pytest.approx(2 / 3) and scored.recall == pytest.approx(1 / 2)
    assert scored.aer == pytest.approx(0.4)
    assert agreement([reference], [Links({(0, 0), (1, 1)})]).aer == 0.0  # the sure links alone: perfect
    # summed over the corpus before dividing, not averaged per sentence
    two = agreement([reference, Links({(0, 0)})], [Links({(0, 0), (1, 2), (2, 2)}), Links({(0, 0)})])
    assert two.aer == pytest.approx(1 - (2 + 3) / (4 + 3))
    with pytest.raises(NmtError, match="2 reference alignments but 1"):
        agreement([reference, reference], [reference])


def test_subwords_map_back_to_whitespace_words():
    pieces = ["▁Where", "▁is", "▁the", "▁sta", "tion", "?", "<eos>"]
    assert word_of_pieces(pieces, {"<eos>"}) == [0, 1, 2, 3, 3, 3, None]
    # a lone ▁ starts a word its next piece continues; a tag belongs to no word; bytes continue
    assert word_of_pieces(["<2hi>", "▁", "स्ट", "<0xE0>", "▁", "?"], {"<2hi>"}) == [None, 0, 0, 0, 1, 1]
    assert word_of_pieces(["ab", "▁cd"]) == [0, 1]  # a first piece without ▁ still starts word 0


def test_word_links_sum_subwords_and_link_each_target_word_to_its_strongest_source_word():
    # source: "▁sta tion ▁here <eos>" = words 0 0 1 -; target: "▁a ▁b c" = words 0 1 1
    attention = np.array(
        [
            [0.3, 0.3, 0.4, 0.0],  # target word 0: 0.6 on source word 0 (split) against 0.4
            [0.1, 0.0, 0.2, 0.7],  # the mass on <eos> counts for nothing
            [0.0, 0.1, 0.2, 0.7],  # target word 1 over its two subwords: 0.2 against 0.4 -> source word 1
        ]
    )
    links = word_links(attention, [0, 0, 1, None], [0, 1, 1])
    assert links.sure == {(0, 0), (1, 1)}


def test_grow_diag_final_and_as_moses_symmetrises():
    forward = Links({(0, 0), (1, 1), (2, 1)})
    backward = Links({(0, 0), (1, 1), (2, 2)})
    # the intersection {0-0, 1-1}; 2-1 and 2-2 are neighbours of 1-1 whose source word 2 is unaligned:
    # the first grown in order (2-1) aligns source 2, then 2-2 still aligns target 2
    assert grow_diag_final_and(forward, backward).sure == {(0, 0), (1, 1), (2, 1), (2, 2)}
    # a link neither neighbours the intersection: kept at the end only where both its words are unaligned
    assert grow_diag_final_and(Links({(0, 0), (3, 3)}), Links({(0, 0)})).sure == {(0, 0), (3, 3)}
    assert grow_diag_final_and(Links({(0, 0), (0, 3)}), Links({(0, 0)})).sure == {(0, 0)}


# ---- a model's attention, and eflomal ----


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict:
    """A tiny RNN trained on 'S V O.' -> 'S O V.': its true alignment is known."""
    root = tmp_path_factory.mktemp("align")
    pairs = synthetic_pairs()
    raw = tiny_config(root, write_anki(root / "pairs.tsv", pairs), run_dir=str(root / "run"), train={"epochs": 12})
    config = root / "c.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    result = runner.invoke(app, ["train", "--config", str(config)])
    assert result.exit_code == 0, result.output
    distinct = sorted(set(pairs))
    sources, targets = [s for s, _ in distinct], [t for _, t in distinct]
    (root / "src.txt").write_text("\n".join(sources) + "\n", encoding="utf-8")
    (root / "tgt.txt").write_text("\n".join(targets) + "\n", encoding="utf-8")
    gold = [Links({(0, 0), (1, 2), (2, 1)}) for _ in distinct]  # S V O. -> S O V.
    (root / "gold.txt").write_text("\n".join(links.pharaoh() for links in gold) + "\n", encoding="utf-8")
    return {"config": config, "root": root, "sources": sources, "targets": targets, "gold": gold}


def translator_of(trained) -> Translator:
    config = load_config(trained["config"])
    return Translator(load_checkpoints(config, ["best"], torch.device("cpu")), None, config.decode)


def test_forced_alignment_is_the_teacher_forced_attentions_argmax(trained):
    translator = translator_of(trained)
    sources, targets = trained["sources"], trained["targets"]
    ids = target_ids(translator, targets)
    found = model_alignments(translator, sources, ids)
    # by hand, for one pair: the teacher-forced pass, each target word's rows summed, argmax per word
    src_ids = translator.source_ids([sources[0]])
    src, lengths = source_tensor(src_ids)
    tgt_in = torch.tensor([[BOS_ID, *ids[0]]])
    model = translator.model.eval()
    with torch.no_grad():
        _, attention = model(src, lengths, tgt_in)
    words_src = word_of_pieces([*translator.src_tok.id_to_piece(src_ids[0]), "<eos>"], {"<eos>"})
    words_tgt = word_of_pieces(translator.tgt_tok.id_to_piece(ids[0]))
    assert found[0] == word_links(attention[0, : len(ids[0])].numpy(), words_src, words_tgt)
    # every target word linked once, to a source word the sentence has
    for source, target, links in zip(sources, targets, found):
        assert sorted(j for _, j in links.sure) == list(range(len(target.split())))
        assert all(0 <= i < len(source.split()) for i, _ in links.sure)


def test_a_transformer_aligns_from_the_layer_and_heads_asked_for_and_refuses_others(tmp_path):
    from nmt.model.transformer.model import Transformer

    from .helpers import TINY_TRANSFORMER, model_config

    torch.manual_seed(0)
    model = Transformer(model_config(**TINY_TRANSFORMER), 20, 20).eval()
    src, lengths = source_tensor([[5, 6, 7], [8, 9]])
    tgt_in = torch.tensor([[BOS_ID, 4, 5], [BOS_ID, 6, 0]])
    with torch.no_grad():
        every = model.decoder.cross_weights(tgt_in, model.decoder.memory(model.encoder(src, src.ne(0)), src.ne(0)))
        assert model.cross_attention(src, lengths, tgt_in).shape == (2, 3, 4)
        assert torch.allclose(model.cross_attention(src, lengths, tgt_in), every[-2].mean(1))  # the penultimate
        assert torch.allclose(model.cross_attention(src, lengths, tgt_in, layer=1, heads=[2]), every[1][:, 2])
    with pytest.raises(NmtError, match="layer must be from -2 to 1"):
        model.cross_attention(src, lengths, tgt_in, layer=2)
    with pytest.raises(NmtError, match="heads must be from 0 to 3"):
        model.cross_attention(src, lengths, tgt_in, heads=[4])


def test_eflomal_recovers_a_fixed_reordering():
    pytest.importorskip("eflomal")
    from nmt.data.alignments import eflomal_alignments

    rng = random.Random(0)
    sources, targets, gold = [], [], []
    for _ in range(400):
        words = [f"s{rng.randint(0, 39)}" for _ in range(rng.randint(3, 8))]
        sources.append(" ".join(words))
        targets.append(" ".join(f"t{w[1:]}" for w in reversed(words)))  # word for word, reversed
        gold.append(Links({(i, len(words) - 1 - i) for i in range(len(words))}))
    assert agreement(gold, eflomal_alignments(sources, targets)).aer < 0.1


def test_nmt_align_writes_pharaoh_scores_against_a_reference_and_aligns_its_own_translations(trained):
    root, config = trained["root"], str(trained["config"])
    given = runner.invoke(
        app,
        [
            "align",
            "--config",
            config,
            "--src",
            str(root / "src.txt"),
            "--tgt",
            str(root / "tgt.txt"),
            "--reference",
            str(root / "gold.txt"),
        ],
    )
    assert given.exit_code == 0, given.output
    lines = given.stdout.splitlines()
    assert len(lines) == len(trained["sources"]) and [parse_links(line) for line in lines]
    assert "AER " in given.stderr and "AER" not in given.stdout  # stdout: the links alone
    own = runner.invoke(app, ["align", "--config", config, "--src", str(root / "src.txt")])
    assert own.exit_code == 0, own.output
    translation, links = own.stdout.splitlines()[0].split(" ||| ")
    assert translation and all(j < len(translation.split()) for _, j in parse_links(links).sure)
    uneven = root / "short.txt"
    uneven.write_text("one line\n", encoding="utf-8")
    refused = runner.invoke(app, ["align", "--config", config, "--src", str(root / "src.txt"), "--tgt", str(uneven)])
    assert refused.exit_code == 1 and "give one translation a line" in refused.stderr


def test_the_reference_aligner_from_the_command_line_uses_the_runs_training_pairs(trained):
    pytest.importorskip("eflomal")
    root = trained["root"]
    result = runner.invoke(
        app,
        [
            "align",
            "--aligner",
            "eflomal",
            "--config",
            str(trained["config"]),
            "--src",
            str(root / "src.txt"),
            "--tgt",
            str(root / "tgt.txt"),
            "--reference",
            str(root / "gold.txt"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) == len(trained["sources"])
    assert agreement(trained["gold"], [parse_links(line) for line in result.stdout.splitlines()]).aer < 0.2
    without = runner.invoke(app, ["align", "--aligner", "eflomal", "--src", str(root / "src.txt")])
    assert without.exit_code == 1 and "give --tgt" in without.stderr


def test_an_rnn_without_attention_weights_is_refused(tmp_path):
    from .helpers import small_model

    model = small_model(attention="none")
    src, lengths = source_tensor([[5, 6]])
    with pytest.raises(NmtError, match="no weights over the source"):
        model.cross_attention(src, lengths, torch.tensor([[BOS_ID, 4]]))


def test_evaluate_align_reports_the_agreement_and_keeps_the_reference_once(trained, monkeypatch):
    pytest.importorskip("eflomal")
    from nmt.data import alignments as alignments_module

    config = str(trained["config"])
    first = runner.invoke(app, ["evaluate", "--config", config, "--align"])
    assert first.exit_code == 0, first.output
    assert "Attention against eflomal's word alignments: AER" in first.stdout
    run = Path(load_config(trained["config"]).run_dir) / "eval"
    report = json.loads((run / "test.report.json").read_text(encoding="utf-8"))
    assert set(report["alignment"]) >= {"aer", "precision", "recall", "reference"}
    pairs = sum(1 for _ in (run / "test.tsv").read_text(encoding="utf-8").splitlines())
    kept = read_links(run / "test.eflomal.align")
    assert len(kept) == len(read_links(run / "test.model.align")) >= pairs  # a line per (source, reference)

    def refuse(*args, **kwargs):
        raise AssertionError("eflomal ran again")

    monkeypatch.setattr(alignments_module, "eflomal_alignments", refuse)
    again = runner.invoke(app, ["evaluate", "--config", config, "--align", "--json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["alignment"] == report["alignment"]


def test_a_transformers_alignment_view_gives_each_heads_agreement(tmp_path):
    pytest.importorskip("eflomal")
    from nmt.config.schema import Config, DecodeConfig
    from nmt.model.transformer.model import Transformer
    from nmt.pipelines.align import sentence_alignment
    from nmt.runtime.loading import LoadedModel

    from .helpers import COPY_WORDS, TINY_TRANSFORMER, copy_translator, model_config

    copying = copy_translator(tmp_path, steps=1)  # its word tokenizer
    tok = copying.src_tok
    torch.manual_seed(0)
    config = Config(run_dir=str(tmp_path), model=model_config(**TINY_TRANSFORMER), decode=DecodeConfig(beam_size=2))
    model = Transformer(config.model, tok.vocab_size, tok.vocab_size).eval()
    translator = Translator(LoadedModel(config, model, tok, tok, torch.device("cpu")))
    rng = random.Random(0)
    pairs = [" ".join(rng.choice(COPY_WORDS) for _ in range(rng.randint(3, 6))) for _ in range(300)]
    target = tok.encode(["golf alpha bravo"])[0]
    found = sentence_alignment(translator, "alpha bravo golf", target, (pairs, pairs))
    assert found.source_words == ["alpha", "bravo", "golf"] and found.target_words == ["golf", "alpha", "bravo"]
    reference = {tuple(link) for link in found.reference or []}
    assert len(reference) >= 2 and reference <= {(0, 1), (1, 2), (2, 0)}  # eflomal over copies: word to word
    assert len(found.heads) == TINY_TRANSFORMER["decoder_layers"]
    assert all(len(row) == TINY_TRANSFORMER["heads"] and all(0 <= aer <= 1 for aer in row) for row in found.heads)
    assert sorted(j for _, j in found.links) == [0, 1, 2]
    without = sentence_alignment(translator, "alpha bravo golf", target, ([], []))
    assert without.reference is None and without.heads is None and "no training pairs" in without.note


def test_a_lone_word_mark_makes_no_empty_word():
    """A lone ▁ before another ▁word, or last, was a word of its own: links named words that the
    translation's text does not have (14 of 300 short inputs)."""
    assert word_of_pieces(["▁", "▁foo", "▁bar"]) == [0, 0, 1]
    assert word_of_pieces(["▁a", "b", "▁"]) == [0, 0, 0]
    assert word_of_pieces(["▁", "x", "▁y"]) == [0, 0, 1]  # ▁ x is one word, as before
    assert word_of_pieces(["▁"]) == [None]
    assert word_of_pieces(["▁a", "▁", "<eos>"], ["<eos>"]) == [0, 0, None]
    rng = random.Random(0)
    for _ in range(500):  # the words numbered are the text's whitespace words, whatever the pieces
        pieces = [rng.choice(["▁", "▁a", "b", "▁cd", "."]) for _ in range(rng.randint(1, 8))]
        words = [w for w in word_of_pieces(pieces) if w is not None]
        text_words = "".join(pieces).replace("▁", " ").split()
        assert sorted(set(words)) == list(range(len(text_words))), pieces


def test_a_reference_file_is_read_within_bounds_and_its_indices_checked(tmp_path):
    with pytest.raises(NmtError, match="not a regular file"):
        read_links("/dev/zero", 2)  # was read whole: 23 GB before the kernel stopped it
    longer = tmp_path / "longer.align"
    longer.write_text("0-0\n0-0\n0-0\n", encoding="utf-8")
    with pytest.raises(NmtError, match="more lines than the 2 sentence pairs"):
        read_links(longer, 2)
    one_based = [parse_links("1-1 3-3"), parse_links("1-1")]
    with pytest.raises(NmtError, match=r"gold:1: link 3-3, .* counts words from 0"):
        check_links_fit(one_based, ["a b c", "d e"], ["x y z", "u v"], "gold")
    check_links_fit([parse_links("0-0 2-2"), parse_links("1?1")], ["a b c", "d e"], ["x y z", "u v"], "gold")


def test_figures_with_nothing_to_divide_by_are_said_to_be_undefined():
    """An all-blank reference (or possible links only) printed recall 0.000, a number it has not."""
    found = [parse_links("0-0 1-1")]
    described = agreement([parse_links("")], found).describe()
    assert "recall undefined" in described and "precision 0.000" in described
    described = agreement([parse_links("0?0")], found).describe()
    assert "recall undefined" in described and "precision 0.500" in described
    assert "AER undefined" in agreement([parse_links("")], [parse_links("")]).describe()


def test_kept_eflomal_links_are_read_back_only_for_the_same_pairs(tmp_path, monkeypatch):
    """Matched by file name and line count before: a second test set of the same size was scored
    against the first one's links (AER 0.642 reported, 0.562 fresh)."""
    from nmt.data import alignments as module

    calls = []

    def fake_eflomal(sources, targets, extra=((), ())):
        calls.append(list(sources))
        return [parse_links(f"0-{len(calls) - 1}") for _ in sources]

    monkeypatch.setattr(module, "eflomal_alignments", fake_eflomal)
    path = tmp_path / "test.eflomal.align"
    first = module.kept_eflomal_alignments(path, ["a b", "c d"], ["x y", "z w"])
    again = module.kept_eflomal_alignments(path, ["a b", "c d"], ["x y", "z w"])
    assert again == first and len(calls) == 1  # the same pairs: read back
    other = module.kept_eflomal_alignments(path, ["e f", "g h"], ["x y", "z w"])
    assert len(calls) == 2 and other != first  # the same name and count, other pairs: aligned afresh
    module.kept_eflomal_alignments(path, ["e f", "g h"], ["x y", "z w"], (["p"], ["q"]))
    assert len(calls) == 3  # other statistics beside them too


def test_kept_links_naming_words_their_pairs_lack_are_refused(tmp_path, monkeypatch):
    """A links file with the right count but impossible indices trained silently (its links
    pointed at no subword)."""
    from nmt.data import alignments as module

    monkeypatch.setattr(module, "eflomal_alignments", lambda s, t, extra=((), ()): [parse_links("0-0") for _ in s])
    path = tmp_path / "train.eflomal.align"
    module.kept_eflomal_alignments(path, ["a b", "c"], ["x", "y z"])
    path.write_text("0-0 7-9\n0-0\n", encoding="utf-8")  # the key beside it still matches the pairs
    with pytest.raises(NmtError, match=r"train\.eflomal\.align:1: link 7-9"):
        module.kept_eflomal_alignments(path, ["a b", "c"], ["x", "y z"])
