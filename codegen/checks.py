"""Checks around unasync: what it would turn into wrong code (before), and what survived (after)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

import tokenize_rt  # type: ignore[import-untyped]  # no py.typed in 6.2.0

from codegen.rules import ASYNC_NAME_RE, MARKER, WORD_RE, docstring_positions, renames

FLAVOURS = (
    "use the flavour pairs in runyard/_flavours.py (async_sleep, async_gather, AsyncLock,"
    " AsyncEvent)"
)
# Names unasync leaves alone although they only make sense in async code, with the repair.
REFUSED: dict[str, str] = {
    "asyncio": f"unasync keeps it, so `await asyncio.sleep(1)` becomes a no-op; {FLAVOURS}",
    "trio": f"unasync keeps it, so `await trio.sleep(1)` becomes a no-op; {FLAVOURS}",
    "anyio": f"unasync keeps it, so `await anyio.sleep(1)` becomes a no-op; {FLAVOURS}",
    "run_in_executor": "its twin would still hand the call to an executor and get a future back;"
    " call the function directly, or add a flavour pair",
    "to_thread": "its twin would still run the call in a thread; call the function directly",
    "Coroutine": "unasync keeps the coroutine type; annotate with Awaitable[T] (its twin is T)",
    "iscoroutinefunction": "its twin would test for coroutines that no longer exist; let the"
    " class decide the flavour (AsyncX vs X)",
    "iscoroutine": "its twin would test for coroutines that no longer exist; let the class"
    " decide the flavour (AsyncX vs X)",
    "isawaitable": "its twin would test for awaitables that no longer exist; let the class"
    " decide the flavour (AsyncX vs X)",
    "__await__": "a sync class cannot be awaited; give the class an async method instead",
    "create_task": "its twin would still schedule a task on an event loop; use the flavour"
    " pairs (async_gather, or add a pair)",
    "ensure_future": "its twin would still schedule a future; use the flavour pairs",
    "create_future": "its twin would still make an event-loop future; use AsyncEvent",
    "call_soon": "its twin would still schedule a callback on an event loop; call it directly",
    "call_soon_threadsafe": "its twin would still schedule a callback on an event loop; call it"
    " directly",
    "wait_for": "its twin would lose the timeout; add a flavour pair with a real sync member",
    "shield": "its twin would lose the shielding; add a flavour pair",
    "AsyncMock": "unasync would turn it into a Mock (the table renames AsyncX to X) and the"
    " twin would test something else; write a small async fake class instead",
    "AsyncGenerator": "annotate with AsyncIterator[T] (unasync's twin Generator needs 3 arguments)",
    "asynccontextmanager": "write a class with __aenter__/__aexit__",
    "aclosing": "call aclose() in a finally block",
    "anext": "call __anext__() or iterate with async for",
    "aiter": "call __aiter__() or iterate with async for",
}
KEYWORDS = ("async", "await")
# What must never reach a twin, f-strings included.
SURVIVORS_RE = re.compile(
    r"\b(async|await|asyncio|anyio|trio|Coroutine|Awaitable|__await__"
    r"|(?!asyncpg\b)(?:[A-Za-z_]\w*[Aa]sync\w*|[Aa]sync\w*))\b"
)
PREFIX_RE = re.compile(r"[A-Za-z]*")


def is_fstring(token: tokenize_rt.Token) -> bool:
    """True for an f-string as one STRING token (Python 3.10 and 3.11 tokenise them so)."""
    prefix = PREFIX_RE.match(token.src)
    return token.name == "STRING" and prefix is not None and "f" in prefix.group(0).lower()


def fstrings(tokens: list[tokenize_rt.Token]) -> Iterator[tuple[int, str]]:
    """Yield (line, text) of every f-string, whether the tokenizer splits it (3.12+) or not."""
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if is_fstring(token):
            yield token.line or 0, token.src
        elif token.name == "FSTRING_START":
            depth, j = 0, i
            while True:
                depth += {"FSTRING_START": 1, "FSTRING_END": -1}.get(tokens[j].name, 0)
                if depth == 0:
                    break
                j += 1
            yield token.line or 0, tokenize_rt.tokens_to_src(tokens[i : j + 1])
            i = j
        i += 1


def before(source: str, table: dict[str, str]) -> list[str]:
    """Return what unasync would turn into a silent no-op or wrong code, as `line N: ...`."""
    tokens = tokenize_rt.src_to_tokens(source)
    problems: list[str] = []
    in_fstring = 0
    for i, token in enumerate(tokens):
        in_fstring += {"FSTRING_START": 1, "FSTRING_END": -1}.get(token.name, 0)
        line = token.line or 0
        if token.name == "NAME" and not in_fstring:
            if token.src == "asyncio" and _line_text(source, line) == MARKER:
                continue  # the post-pass drops the marker line
            if token.src in REFUSED:
                problems.append(f"line {line}: {token.src} has no sync twin; {REFUSED[token.src]}")
            elif token.src in KEYWORDS:
                if tokens[i + 1].name != tokenize_rt.UNIMPORTANT_WS:
                    problems.append(
                        f"line {line}: `{token.src}` must be followed by a space: unasync drops"
                        f" the token after it (write `{token.src} x`, not `{token.src}(x)`)"
                    )
            elif not renames(table, token.src) and re.search("async", token.src, re.I):
                problems.append(
                    f"line {line}: {token.src} would reach the sync twin unchanged (unasync has"
                    " no rule for it); rename it, or add the pair to codegen/rules.py EXTRA_NAMES"
                )
        elif token.name == "COMMENT":
            for word in WORD_RE.findall(token.src):
                if renames(table, word) or SURVIVORS_RE.fullmatch(word):
                    problems.append(
                        f"line {line}: {word} inside a comment: unasync does not rewrite"
                        " comments, so the twin would keep it; reword the comment (docstrings"
                        " are rewritten)"
                    )
    docstrings = docstring_positions(ast.parse(source))
    for token in tokens:
        if (
            token.name == "STRING"
            and not is_fstring(token)
            and (token.line, token.utf8_byte_offset) not in docstrings
            and not ASYNC_NAME_RE.fullmatch(token.src[1:-1])
        ):
            for word in WORD_RE.findall(token.src):
                if ASYNC_NAME_RE.fullmatch(word):
                    problems.append(
                        f"line {token.line}: {word} inside a string: unasync leaves strings"
                        " alone (only docstrings are rewritten), so the sync twin's text would"
                        f" name the async class; write {word}.__name__ or type(self).__name__"
                    )
    for line, text in fstrings(tokens):
        for word in WORD_RE.findall(text):
            if renames(table, word) or word in KEYWORDS:
                problems.append(
                    f"line {line}: {word} inside an f-string: Python 3.10/3.11 see one string"
                    " token that unasync leaves alone, 3.12+ see names it renames; build the"
                    " text outside the f-string, e.g. with type(self).__name__"
                )
    return problems


def after(twin: str, header_lines: int = 0) -> list[str]:
    """Return the async-only words that survived into a twin: names, f-strings, docstrings and
    comments (a docstring saying "await store.open()" would mislead a sync reader). The first
    ``header_lines`` lines (the generated-file header naming the source) are not checked."""
    tokens = tokenize_rt.src_to_tokens(twin)
    problems = [
        f"line {token.line}: {token.src} survives in the sync twin"
        for token in tokens
        if token.name == "NAME" and SURVIVORS_RE.fullmatch(token.src)
    ]
    docstrings = docstring_positions(ast.parse(twin))
    for token in tokens:
        is_doc = token.name == "STRING" and (token.line, token.utf8_byte_offset) in docstrings
        if is_doc or (token.name == "COMMENT" and (token.line or 0) > header_lines):
            where = "a docstring" if is_doc else "a comment"
            for match in SURVIVORS_RE.finditer(token.src):
                problems.append(f"line {token.line}: {match.group(0)} survives in {where}")
    for line, text in fstrings(tokens):
        for match in SURVIVORS_RE.finditer(text):
            problems.append(f"line {line}: {match.group(0)} survives inside an f-string")
    return problems


def _line_text(source: str, line: int) -> str:
    return source.splitlines()[line - 1].strip()
