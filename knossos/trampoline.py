"""Running recursive-looking code on an explicit stack.

Walks over expressions of unbounded depth (parsing, evaluation, abstract interpretation) are written
as generators: a generator ``yield``s a sub-item and receives its result, exactly where a recursive
function would call itself.  :func:`run_steps` drives them from a list, so no Python frame nesting happens.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from types import GeneratorType
from typing import Any, TypeVar

_Item = TypeVar("_Item")
Result = TypeVar("Result")
#: A generator that yields sub-items, receives their results, and returns its own result
#: (``Step[Item, Result]``; a bare ``Step`` is ``Step[Any, Any]``).
Step = Generator[_Item, Result, Result]


def run_steps(
    start: Callable[[_Item], Any],
    root: _Item,
    on_error: Callable[[Exception, _Item], Exception] | None = None,
    max_steps: int | None = None,
    errors: tuple[type[Exception], ...] = (),
) -> Any:
    """Evaluate ``start(root)``.

    ``start(item)`` returns either a finished result or a generator that yields sub-items and
    receives their results.  If ``on_error`` is given, an exception of a type in ``errors`` raised
    by a generator is replaced by ``on_error(exc, item that generator is working on)``.
    ``max_steps`` bounds the number of sub-items started (``RuntimeError`` beyond it).
    """
    first = start(root)
    if not isinstance(first, GeneratorType):
        return first
    stack: list[tuple[Step[Any, Any], _Item]] = [(first, root)]
    value: Any = None
    steps = 0
    while True:
        gen, item = stack[-1]
        try:
            sub = gen.send(value)
        except StopIteration as done:
            stack.pop()
            value = done.value
            if not stack:
                return value
            continue
        except errors as err:
            if on_error is None:
                raise
            raise on_error(err, item) from None
        steps += 1
        if max_steps is not None and steps > max_steps:
            raise StepLimitExceeded(max_steps)
        started = start(sub)
        if isinstance(started, GeneratorType):
            stack.append((started, sub))
            value = None
        else:
            value = started


class StepLimitExceeded(RuntimeError):
    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit} steps")
        self.limit = limit
