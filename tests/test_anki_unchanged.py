"""The Anki path is unchanged by the other sources: preparing the shipped eng-mar file with
configs/eng-mar-cpu.yaml gives, byte for byte, the split and SentencePiece models recorded
before line-aligned files, columns and header rows existed (so the same checkpoints load and
score the same BLEU)."""

import hashlib
from pathlib import Path

import pytest

from nmt.config.files import load_config
from nmt.pipelines.prepare import prepare

ROOT = Path(__file__).resolve().parents[1]
RECORDED = {  # sha256 of each prepared file, recorded before the change
    "train.en": "1cb3aa7d536f9ab7af455749f4a7230371f6fa2035ba96f0a8bed9eb35edcc39",
    "train.mr": "7912a8b3f2887e4d02ba1cbfa8e7c587cdfed5002bb54e607a08ac31825a2e59",
    "train.attribution": "90119f4c6c9884eb3b432754f9de51c908a71dceaebd8ed282c3181cdbf157ea",
    "dev.en": "5d82452120e5419ba928fd2c0f62a699db727dcd8c1e29ac52ca9812dba50d44",
    "dev.mr": "f77f9897616b70a009ce4d231f3da138edeb7fdc2b354f72180b6eb7cd2b5276",
    "dev.multi.tsv": "c515115d2b305964b6e25f81d3d3449b9d30406dfbdd9df6402a2a25e032c0b7",
    "test.en": "57bdf1f113d713ce67020fe1c557dc0189c6f55df9fe02030d657f5e378d6466",
    "test.mr": "2f70e3393fab0034d94065fa053ea83676cc8e11b3e31c76137417f08b118924",
    "test.multi.tsv": "d0ef5c76ee553afdbfdcf5fcb1d55340fc29a3ffc34962789845fd69eabb4fba",
    "spm.en.model": "069f2f3a0a58c4a8f10757259eb4885a5c1f674a7ec61178ff07539e777fc591",
    "spm.mr.model": "3c374a8f43a2a866c03a8d9a15a52b67b46e1ecd085cf68f59f876cebd71a2f0",
}


@pytest.mark.slow
def test_eng_mar_split_and_vocabularies_are_byte_for_byte_as_before(tmp_path):
    overrides = [f"data.prepared_dir={tmp_path}", f"data.path={ROOT / 'data' / 'eng-mar' / 'mar.txt'}"]
    config = load_config(ROOT / "configs" / "eng-mar-cpu.yaml", overrides)
    report = prepare(config, log=lambda _: None)
    assert report.split_pairs == {"train": 30371, "dev": 1695, "test": 1659} and report.header == ""
    for name, sha256 in RECORDED.items():
        assert hashlib.sha256((tmp_path / name).read_bytes()).hexdigest() == sha256, name
