"""The rules that turn async source into sync source, built on unasync's token rewriter."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import tokenize_rt
import unasync

# unasync's own table, narrowed to the entries this project uses (a rule that never fires fails the
# generator), plus the project's names. `AsyncX` -> `X` is handled by CLASS_RE, not by unasync's
# default `AsyncX` -> `SyncX`.
NAME_RULES: dict[str, str] = {
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "__aiter__": "__iter__",
    "__anext__": "__next__",
    "AsyncIterator": "Iterator",
    "StopAsyncIteration": "StopIteration",
    "aclose": "close",
    "_async": "_sync",
    "async_sleep": "sleep",
    "async_gather": "gather",
    "pytest_asyncio": "pytest",
}
# Names that must never reach a sync twin; each has a flavour pair in runyard._flavours.
FORBIDDEN_IN_SYNC = ("asyncio", "anyio", "await", "async")
# Async-only names the rules do not translate, refused in the async source with the repair.
FORBIDDEN_IN_SOURCE = {
    "AsyncGenerator": "annotate with AsyncIterator[T] (its twin Generator needs 3 arguments)",
    "asynccontextmanager": "write a class with __aenter__/__aexit__",
    "anext": "call __anext__() or iterate with async for",
    "aiter": "call __aiter__() or iterate with async for",
}
# What must not hide inside an f-string either (f-strings are copied untouched).
FSTRING_FORBIDDEN_RE = re.compile(r"\b(_?Async[A-Z]\w*|_async|await|asyncio|aclose)\b")
# Whole lines dropped from the sync twin (stripped text).
DROP_LINES = ("@pytest.mark.asyncio", "import pytest_asyncio")
CLASS_RE = re.compile(r"\b(_?)Async([A-Z]\w*)")
AWAITABLE = "Awaitable"
KEYWORDS = ("async", "await")

FSTRING_START = "FSTRING_START"
FSTRING_END = "FSTRING_END"
STRING_PREFIX_RE = re.compile(r"^[rRbBuUfF]*")


@dataclass
class RuleStats:
    """How often each rule fired over a whole generation run."""

    fired: Counter[str] = field(default_factory=Counter)

    def dead_rules(self) -> list[str]:
        """Return the rules that never fired."""
        every = [f"name:{k}" for k in NAME_RULES]
        every += [f"drop:{line}" for line in DROP_LINES]
        every += ["class:AsyncX", "generic:Awaitable[T]", "keyword:async", "keyword:await"]
        return [rule for rule in every if not self.fired[rule]]


class TwinRule(unasync.Rule):  # type: ignore[misc]
    """unasync's Rule with this project's names, counted, and deterministic across Pythons.

    Python 3.12 tokenises f-strings into parts while 3.10 and 3.11 see one STRING token; to give
    the same output everywhere, f-strings are copied untouched on every version (so never name
    an async-only symbol inside an f-string).
    """

    def __init__(self, fromdir: str, todir: str, stats: RuleStats) -> None:
        super().__init__(fromdir, todir, additional_replacements=NAME_RULES)
        self.token_replacements = dict(NAME_RULES)
        self.stats = stats

    def _unasync_name(self, name: str) -> str:
        if name in self.token_replacements:
            self.stats.fired[f"name:{name}"] += 1
            return str(self.token_replacements[name])
        match = CLASS_RE.fullmatch(name)
        if match:
            self.stats.fired["class:AsyncX"] += 1
            return match.group(1) + match.group(2)
        return name

    def _unasync_text(self, text: str) -> str:
        """Rename async names inside a plain string (docstrings, messages)."""

        def word(m: re.Match[str]) -> str:
            return self._unasync_name(m.group(0))

        return re.sub(r"\b_?[A-Za-z_]\w*\b", word, text)

    def _unasync_tokens(self, tokens: Sequence[tokenize_rt.Token]) -> Iterator[tokenize_rt.Token]:
        tokens = list(tokens)
        out: list[tokenize_rt.Token] = []
        fstring_depth = 0
        unwrap_closers: list[int] = []  # bracket depths whose closing ']' must be dropped
        depth = 0
        i = 0
        while i < len(tokens):
            token = tokens[i]
            if token.name == FSTRING_START:
                fstring_depth += 1
            elif token.name == FSTRING_END:
                fstring_depth -= 1
            if fstring_depth or token.name == FSTRING_END:
                out.append(token)
                i += 1
                continue
            if token.name == "NAME" and token.src in KEYWORDS:
                self.stats.fired[f"keyword:{token.src}"] += 1
                i += 1
                if i < len(tokens) and tokens[i].name == tokenize_rt.UNIMPORTANT_WS:
                    i += 1
                continue
            if token.name == "NAME" and token.src == AWAITABLE and _next_src(tokens, i) == "[":
                self.stats.fired["generic:Awaitable[T]"] += 1
                depth += 1
                unwrap_closers.append(depth)
                i += 2
                continue
            if token.name == "OP" and token.src in "([{":
                depth += 1
            elif token.name == "OP" and token.src in ")]}":
                if unwrap_closers and unwrap_closers[-1] == depth and token.src == "]":
                    unwrap_closers.pop()
                    depth -= 1
                    i += 1
                    continue
                depth -= 1
            if token.name == "NAME":
                token = token._replace(src=self._unasync_name(token.src))
            elif token.name == "STRING":
                prefix = STRING_PREFIX_RE.match(token.src)
                if prefix is None or "f" not in prefix.group(0).lower():
                    token = token._replace(src=self._unasync_text(token.src))
            out.append(token)
            i += 1
        yield from out

    def convert(self, source: str) -> str:
        """Return the sync twin of one async source file's text (before formatting)."""
        kept = []
        for line in source.splitlines(keepends=True):
            if line.strip() in DROP_LINES:
                self.stats.fired[f"drop:{line.strip()}"] += 1
                continue
            kept.append(line)
        tokens = tokenize_rt.src_to_tokens("".join(kept))
        return str(tokenize_rt.tokens_to_src(self._unasync_tokens(tokens)))


def _next_src(tokens: Sequence[tokenize_rt.Token], i: int) -> str | None:
    return tokens[i + 1].src if i + 1 < len(tokens) else None


def forbidden_names(source: str) -> list[str]:
    """Return the async-only names left in generated text, f-strings included."""
    found = []
    depth = 0
    for token in tokenize_rt.src_to_tokens(source):
        if token.name == FSTRING_START:
            depth += 1
        elif token.name == FSTRING_END:
            depth -= 1
        prefix = STRING_PREFIX_RE.match(token.src) if token.name == "STRING" else None
        in_fstring = depth > 0 or (prefix is not None and "f" in prefix.group(0).lower())
        if in_fstring and (match := FSTRING_FORBIDDEN_RE.search(token.src)):
            found.append(f"line {token.line}: {match.group(0)} inside an f-string")
        elif token.name == "NAME" and token.src in FORBIDDEN_IN_SYNC:
            found.append(f"line {token.line}: {token.src}")
    return found


def untranslatable_names(source: str) -> list[str]:
    """Return the async-only names in an async source that no rule translates, with repairs."""
    return [
        f"line {token.line}: {token.src} has no sync twin; {FORBIDDEN_IN_SOURCE[token.src]}"
        for token in tokenize_rt.src_to_tokens(source)
        if token.name == "NAME" and token.src in FORBIDDEN_IN_SOURCE
    ]
