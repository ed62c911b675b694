"""Where a party's data lives: a CSV file, a Parquet file, or a SQL table or query.

One string names a source, the same on the command line (``--data``, ``--active-data``,
``--passive-data``) and in a party's config (``[party] data``):

    customers.csv, customers.csv.gz      CSV (any suffix but the Parquet ones)
    customers.parquet, customers.pq      Parquet (read with pyarrow)
    postgresql+psycopg://user@host:5432/bank#table=customers
    postgresql+psycopg://user@host/bank#table=risk.customers       (schema.table)
    postgresql+psycopg://user@host/bank#query=SELECT id, income FROM customers WHERE active

A SQL source is an SQLAlchemy URL (what ``pandas.read_sql`` and ``create_engine`` take) and,
after ``#``, the table or the query. Passwords belong in the driver's own places (for
PostgreSQL ``~/.pgpass`` or ``PGPASSWORD``), not on a command line; a URL shown in a message
never shows one. Every source goes through the same checks afterwards (``teeboost.data``),
and text columns through the same number formats (``teeboost.number_format``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .data import PartyData, read_csv, read_csv_header
from .errors import DataError
from .number_format import NumberFormat, apply_number_format

__all__ = ["DataSource", "read_source", "read_party", "source_columns"]

PARQUET_SUFFIXES = (".parquet", ".pq")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")


@dataclass(frozen=True)
class DataSource:
    """A parsed source: ``kind`` is "csv", "parquet" or "sql"; ``path`` a file, or for SQL the
    URL with its ``table`` or ``query``."""

    kind: str
    path: Path | None = None
    url: str | None = None
    table: str | None = None
    query: str | None = None

    @classmethod
    def parse(cls, spec: "str | Path | DataSource", base: Path | None = None) -> "DataSource":
        """A source from its string; a relative file path is taken relative to ``base``."""
        if isinstance(spec, DataSource):
            return spec
        text = str(spec)
        if isinstance(spec, str) and _URL.match(text) and not text.startswith("file://"):
            return cls._parse_sql(text)
        if text.startswith("file://"):
            text = text[len("file://"):]
        path = Path(text)
        if base is not None and not path.is_absolute():
            path = base / path
        kind = "parquet" if path.suffix.lower() in PARQUET_SUFFIXES else "csv"
        return cls(kind, path=path)

    @classmethod
    def _parse_sql(cls, text: str) -> "DataSource":
        for key in ("table", "query"):
            marker = f"#{key}="
            if marker in text:
                url, _, what = text.partition(marker)
                what = what.strip()
                if not what:
                    raise DataError(f"{_masked(url)}: {marker} names no {key}")
                return cls("sql", url=url, table=what if key == "table" else None,
                           query=what if key == "query" else None)
        raise DataError(f"{_masked(text)}: a SQL source needs the table or the query after the URL: "
                        "URL#table=NAME (or schema.NAME) or URL#query=SELECT ...")

    @property
    def is_file(self) -> bool:
        return self.path is not None

    def __str__(self) -> str:
        if self.path is not None:
            return str(self.path)
        return f"{_masked(self.url)} {'table ' + self.table if self.table else 'query ' + repr(self.query)}"


def _masked(url: str) -> str:
    """The URL with any password hidden (it is about to be printed)."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL SQLAlchemy can parse: hide what could be a password
        return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)


def read_source(spec: "str | Path | DataSource", *, id_column: str | None = None, sep: str | None = None,
                text_columns: list[str] | tuple[str, ...] = (),
                number_format: NumberFormat = NumberFormat()) -> pd.DataFrame:
    """The source's rows as a DataFrame: ids and ``text_columns`` as text, and text columns
    written in ``number_format`` as numbers."""
    source = DataSource.parse(spec)
    if source.kind == "csv":
        return read_csv(source.path, id_column=id_column, sep=sep, text_columns=text_columns,
                        number_format=number_format)
    frame = _read_parquet(source.path) if source.kind == "parquet" else _read_sql(source)
    if frame.shape[1] == 0:
        raise DataError(f"{source}: no columns")
    frame.columns = [str(c) for c in frame.columns]
    for name in [*([id_column] if id_column else []), *text_columns]:
        if name in frame.columns:  # '01' stays '01'; missing stays missing
            frame[name] = frame[name].astype(object).where(frame[name].notna(), None).map(
                lambda v: None if v is None else str(v))
    return apply_number_format(frame, number_format, {*([id_column] if id_column else []), *text_columns})


def _read_parquet(path: Path) -> pd.DataFrame:
    if not path.exists():
        raise DataError(f"{path}: file not found")
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise DataError(f"{path}: reading Parquet needs pyarrow (pip install pyarrow)") from None
    try:
        return pd.read_parquet(path, engine="pyarrow")
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: not a readable Parquet file ({exc})") from None


def _read_sql(source: DataSource) -> pd.DataFrame:
    try:
        import sqlalchemy
    except ImportError:
        raise DataError(f"{source}: reading SQL needs SQLAlchemy (pip install sqlalchemy) and the database's "
                        "driver (for PostgreSQL: pip install 'psycopg[binary]')") from None
    try:
        engine = sqlalchemy.create_engine(source.url)
    except (ImportError, ModuleNotFoundError) as exc:
        raise DataError(f"{source}: the database driver is not installed ({exc}); for PostgreSQL: "
                        "pip install 'psycopg[binary]' and a URL starting postgresql+psycopg://") from None
    except sqlalchemy.exc.ArgumentError as exc:
        raise DataError(f"{source}: not an SQLAlchemy URL ({exc})") from None
    try:
        with engine.connect() as connection:
            if source.table is not None:
                schema, _, table = source.table.rpartition(".")
                if not sqlalchemy.inspect(connection).has_table(table, schema=schema or None):
                    raise DataError(f"{source}: no such table")
                return pd.read_sql_table(table, connection, schema=schema or None)
            return pd.read_sql_query(sqlalchemy.text(source.query), connection)
    except sqlalchemy.exc.SQLAlchemyError as exc:
        first = str(getattr(exc, "orig", exc) or exc).strip().splitlines()[0]
        raise DataError(f"{source}: {first}") from None
    finally:
        engine.dispose()


def source_columns(spec: "str | Path | DataSource") -> list[str]:
    """The column names of a source (for a file, without reading its rows)."""
    source = DataSource.parse(spec)
    if source.kind == "csv":
        return read_csv_header(source.path)
    if source.kind == "parquet":
        try:
            import pyarrow.parquet as pq

            return [str(n) for n in pq.read_schema(source.path).names]
        except (ImportError, OSError, ValueError):
            return []
    try:
        return list(read_source(source).columns)
    except DataError:
        return []


def read_party(spec: "str | Path | DataSource", *, id_column: str | None = None, label: str | None = None,
               name: str = "party", require_label: bool = False, sep: str | None = None,
               categorical: list[str] | tuple[str, ...] = (), weight_column: str | None = None,
               number_format: NumberFormat = NumberFormat()) -> PartyData:
    """One party's validated data from its source (what ``PartyData.from_csv`` is for a CSV)."""
    source = DataSource.parse(spec)
    frame = read_source(source, id_column=id_column, sep=sep, text_columns=categorical, number_format=number_format)
    return PartyData.from_frame(frame, id_column=id_column, label=label, name=name, source=str(source),
                                require_label=require_label, categorical=categorical, weight_column=weight_column)
