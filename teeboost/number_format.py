"""Numbers as people write them: decimal commas ("102,0") and thousands separators ("1.234,5").

A column of such text is either read as numbers, in the format the user named (``--decimal``,
``--thousands``; ``decimal``/``thousands`` in a party's config), or refused with the option to
give: never left as text, where it would silently become categories (a feature that loses its
order, and a model that quietly scores worse at a party nobody else can see).

A value is read only when it matches the format exactly: with ``thousands="."`` the groups
after the first must have three digits, so "1.5" is not read as 15.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .errors import ConfigError

__all__ = ["NumberFormat", "apply_number_format", "misread_numbers", "DECIMALS", "THOUSANDS"]

DECIMALS = (".", ",")
#: Thousands separators seen in practice: dot, comma, space, no-break space, apostrophe, underscore.
THOUSANDS = (".", ",", " ", "\u00a0", "\u202f", "'", "_")


@dataclass(frozen=True)
class NumberFormat:
    """How numbers are written in a data source: the decimal mark and the thousands separator (or none)."""

    decimal: str = "."
    thousands: str | None = None

    def __post_init__(self) -> None:
        if self.decimal not in DECIMALS:
            raise ConfigError(f"decimal mark {self.decimal!r} must be '.' or ','")
        if self.thousands is not None and self.thousands not in THOUSANDS:
            raise ConfigError(f"thousands separator {self.thousands!r} must be one of "
                              f"{', '.join(map(repr, THOUSANDS))}")
        if self.thousands == self.decimal:
            raise ConfigError(f"the thousands separator and the decimal mark are both {self.decimal!r}")

    @classmethod
    def of(cls, decimal: str | None, thousands: str | None) -> "NumberFormat":
        return cls(decimal or ".", thousands or None)

    @property
    def plain(self) -> bool:
        return self == NumberFormat()

    def pattern(self) -> re.Pattern[str]:
        d = re.escape(self.decimal)
        whole = r"\d+" if self.thousands is None else rf"(?:\d{{1,3}}(?:{re.escape(self.thousands)}\d{{3}})+|\d+)"
        return re.compile(rf"[+-]?(?:{whole}(?:{d}\d*)?|{d}\d+)(?:[eE][+-]?\d+)?")

    def parse(self, text: pd.Series) -> pd.Series | None:
        """float64 values of a text column when every non-empty value is a number written this
        way (empty and missing cells are missing); else None."""
        present = text.notna()
        stripped = text[present].astype(str).str.strip()
        filled = stripped != ""
        if not filled.any() or not stripped[filled].str.fullmatch(self.pattern()).all():
            return None
        canonical = stripped[filled]
        if self.thousands is not None:
            canonical = canonical.str.replace(self.thousands, "", regex=False)
        if self.decimal != ".":
            canonical = canonical.str.replace(self.decimal, ".", regex=False)
        values = pd.Series(np.nan, index=text.index, dtype=np.float64, name=text.name)
        values[canonical.index] = [float(v) for v in canonical]  # Python's correctly rounded parse
        return values

    def options(self) -> str:
        """The command-line options (and party-config keys) that name this format."""
        cli, toml = [], []
        if self.decimal != ".":
            cli.append(f"--decimal {self.decimal}")
            toml.append(f"decimal = {json.dumps(self.decimal)}")
        if self.thousands is not None:
            cli.append(f"--thousands {shlex.quote(self.thousands)}")
            toml.append(f"thousands = {json.dumps(self.thousands)}")
        return f"{' '.join(cli)} (in a party's config: [party] {', '.join(toml)})"

    def describe(self) -> str:
        parts = ["a decimal comma" if self.decimal == "," else "a decimal point"]
        if self.thousands is not None:
            parts.append(f"thousands separated by {self.thousands!r}")
        return " and ".join(parts)


#: Formats tried when a text column may be misread numbers, most common first.
_CANDIDATES = (NumberFormat(","), NumberFormat(",", "."), NumberFormat(",", " "), NumberFormat(",", "\u00a0"),
               NumberFormat(",", "\u202f"), NumberFormat(",", "'"), NumberFormat(".", ","), NumberFormat(".", " "),
               NumberFormat(".", "\u00a0"), NumberFormat(".", "'"), NumberFormat(".", "_"))


def apply_number_format(frame: pd.DataFrame, number_format: NumberFormat, skip: set[str] | frozenset[str] = frozenset()
                        ) -> pd.DataFrame:
    """``frame`` with each text column (bar ``skip``: ids, declared categories) that is all
    numbers written in ``number_format`` replaced by its float64 values."""
    if number_format.plain:
        return frame
    out = frame.copy()
    for name in out.columns:
        column = out[name]
        if str(name) in skip or pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
            continue
        values = number_format.parse(column)
        if values is not None:
            out[name] = values
    return out


def misread_numbers(text: pd.Series) -> tuple[str, list[NumberFormat]] | None:
    """For a text column that is all numbers written with a decimal comma or thousands
    separators: an example value that is not a plain number, and the formats that read every
    value (most likely first); else None."""
    present = text.dropna().astype(str).str.strip()
    present = present[present != ""]
    if present.empty:
        return None
    plain = pd.to_numeric(present, errors="coerce").notna()
    if plain.all():
        return None
    formats: list[NumberFormat] = []
    for candidate in _CANDIDATES:  # a separator is named only when the decimal mark alone does not do
        if NumberFormat(candidate.decimal) not in formats and present.str.fullmatch(candidate.pattern()).all():
            formats.append(candidate)
    if not formats:
        return None
    return str(present[~plain].iloc[0]), formats
