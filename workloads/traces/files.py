"""Reading trace files row by row while remembering where each row came from.

Every reader turns a file into columns plus the line number of each row, and reports bad
rows through a ``RowChecker``: by default the earliest bad row raises one ValueError
naming the file and line; with ``skip=True`` bad rows are dropped and counted instead.
Nothing is dropped silently.
"""

from __future__ import annotations

import csv
import gzip
import json
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from workloads.validators import HORIZON, MAX_SECONDS, MAX_TOKENS, TOKEN_LIMIT


@dataclass(frozen=True, slots=True)
class TextSource:
    """The text of one trace file and the name messages use for it."""

    name: str
    text: str
    is_jsonl: bool


def read_text_source(path: Path, display: str | None = None) -> TextSource:
    """Read a plain or gzip-compressed file as UTF-8 text; ValueError naming the file if unreadable."""
    name = display or str(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ValueError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"{name}: is a directory, not a trace file") from None
    except OSError as exc:
        raise ValueError(f"{name}: cannot read file ({exc.strerror})") from None
    return TextSource(name, _decode(raw, name), _is_jsonl_name(path.name))


def _is_jsonl_name(filename: str) -> bool:
    stem = filename.removesuffix(".gz")
    return stem.endswith((".jsonl", ".ndjson", ".json"))


def _decode(raw: bytes, name: str) -> str:
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError
            raise ValueError(f"{name}: not a valid gzip file ({exc})") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{name}: not UTF-8 text (byte {exc.start})") from None


class RowChecker:
    """Collects the bad rows of one file.

    ``reject(mask, message)`` marks rows; ``finish()`` then either raises for the earliest
    marked line (error mode) or returns the mask of rows to keep (skip mode). Messages are
    ``"{file}: line {n}: {message}"``.
    """

    def __init__(self, name: str, lines: np.ndarray, skip: bool) -> None:
        self.name = name
        self.lines = lines
        self.skip = skip
        self.bad = np.zeros(len(lines), dtype=bool)
        self._first: tuple[int, str] | None = None

    def reject(self, mask: np.ndarray, message: str | Callable[[int], str]) -> None:
        """Mark the rows where ``mask`` is true; ``message`` may be a function of the row index."""
        rows = np.flatnonzero(mask)
        if len(rows) == 0:
            return
        row = int(rows[0])
        line = int(self.lines[row])
        text = message(row) if callable(message) else message
        if self._first is None or line < self._first[0]:
            self._first = (line, text)
        self.bad |= mask

    def error(self, line: int, message: str) -> ValueError:
        return ValueError(f"{self.name}: line {line}: {message}")

    def finish(self) -> np.ndarray:
        """The mask of good rows; raises for the earliest bad row unless skipping, and when none is left."""
        if self._first is not None and not self.skip:
            raise self.error(*self._first)
        keep = ~self.bad
        if not keep.any():
            raise ValueError(f"{self.name}: every row is bad ({len(keep)} skipped)")
        return keep


@dataclass(slots=True)
class RawTable:
    """Rows of a file as strings (CSV) or Python values (JSONL), with their 1-based line numbers.

    ``columns`` maps a column (CSV header or JSON key) to one value per row; a row that
    lacks the key holds ``None``. ``broken`` marks rows that could not be parsed at all
    (blank line, wrong field count, invalid JSON); their values are ``None``.
    """

    name: str
    columns: dict[str, list[Any]]
    lines: np.ndarray
    header_line: int
    broken_reason: dict[int, str]

    def __len__(self) -> int:
        return len(self.lines)


def read_csv_table(source: TextSource) -> RawTable:
    """Split a CSV file into string columns; the first line is the header.

    Blank lines and rows with the wrong number of fields are broken rows (they raise in
    error mode, see ``report_broken``). Values are kept as written (numbers may carry
    surrounding spaces, which the number parsers accept).
    """
    text_lines = source.text.splitlines()
    reader = csv.reader(text_lines)
    try:
        header = next(reader)
    except StopIteration:
        raise ValueError(f"{source.name}: line 1: empty file (expected a header line)") from None
    except csv.Error as exc:  # e.g. a field over the csv module's size limit
        raise ValueError(f"{source.name}: line {reader.line_num}: not a CSV header ({exc})") from None
    header = [h.strip() for h in header]
    if not any(header):
        raise ValueError(f"{source.name}: line 1: the header line is blank")
    dupes = sorted({h for h in header if header.count(h) > 1})
    if dupes:
        raise ValueError(f"{source.name}: line 1: duplicate column {dupes[0]!r}")
    width = len(header)
    try:
        rows = list(reader)
    except csv.Error:  # the walk below names the line
        rows = []
    if len(rows) == len(text_lines) - 1 and all(len(row) == width for row in rows):
        # The common case, one record per line and every record whole: transpose at once.
        transposed = zip(*rows, strict=True) if rows else ([] for _ in header)
        columns: dict[str, list[Any]] = {h: list(values) for h, values in zip(header, transposed, strict=True)}
        return RawTable(source.name, columns, np.arange(2, len(rows) + 2, dtype=np.int64), 1, {})
    # Otherwise walk the records again, keeping each one's line number and noting broken ones.
    reader = csv.reader(text_lines)
    next(reader)
    columns = {h: [] for h in header}
    lines: list[int] = []
    broken: dict[int, str] = {}
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:  # a field over the size limit; the reader goes on at the next line
            row, problem = None, f"not a CSV record ({exc})"
        i = len(lines)
        lines.append(reader.line_num)
        if row is None or len(row) != width:
            if row is not None:
                problem = "blank line" if not row else f"expected {width} fields, found {len(row)}"
            broken[i] = problem
            for values in columns.values():
                values.append(None)
            continue
        for h, value in zip(header, row, strict=True):
            columns[h].append(value)
    return RawTable(source.name, columns, np.asarray(lines, dtype=np.int64), 1, broken)


def read_jsonl_table(source: TextSource, keys: Sequence[str] | None = None) -> RawTable:
    """Parse a JSON-lines file: one object per line.

    ``keys`` limits the columns kept (all keys of the first object when None, plus any
    key seen later). Blank lines, invalid JSON and non-objects are broken rows.
    """
    text_lines = source.text.split("\n")
    if text_lines and text_lines[-1] == "":
        text_lines.pop()  # the newline that ends the last line
    try:  # one decoder call for the whole file; any oddity falls back to the line-by-line walk
        records = json.loads("[" + ",".join(text_lines) + "]")
    except (ValueError, RecursionError):  # JSONDecodeError, an over-long integer, nesting too deep
        records = None
    if records is not None and len(records) == len(text_lines) and all(type(r) is dict for r in records):
        # The common case, every line an object: build the columns at once.
        names = list(keys) if keys is not None else list(dict.fromkeys(k for r in records for k in r))
        columns = {k: [r.get(k) for r in records] for k in names}
        return RawTable(source.name, columns, np.arange(1, len(records) + 1, dtype=np.int64), 0, {})
    # Otherwise go line by line, noting broken lines.
    columns = {k: [] for k in keys} if keys is not None else {}
    lines: list[int] = []
    broken: dict[int, str] = {}
    for n, text in enumerate(text_lines, start=1):
        i = len(lines)
        lines.append(n)
        record: Any = None
        if not text.strip():
            broken[i] = "blank line"
        else:
            try:
                record = json.loads(text)
            except json.JSONDecodeError as exc:
                broken[i] = f"not valid JSON ({exc.msg} at column {exc.colno})"
            except RecursionError:
                broken[i] = "not valid JSON (nested too deeply)"
            except ValueError as exc:  # an integer of more digits than Python converts
                broken[i] = f"not valid JSON ({exc})"
            else:
                if not isinstance(record, dict):
                    broken[i] = f"expected a JSON object, found {type(record).__name__}"
                    record = None
        if record is not None and keys is None:
            for k in record:
                if k not in columns:
                    columns[k] = [None] * i
        for k, values in columns.items():
            values.append(record.get(k) if record is not None else None)
    return RawTable(source.name, columns, np.asarray(lines, dtype=np.int64), 0, broken)


def check_not_empty(table: RawTable) -> None:
    if len(table) == 0:
        where = "line 2: the file has a header but no requests" if table.header_line else "line 1: empty file"
        raise ValueError(f"{table.name}: {where}")


def report_broken(table: RawTable, checker: RowChecker) -> np.ndarray:
    """Reject the broken rows; returns their mask."""
    mask = np.zeros(len(table), dtype=bool)
    if table.broken_reason:
        mask[list(table.broken_reason)] = True
        checker.reject(mask, lambda row: table.broken_reason[row])
    return mask


def require_columns(table: RawTable, required: Sequence[str], what: str) -> None:
    """ValueError naming the header line when a required column is absent."""
    missing = [c for c in required if c not in table.columns]
    if missing:
        have = ", ".join(table.columns) or "none"
        line = table.header_line or 1
        kind = "column" if table.header_line else "field"
        raise ValueError(
            f"{table.name}: line {line}: missing {kind} {missing[0]!r} for the {what} format "
            f"(expected {', '.join(required)}; found {have})"
        )


def reject_missing_fields(table: RawTable, fields: Sequence[str], checker: RowChecker, what: str) -> np.ndarray:
    """JSON lines: reject rows that lack a required field; returns their mask."""
    mask = np.zeros(len(table), dtype=bool)
    for field in fields:
        values = table.columns[field]
        missing = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
        missing &= ~mask
        for row in table.broken_reason:
            missing[row] = False
        checker.reject(missing, f"missing field {field!r} (the {what} format needs {', '.join(fields)})")
        mask |= missing
    return mask


def is_missing(value: Any) -> bool:
    """An absent value: a JSON null or missing key, or an empty (or blank) CSV cell."""
    return value is None or (isinstance(value, str) and not value.strip())


def _all_ints(values: list[Any]) -> np.ndarray | None:
    """Fast path: every value an integer (a JSON int or a CSV integer string), as int64; else None
    (the caller then checks value by value to name the bad row)."""
    if not values:
        return None
    if isinstance(values[0], str):
        try:
            return np.asarray(values, dtype=str).astype(np.int64)
        except (ValueError, OverflowError):
            return None
    if {type(v) for v in values} != {int}:  # bool and float are refused; None is missing
        return None
    try:
        return np.asarray(values, dtype=np.int64)
    except OverflowError:
        return None


def _all_floats(values: list[Any]) -> np.ndarray | None:
    """Fast path: every value a finite number, as float64; else None."""
    if not values:
        return None
    try:
        if isinstance(values[0], str):
            out = np.asarray(values, dtype=str).astype(np.float64)
        elif {type(v) for v in values} <= {int, float}:
            out = np.asarray(values, dtype=np.float64)
        else:
            return None
    except (ValueError, OverflowError):  # the slow path names the row
        return None
    return out if bool(np.all(np.isfinite(out))) else None


def int_column(
    table: RawTable,
    column: str,
    checker: RowChecker,
    skip_rows: np.ndarray,
    minimum: int | None = 1,
    maximum: tuple[int, str, str] | None = None,
) -> np.ndarray:
    """An integer column (int64); empty, non-integer, below-``minimum`` or above-``maximum`` values are rejected.

    ``maximum`` is (bound, unit, why the bound); a value above it is refused as such (not as
    a non-integer, also when it is beyond int64). Rows in ``skip_rows`` (already broken) are not
    checked and hold 0.
    """
    values = table.columns[column]
    fast = None if skip_rows.any() else _all_ints(values)
    out = fast if fast is not None else np.zeros(len(values), dtype=np.int64)
    bad_value = np.zeros(len(values), dtype=bool)
    missing = np.zeros(len(values), dtype=bool)
    too_large = np.zeros(len(values), dtype=bool)
    large: dict[int, int] = {}  # row -> a value above the maximum, as Python wrote it (maybe beyond int64)
    for i, v in enumerate(values if fast is None else ()):
        if skip_rows[i]:
            continue
        if is_missing(v):
            missing[i] = True
        elif isinstance(v, (bool, float)):
            bad_value[i] = True
        else:
            try:
                number = v if isinstance(v, int) else int(v)
            except (TypeError, ValueError):
                bad_value[i] = True
                continue
            if maximum is not None and number > maximum[0]:
                too_large[i], large[i] = True, number
                continue
            try:
                out[i] = number
            except OverflowError:  # beyond int64
                bad_value[i] = True
    checker.reject(missing, f"{column}: missing value")
    checker.reject(bad_value, lambda row: f"{column}: expected an integer, found {values[row]!r:.60}")
    if maximum is not None:
        bound, unit, why = maximum
        too_large |= ~(missing | bad_value | skip_rows) & (out > bound)
        checker.reject(
            too_large,
            lambda row: f"{column}: {_shown(large.get(row, out[row]))} {unit} is more than {bound:,} {unit} ({why})",
        )
    if minimum is not None:
        low = ~(missing | bad_value | too_large | skip_rows) & (out < minimum)
        checker.reject(
            low, lambda row: f"{column}: {'negative' if out[row] < 0 else f'must be at least {minimum}'} ({out[row]})"
        )
    return out


def _shown(number: int) -> str:
    """An integer with thousands separators, or in scientific notation when it is longer than a line allows."""
    if number < 10**24:
        return f"{number:,}"
    digits = str(number)
    return f"{digits[0]}.{digits[1:3]}e+{len(digits) - 1}"


def token_column(
    table: RawTable, column: str, checker: RowChecker, skip_rows: np.ndarray, minimum: int = 1
) -> np.ndarray:
    """A token-length column: integers from ``minimum`` to ``MAX_TOKENS``, checked row by row before any array
    is sized from them (a prompt of 2**63 tokens is its row's error, not a MemoryError later)."""
    return int_column(table, column, checker, skip_rows, minimum, (MAX_TOKENS, "tokens", TOKEN_LIMIT))


def float_column(
    table: RawTable,
    column: str,
    checker: RowChecker,
    skip_rows: np.ndarray,
    minimum: float | None = 0.0,
    optional: np.ndarray | None = None,
    maximum: tuple[float, str, str] | None = None,
) -> np.ndarray:
    """A finite float column (float64); rows where ``optional`` is true may be empty (NaN).

    ``maximum`` is (bound, unit, why the bound), as for ``int_column``.
    """
    values = table.columns[column]
    fast = None if skip_rows.any() or (optional is not None and optional.any()) else _all_floats(values)
    out = fast if fast is not None else np.full(len(values), np.nan, dtype=np.float64)
    bad_value = np.zeros(len(values), dtype=bool)
    missing = np.zeros(len(values), dtype=bool)
    for i, v in enumerate(values if fast is None else ()):
        if skip_rows[i]:
            continue
        if is_missing(v):
            if optional is None or not optional[i]:
                missing[i] = True
            continue
        if isinstance(v, bool):
            bad_value[i] = True
            continue
        try:
            x = float(v)
        except (TypeError, ValueError, OverflowError):
            bad_value[i] = True
            continue
        if not np.isfinite(x):
            bad_value[i] = True
        else:
            out[i] = x
    checker.reject(missing, f"{column}: missing value")
    checker.reject(bad_value, lambda row: f"{column}: expected a finite number, found {values[row]!r:.60}")
    if minimum is not None:
        low = np.nan_to_num(out, nan=minimum) < minimum
        checker.reject(low, lambda row: f"{column}: negative ({out[row]})")
    if maximum is not None:
        reject_above(out, maximum, checker, column)
    return out


def reject_above(values: np.ndarray, maximum: tuple[float, str, str], checker: RowChecker, column: str) -> None:
    """Reject the rows whose value is above ``maximum`` (bound, unit, why the bound); NaN rows are left alone."""
    bound, unit, why = maximum
    checker.reject(
        np.nan_to_num(values, nan=-np.inf) > bound,
        lambda row: f"{column}: {values[row]:,.6g} {unit} is more than {bound:,.0f} {unit} ({why})",
    )


def seconds_column(
    table: RawTable,
    column: str,
    checker: RowChecker,
    skip_rows: np.ndarray,
    optional: np.ndarray | None = None,
    per_second: float = 1.0,
) -> np.ndarray:
    """A time column, 0 to ``MAX_SECONDS`` (``per_second`` units a second: 1e3 for milliseconds), checked row by
    row before the simulator's clock or a per-second table is sized from it."""
    unit = {1.0: "s", 1e3: "ms"}[per_second]
    maximum = (MAX_SECONDS * per_second, unit, HORIZON)
    return float_column(table, column, checker, skip_rows, optional=optional, maximum=maximum)


def text_column(table: RawTable, column: str, skip_rows: np.ndarray) -> list[str | None]:
    """A text column: each value as a string, None where empty (ids, class names)."""
    out: list[str | None] = []
    for i, v in enumerate(table.columns[column]):
        text = None if skip_rows[i] or v is None else str(v).strip()
        out.append(text or None)
    return out


def check_sorted(times: np.ndarray, rows: np.ndarray, checker: RowChecker, column: str) -> None:
    """Reject rows (among ``rows``, in order) whose time is earlier than an earlier row's.

    In skip mode a row that goes back in time is dropped and the order is judged against
    the rows kept before it.
    """
    t = times[rows]
    if len(t) < 2:
        return
    latest = np.full(len(times), np.nan)
    latest[rows[1:]] = np.maximum.accumulate(t)[:-1]
    back = np.zeros(len(times), dtype=bool)
    back[rows[1:]] = t[1:] < latest[rows[1:]]
    checker.reject(
        back,
        lambda row: (
            f"{column}: {times[row]:g} is earlier than a previous row's {latest[row]:g} "
            "(this format requires rows sorted by time)"
        ),
    )
