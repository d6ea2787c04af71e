"""Language codes and names: how a TSV header row names its columns ("Eng<TAB>Hin<TAB>Oth",
"en<TAB>mr", "English<TAB>Marathi"), and how reports name a direction."""

from __future__ import annotations

# ISO 639-1 code -> (English name, ISO 639-2/3 codes). Tatoeba and Anki files name languages by
# the three-letter codes; configs usually by the two-letter ones.
LANGUAGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "ar": ("Arabic", ("ara", "arb")),
    "bn": ("Bengali", ("ben",)),
    "cs": ("Czech", ("ces", "cze")),
    "da": ("Danish", ("dan",)),
    "de": ("German", ("deu", "ger")),
    "el": ("Greek", ("ell", "gre")),
    "en": ("English", ("eng",)),
    "eo": ("Esperanto", ("epo",)),
    "es": ("Spanish", ("spa",)),
    "fa": ("Persian", ("fas", "per", "pes")),
    "fi": ("Finnish", ("fin",)),
    "fr": ("French", ("fra", "fre")),
    "gu": ("Gujarati", ("guj",)),
    "he": ("Hebrew", ("heb",)),
    "hi": ("Hindi", ("hin",)),
    "hu": ("Hungarian", ("hun",)),
    "id": ("Indonesian", ("ind",)),
    "it": ("Italian", ("ita",)),
    "ja": ("Japanese", ("jpn",)),
    "kn": ("Kannada", ("kan",)),
    "ko": ("Korean", ("kor",)),
    "ml": ("Malayalam", ("mal",)),
    "mr": ("Marathi", ("mar",)),
    "ne": ("Nepali", ("nep", "npi")),
    "nl": ("Dutch", ("nld", "dut")),
    "no": ("Norwegian", ("nor", "nob")),
    "pa": ("Punjabi", ("pan",)),
    "pl": ("Polish", ("pol",)),
    "pt": ("Portuguese", ("por",)),
    "ro": ("Romanian", ("ron", "rum")),
    "ru": ("Russian", ("rus",)),
    "sv": ("Swedish", ("swe",)),
    "sw": ("Swahili", ("swa", "swh")),
    "ta": ("Tamil", ("tam",)),
    "te": ("Telugu", ("tel",)),
    "th": ("Thai", ("tha",)),
    "tl": ("Tagalog", ("tgl",)),
    "tr": ("Turkish", ("tur",)),
    "uk": ("Ukrainian", ("ukr",)),
    "ur": ("Urdu", ("urd",)),
    "vi": ("Vietnamese", ("vie",)),
    "zh": ("Chinese", ("zho", "chi", "cmn")),
}

# Words a header row uses for columns that are not a language.
COLUMN_WORDS = frozenset(
    {"source", "src", "target", "tgt", "text", "sentence", "translation", "attribution", "oth", "other", "lang"}
)


def language_name(code: str) -> str:
    """``mr`` -> ``Marathi``; a code not in the table stays itself."""
    return LANGUAGES.get(code.lower(), (code, ()))[0]


def names_of(code: str) -> set[str]:
    """Every lower-case way a header may name ``code``'s language."""
    name, others = LANGUAGES.get(code.lower(), (code, ()))
    return {code.lower(), name.lower(), *others}


def is_column_name(cell: str, declared: list[str]) -> bool:
    """Whether a header cell names a column: a declared language (by its code, name or
    three-letter code), any language of the table by name or three-letter code (a file may be
    "Eng<TAB>Hin<TAB>Oth"), or a word like "source". Two-letter codes count only when declared:
    "no" and "hi" are also sentences."""
    word = cell.strip().strip(":").lower()
    known = set(COLUMN_WORDS).union(*(names_of(code) for code in declared))
    for name, others in LANGUAGES.values():
        known.update((name.lower(), *others))
    return word in known


def looks_like_header(cells: list[str], declared: list[str]) -> bool:
    """A first line whose two language cells are different column names, or two different
    two-letter codes of the table ("en<TAB>mr": one code alone is also a word, two side by side
    are a header)."""
    first, second = (cell.strip().strip(":").lower() for cell in cells[:2])
    if first == second:
        return False
    both_codes = first in LANGUAGES and second in LANGUAGES
    return both_codes or (is_column_name(first, declared) and is_column_name(second, declared))


def code_of(cell: str) -> str | None:
    """The language code a header cell names — ``en``, ``eng``, ``Eng``, ``English``, ``Hindi``
    all name theirs — or None (a column word such as "Oth", or no language of the table)."""
    word = cell.strip().strip(":").lower()
    for code, (name, others) in LANGUAGES.items():
        if word in (code, name.lower(), *others):
            return code
    return None


def header_languages(header: str) -> list[str]:
    """The languages a TSV header row names, in column order: ``Eng<TAB>Hin<TAB>Oth`` -> [en, hi]."""
    return [code for code in (code_of(cell) for cell in header.split("\t")) if code]
