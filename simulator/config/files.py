"""Reading a user's files: every way a read can fail becomes one ValueError naming the file.

Missing, unreadable, not UTF-8, not valid YAML or JSON (with the line), or not the
mapping expected: the CLI prints the message as is and exits with status 2.

YAML is read with bounds, so that a hostile or broken file is refused quickly instead of
hanging, exhausting memory or overflowing the stack: at most ``MAX_YAML_BYTES``, no
control characters (NUL and the like, named with their line), nesting at most
``MAX_YAML_DEPTH`` deep and at most ``MAX_YAML_NODES`` values once aliases are expanded
(a "billion laughs" file is a few lines that expand to billions of values), no alias
that refers to the node holding it, and no key given twice in one mapping (YAML would
keep the last silently).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

# A scenario, grid, candidates, prices or spec file is a few hundred lines; these are ample
# for any hand- or script-written one and keep the pure-Python parser to a few seconds.
MAX_YAML_BYTES = 1 << 20
MAX_YAML_DEPTH = 64
MAX_YAML_NODES = 100_000

# What YAML 1.1 forbids in a stream (PyYAML's own rule): C0 controls except tab, LF, CR;
# DEL; C1 controls except NEL; surrogates; U+FFFE and U+FFFF.
_NON_PRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def read_text(path: Path | str, what: str = "file", max_bytes: int | None = None) -> str:
    """The text of ``path`` (UTF-8, newlines as ``\\n``); with ``max_bytes``, a larger file is refused."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            raw = f.read() if max_bytes is None else f.read(max_bytes + 1)
    except FileNotFoundError:
        raise ValueError(f"{p}: no such {what}") from None
    except IsADirectoryError:
        raise ValueError(f"{p}: is a folder, not a {what}") from None
    except OSError as exc:
        raise ValueError(f"{p}: cannot read file ({exc.strerror or exc})") from None
    if max_bytes is not None and len(raw) > max_bytes:
        raise ValueError(f"{p}: too large for a {what} ({_size(max_bytes)} at most)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{p}: not a text file (byte {exc.start} is not UTF-8)") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")  # what reading in text mode does


def _size(num_bytes: int) -> str:
    return f"{num_bytes >> 20} MiB" if num_bytes >= 1 << 20 else f"{num_bytes:,} bytes"


class _Refused(yaml.MarkedYAMLError):
    """A bound or rule of ``_BoundedLoader`` broken at ``mark``."""

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem=problem, problem_mark=mark)


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, counting depth and (alias-expanded) nodes while composing and refusing
    duplicate keys while constructing."""

    def __init__(self, stream: str, max_depth: int, max_nodes: int) -> None:
        super().__init__(stream)
        self.max_depth = max_depth
        self.max_nodes = max_nodes
        self.depth = 0  # of the node being composed
        self.num_nodes = 0  # composed so far, an alias counting as the whole subtree it repeats
        self.extent: dict[int, tuple[int, int]] = {}  # id(node) -> (nodes, height) once composed
        self.checked: set[int] = set()  # mappings already checked for duplicate keys
        self.last_mark: Any = None  # where the node being constructed starts

    def _count(self, num: int, mark: Any) -> None:
        self.num_nodes += num
        if self.num_nodes > self.max_nodes:
            raise _Refused(f"more than {self.max_nodes:,} values once aliases are expanded (an alias bomb?)", mark)

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            node = self.anchors.get(event.anchor)
            if node is not None:  # an undefined alias is PyYAML's own error
                if id(node) not in self.extent:
                    raise _Refused(f"alias *{event.anchor} repeats a node that contains it", event.start_mark)
                num, height = self.extent[id(node)]
                if self.depth + height > self.max_depth:
                    raise _Refused(
                        f"nested deeper than {self.max_depth} levels once aliases are expanded", event.start_mark
                    )
                self._count(num, event.start_mark)
            return super().compose_node(parent, index)
        mark = self.peek_event().start_mark
        if self.depth >= self.max_depth:
            raise _Refused(f"nested deeper than {self.max_depth} levels", mark)
        self.depth += 1
        before = self.num_nodes
        node = super().compose_node(parent, index)
        self.depth -= 1
        self._count(1, mark)
        if isinstance(node, SequenceNode):
            children = node.value
        elif isinstance(node, MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = []
        height = 1 + max((self.extent[id(c)][1] for c in children), default=0)
        self.extent[id(node)] = (self.num_nodes - before, height)
        return node

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        self.last_mark = node.start_mark
        return super().construct_object(node, deep=deep)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, MappingNode) and id(node) not in self.checked:
            self.checked.add(id(node))
            first_line: dict[Any, int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # merged keys may be overridden; a complex key is PyYAML's own error
                key = self.construct_object(key_node)
                try:
                    seen = first_line.get(key)
                except TypeError:
                    continue
                if seen is not None:
                    raise _Refused(f"duplicate key {key!r} (first given on line {seen})", key_node.start_mark)
                first_line[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def parse_yaml(
    text: str,
    name: str,
    max_depth: int = MAX_YAML_DEPTH,
    max_nodes: int = MAX_YAML_NODES,
) -> Any:
    """The document in ``text`` within the bounds; ValueError ``"{name}: line N: ..."`` otherwise."""
    bad = _NON_PRINTABLE.search(text)
    if bad is not None:
        line = text.count("\n", 0, bad.start()) + 1
        char = bad.group()
        what = "a NUL byte" if char == "\0" else f"control character U+{ord(char):04X}"
        raise ValueError(f"{name}: line {line}: {what}, not allowed in YAML (a binary or corrupted file?)")
    loader = _BoundedLoader(text, max_depth, max_nodes)
    try:
        return loader.get_single_data()
    except _Refused as exc:
        raise ValueError(f"{name}: line {exc.problem_mark.line + 1}: {exc.problem}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f" line {mark.line + 1}:" if mark is not None else ""
        problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc)
        context, context_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
        if problem == "second occurrence" and context and context_mark is not None:  # a duplicate anchor
            problem = context.replace("; first occurrence", f" (first on line {context_mark.line + 1})")
        elif problem.startswith("but ") and context:
            problem = f"{context} {problem}"
        raise ValueError(f"{name}:{where} not valid YAML ({_one_line(problem)})") from None
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:  # a value PyYAML cannot build
        mark = loader.last_mark
        where = f" line {mark.line + 1}:" if mark is not None else ""
        raise ValueError(f"{name}:{where} not valid YAML ({_one_line(exc) or type(exc).__name__})") from None
    finally:
        loader.dispose()


def read_yaml_mapping(path: Path | str, what: str = "file", fields: str = "fields") -> dict[str, Any]:
    """The mapping in a YAML (or JSON) file; an empty file is an empty mapping."""
    p = Path(path)
    data = parse_yaml(read_text(p, what, max_bytes=MAX_YAML_BYTES), str(p))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"{p}: expected a mapping of {fields}, got {type(data).__name__}")
    return data


def read_json_object(path: Path | str, what: str = "file") -> dict[str, Any]:
    """The JSON object in ``path``."""
    p = Path(path)
    text = read_text(p, what)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}: corrupted {what}, not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise ValueError(f"{p}: corrupted {what}, not valid JSON (nested too deeply)") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise ValueError(f"{p}: corrupted {what}, not valid JSON ({_one_line(exc)})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{p}: corrupted {what}, expected a JSON object, got {type(data).__name__}")
    return data
