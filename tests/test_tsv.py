import unicodedata

from nmt.data.pairs import drop_duplicates, normalize_text
from nmt.data.tsv import read_tsv


def read_bytes_file(tmp_path, data: bytes):
    path = tmp_path / "in.txt"
    path.write_bytes(data)
    return read_tsv(path)


def test_bom_crlf_and_blank_lines(tmp_path):
    result = read_bytes_file(tmp_path, "\ufeffHi.\tनमस्कार.\r\n\r\nGo.\tजा.\r\n".encode("utf-8"))
    assert [(p.src, p.tgt) for p in result.pairs] == [("Hi.", "नमस्कार."), ("Go.", "जा.")]
    assert result.blank_lines == 1 and not result.problems
    assert [p.line_no for p in result.pairs] == [1, 3]


def test_third_column_is_attribution_not_text(tmp_path):
    result = read_bytes_file(tmp_path, "Go.\tजा.\tCC-BY 2.0 (France) Attribution: tatoeba.org #1 (a)\n".encode())
    pair = result.pairs[0]
    assert pair.tgt == "जा." and "tatoeba" in pair.attribution and "tatoeba" not in pair.src + pair.tgt


def test_malformed_lines_reported_with_line_numbers(tmp_path):
    data = (
        b"ok\tfine\none column only\n\tno source\nno target\t \n"
        + b"\xff\xfe bad\tbytes\n"
        + b"a\tb\tc\td\nlast\tgood\n"
    )
    result = read_bytes_file(tmp_path, data)
    assert [(p.src, p.tgt) for p in result.pairs] == [("ok", "fine"), ("last", "good")]
    reasons = {p.line_no: p.reason for p in result.problems}
    assert set(reasons) == {2, 3, 4, 5, 6}
    assert "one column" in reasons[2]
    assert "empty source" in reasons[3]
    assert "empty target" in reasons[4]
    assert "undecodable" in reasons[5]
    assert "4 columns" in reasons[6]
    assert str(result.problems[0]).endswith("in.txt:2: one column (expected source<TAB>target[<TAB>attribution])")


def test_devanagari_survives_and_is_nfc(tmp_path):
    decomposed = unicodedata.normalize("NFD", "café")
    assert decomposed != "café"
    result = read_bytes_file(tmp_path, f"{decomposed}\tकॅफे क्षमा श्री त्रि\n".encode())
    assert result.pairs[0].src == "café"
    assert result.pairs[0].tgt == "कॅफे क्षमा श्री त्रि"  # every Devanagari code point kept
    assert normalize_text("  मला   आनंद\u00a0आहे.  ") == "मला आनंद आहे."


def test_exact_duplicates_dropped_but_alternative_translations_kept(tmp_path):
    result = read_bytes_file(tmp_path, "Run!\tपळ!\nRun!\tधाव!\nRun!\tपळ!\n".encode())
    kept, dropped = drop_duplicates(result.pairs)
    assert dropped == 1 and [p.tgt for p in kept] == ["पळ!", "धाव!"]


def test_a_lone_carriage_return_ends_a_line_and_is_counted(tmp_path):
    """LF, CRLF and a lone CR mixed in one file: three line breaks, as Python's universal
    newlines read them. Before, ``S2<TAB>T2<CR>S3<TAB>T3`` became the pair S2, "T2 S3"."""
    path = tmp_path / "mixed.tsv"
    path.write_bytes(b"S1\tT1\nS2\tT2\rS3\tT3\r\nS4\tT4\r")
    result = read_tsv(path)
    assert [(p.src, p.tgt, p.line_no) for p in result.pairs] == [
        ("S1", "T1", 1),
        ("S2", "T2", 2),
        ("S3", "T3", 3),
        ("S4", "T4", 4),
    ]
    assert result.lone_cr == 2 and not result.problems
