"""Where variables occur: the walk of small nodes and the position maps of large ones agree, and a
let chain's derivative is interned in work linear in its length (issue 44: it was quadratic)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from exprgen import sample

from knossos import hamt
from knossos.alpha import PRIME, edge, position_from_map, position_in, position_map
from knossos.cli import main
from knossos.expr import Expr
from knossos.freeset import footprint
from knossos.ops import BINDERS, Op
from knossos.parser import load_program

from conftest import run_cli


def nodes_of(root: Expr) -> list[Expr]:
    seen: dict[int, Expr] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) not in seen:
            seen[id(node)] = node
            stack.extend(node.args)
    return list(seen.values())


def reference_position(node: Expr, name: str) -> tuple[int, int]:
    """The definition: over the occurrences of ``name``, the sum of the edge maps composed down to it."""
    if node.op is Op.VAR:
        return (1, 1) if node.data == name else (0, 0)
    binder = BINDERS.get(node.op)
    p = n = 0
    for i, child in enumerate(node.args):
        if binder is not None and (i == binder[0] or (i == binder[1] and node.args[binder[0]].data == name)):
            continue
        cp, cn = reference_position(child, name)
        r, sh = edge(node.op, i)
        p, n = p + r * cp + sh * cn, n + cn
    return (p % PRIME, n % PRIME)


@pytest.mark.parametrize("seed", range(0, 300, 30))
def test_position_maps_and_the_walk_agree_with_the_definition(seed: int) -> None:
    checked = 0
    for offset in range(30):
        nodes = nodes_of(sample(seed + offset, 6).body)
        names = {name for node in nodes for name in node.free} | {"not_a_free_name"}
        for node in nodes:  # walked first, as nodes this small are
            for name in names:
                assert position_in(node, name) == reference_position(node, name), (str(node), name)
        for node in nodes:
            positions = position_map(node)
            for name in names:
                assert position_from_map(positions, name) == reference_position(node, name), (str(node), name)
                checked += 1
    assert checked > 500


def test_a_trie_keeps_names_whose_hashes_are_equal_apart() -> None:
    trie = None
    for k in range(5):
        trie = hamt.put(trie, (f"v{k}", 7, k, 1))  # one hash for all: they meet past the hash's bits
    assert sorted((leaf[0], leaf[2]) for leaf in hamt.iter_leaves(trie)) == [(f"v{k}", k) for k in range(5)]
    assert hamt.lookup(trie, "v3", 7) == ("v3", 7, 3, 1)
    for k in range(5):
        trie = hamt.remove(trie, f"v{k}", 7)
    assert trie is None


def let_chain(n: int) -> str:
    """``a_k = a_(k-1) * x``: the derivative's backward pass uses every ``a_k`` again."""
    body = f"a{n}"
    for k in range(n, 0, -1):
        body = f"(let (a{k} (mul {'x' if k == 1 else f'a{k - 1}'} x)) {body})"
    return f"(def f Float ((x : Float)) {body})\n"


def test_the_reverse_derivative_of_a_long_let_chain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    n, x = 1000, 1.0004
    src, out = tmp_path / "lets.ks", tmp_path / "grad.ks"
    src.write_text(let_chain(n))
    code, _, err = run_cli(main, capsys, "grad", str(src), "--mode", "rev", "-o", str(out))
    assert code == 0, err
    code, text, err = run_cli(main, capsys, "eval", str(out), "rev$f", "--args", json.dumps([x, 1.0]))
    assert code == 0, err
    assert json.loads(text) == pytest.approx((n + 1) * x**n, rel=1e-9)  # d/dx x^(n+1)
    # Interning the derivative memoised a few positions per node; walking from each a_k's let to its
    # use in the backward pass memoised the square of the length (1.5 million entries here).
    body = load_program(out).defs["rev$f"].body
    nodes = nodes_of(body)
    memoised = sum(len(node._positions or ()) for node in nodes)
    assert len(nodes) < 12 * n and memoised < len(nodes), (len(nodes), memoised)
    # Each backward-pass let's free names are its scope's less one: as frozensets, 1.5 million entries
    # here; as FreeSets sharing their tries with their children's, a few dozen per node.
    stored = footprint(node.free for node in nodes)
    assert stored < 30 * len(nodes), (stored, len(nodes))
