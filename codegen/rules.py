"""The names unasync is fed, unasync's Rule that renames them, and the small post-pass after it."""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import tokenize_rt  # type: ignore[import-untyped]  # no py.typed in 6.2.0
import unasync  # type: ignore[import-untyped]  # unasync ships no type hints

# The project's additions to unasync's own table (`__aenter__`, `AsyncIterator`, ... are unasync's).
# Each must fire somewhere in a run: a rule that never fires fails the generator.
EXTRA_NAMES: dict[str, str] = {
    "aclose": "close",
    "_async": "_sync",
    "async_sleep": "sleep",
    "async_gather": "gather",
    "async_run_handler": "run_handler",
    "pytest_asyncio": "pytest",
}
# `AsyncX` -> `X`, `_AsyncX` -> `_X`; unasync's fallback gives `SyncX` (and leaves `_AsyncX`).
ASYNC_NAME_RE = re.compile(r"(_?)Async([A-Z]\w*)")
WORD_RE = re.compile(r"\b[A-Za-z_]\w*\b")
# Post-pass rules, counted like the names.
DOCSTRING = "post:names in docstrings"
DOCSTRING_KEYWORDS = "post:await/async in docstrings"
# In a docstring's code, `await x` becomes `x` and `async with|for|def` loses `async`.
DOCSTRING_KEYWORD_RE = re.compile(r"\bawait\s+|\basync\s+(?=(?:with|for|def)\b)")
AWAITABLE = "post:Awaitable[T] -> T"
MARKER = "@pytest.mark.asyncio"
DROP_MARKER = f"post:drop {MARKER} lines"
POST_RULES = (DOCSTRING, DOCSTRING_KEYWORDS, AWAITABLE, DROP_MARKER)


@dataclass
class RuleStats:
    """How often each project rule fired over a whole generation run."""

    fired: Counter[str] = field(default_factory=Counter)
    fallbacks: list[str] = field(default_factory=list)

    def dead_rules(self) -> list[str]:
        """Return the project rules (extra names, post-pass rules) that never fired."""
        every = [f"name:{k}" for k in EXTRA_NAMES] + list(POST_RULES)
        return [rule for rule in every if not self.fired[rule]]


def docstring_positions(tree: ast.AST) -> set[tuple[int, int]]:
    """Return (line, byte column) of every docstring, as tokenize-rt numbers them."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and (
            body := node.body
        ):
            first = body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                found.add((first.value.lineno, first.value.col_offset))
    return found


def collect_async_names(sources: Iterable[str]) -> dict[str, str]:
    """Map every `Async<Upper>...`/`_Async<Upper>...` name the sources use to its sync name.

    Names are taken from NAME tokens, from strings that are one name (`"AsyncThing"`, which
    unasync renames) and from docstrings (which the post-pass renames). unasync's own table
    entries (`AsyncIterator`, ...) are left to unasync.
    """
    names: dict[str, str] = {}
    for source in sources:
        docstrings = docstring_positions(ast.parse(source))
        for token in tokenize_rt.src_to_tokens(source):
            if token.name == "NAME":
                words = [token.src]
            elif token.name == "STRING" and (token.line, token.utf8_byte_offset) in docstrings:
                words = WORD_RE.findall(token.src)
            elif token.name == "STRING":
                words = [token.src[1:-1]]
            else:
                continue
            for word in words:
                match = ASYNC_NAME_RE.fullmatch(word)
                if match and word not in unasync._ASYNC_TO_SYNC:
                    names[word] = match.group(1) + match.group(2)
    return dict(sorted(names.items()))


class TwinRule(unasync.Rule):  # type: ignore[misc]  # a subclass of an untyped class
    """unasync's Rule, fed the project's names; it only counts what unasync renames.

    unasync's token pass drops `async` and `await` with the whitespace after them, renames
    NAME tokens by its table (`additional_replacements` on top of its own), and renames a
    string literal only when its whole content is one name in that table. Its fallback,
    `AsyncX` -> `SyncX`, never fires here because every `Async` name is in the table; if it
    does, the run fails.
    """

    def __init__(self, fromdir: str, todir: str, names: dict[str, str], stats: RuleStats) -> None:
        super().__init__(fromdir, todir, additional_replacements={**EXTRA_NAMES, **names})
        self.stats = stats

    def _unasync_name(self, name: str) -> str:
        renamed = str(super()._unasync_name(name))
        if renamed != name:
            if name not in self.token_replacements:
                self.stats.fallbacks.append(f"{name} -> {renamed}")
            elif name in EXTRA_NAMES:
                self.stats.fired[f"name:{name}"] += 1
        return renamed

    def table(self) -> dict[str, str]:
        """The whole name table unasync applies: its own entries, then the project's."""
        return dict(self.token_replacements)


def renames(table: dict[str, str], word: str) -> bool:
    """True if unasync's token pass would rename this NAME (table or `AsyncX` fallback)."""
    return word in table or bool(re.fullmatch(r"Async[A-Z]\w*", word))


def post_pass(text: str, table: dict[str, str], stats: RuleStats) -> str:
    """Finish unasync's output: what unasync does not do, kept to four documented rules.

    - names in docstrings are renamed by the same table (unasync skips triple-quoted strings);
    - in docstrings, ``await x`` becomes ``x`` and ``async with``/``async for``/``async def``
      lose ``async`` (examples in docstrings read as sync code in the twin);
    - `Awaitable[T]` becomes `T` (unasync has no rule for a generic to unwrap);
    - `@pytest.mark.asyncio` lines are dropped (the sync test needs no marker).
    """
    docstrings = docstring_positions(ast.parse(text))
    tokens = tokenize_rt.src_to_tokens(text)
    out: list[tokenize_rt.Token] = []
    closers: list[int] = []  # bracket depths whose closing `]` belongs to an unwrapped Awaitable
    depth = 0
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.name == "STRING" and (token.line, token.utf8_byte_offset) in docstrings:

            def rename(match: re.Match[str]) -> str:
                word = match.group(0)
                if word in table:
                    stats.fired[DOCSTRING] += 1
                    return table[word]
                return word

            def drop_keyword(match: re.Match[str]) -> str:
                stats.fired[DOCSTRING_KEYWORDS] += 1
                return ""

            renamed = WORD_RE.sub(rename, token.src)
            token = token._replace(src=DOCSTRING_KEYWORD_RE.sub(drop_keyword, renamed))
        elif token.name == "NAME" and token.src == "Awaitable" and _src(tokens, i + 1) == "[":
            stats.fired[AWAITABLE] += 1
            depth += 1
            closers.append(depth)
            i += 2
            continue
        elif token.name == "OP" and token.src in "([{":
            depth += 1
        elif token.name == "OP" and token.src in ")]}":
            if closers and closers[-1] == depth:
                closers.pop()
                depth -= 1
                i += 1
                continue
            depth -= 1
        out.append(token)
        i += 1
    kept = []
    for line in tokenize_rt.tokens_to_src(out).splitlines(keepends=True):
        if line.strip() == MARKER:
            stats.fired[DROP_MARKER] += 1
            continue
        kept.append(line)
    return "".join(kept)


def _src(tokens: list[tokenize_rt.Token], i: int) -> str | None:
    return tokens[i].src if i < len(tokens) else None
