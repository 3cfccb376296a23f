"""The products pass: which rewrite of :mod:`cpp_backend.products` (and of the modules beside it)
applies where, and in which order, over a def's body before emission."""

from __future__ import annotations

from collections.abc import Callable

from cpp_backend.batched import batched_product
from cpp_backend.contractions import contraction
from cpp_backend.convolutions import gathered_product
from cpp_backend.element_sums import hoist_element_sums
from cpp_backend.guarded_reads import sink_guarded_reads
from cpp_backend.let_chains import peel_lets, wrap_lets
from cpp_backend.one_hot_rows import one_hot_rows
from cpp_backend.products import ROWS_PREFIX, ProductNames, has_product, interchange, small, transpose
from cpp_backend.row_lets import hoist_row_chain, hoist_row_let, share_hoisted
from cpp_backend.static_sizes import StaticSizes
from cpp_backend.summed_gathers import sum_of_gathers
from cpp_backend.tuple_lets import split_tuple_lets
from cpp_backend.uniform_rows import uniform_rows
from cpp_backend.unswitch import unswitch
from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import Op
from knossos.types import Kind


def canonical_products(root: Expr, *, exact_order: bool = False, rows: bool = True) -> Expr:
    """``root`` with every product recognised rewritten into the blocked nest's shape (see the module
    docstring); ``exact_order``: only the rewrites that keep every sum to the bit (transposes);
    ``rows``: with row lengths taken as the first row's (off where that pass asks what a nest reaches)."""
    names = ProductNames(root, exact_order=exact_order)
    sizes = StaticSizes(root)

    def reaches(x: Expr) -> bool:
        """Whether the nest ``x`` reaches the blocked nest (put in its shape by the pass, or as it is)."""
        return has_product(canonical_products(x, exact_order=exact_order, rows=False))

    def here(e: Expr) -> Expr:
        if id(e) in names.fallbacks:
            return e
        if rows and not exact_order and e.op in (Op.BUILD, Op.SUMBUILD):  # (first: its nest is the others')
            uniform = uniform_rows(e, reaches)
            if uniform is not None:
                names.fallbacks[id(e)] = e
                return E.op(Op.IF, uniform[0], uniform[1], e)
        if not exact_order and e.type.kind is Kind.VEC:  # (before the rewrites of one product at a time)
            batched = batched_product(e, names.fresh, sizes)
            if batched is not None:
                names.fallbacks[id(e)] = e
                return batched[0]
        if not exact_order and e.op is Op.BUILD:
            found = gathered_product(e, names.fresh)
            if found is not None:
                names.fallbacks[id(e)] = e
                return found
        if e.op is Op.BUILD:
            found = hoist_element_sums(e, lambda: names.fresh(ROWS_PREFIX), small, reaches)
            if found is not None:
                return found
            found = transpose(e, names)
            if found is not None:
                return found
        if not exact_order and e.op is Op.SUMBUILD and e.type.kind is Kind.VEC:
            found = sum_of_gathers(e) or one_hot_rows(e, names.fresh)
            if found is not None:
                names.fallbacks[id(e)] = e
                return found
        if not exact_order and e.op in (Op.BUILD, Op.SUMBUILD) and e.type.kind is Kind.VEC:
            found = interchange(e, names, lambda x: canonical_products_in(x, here))
            if found is not None:
                return found
            found = unswitched(e)
            if found is not None:
                return found
        if not exact_order and e.op is Op.SUMBUILD and e.type.kind is Kind.FLOAT:
            found = contraction(e, names.fresh, lambda x: canonical_products_in(x, here), has_product)
            if found is not None:
                names.fallbacks[id(e)] = e
                return found
        # Only where the rewrites above do not apply: a sum of vectors under a row's lets that the
        # interchange already makes a product needs no hoist (nor the copy of its rows after it).
        if e.op is Op.BUILD or (e.op is Op.SUMBUILD and e.type.kind is Kind.VEC):
            found = hoist_row_let(e, lambda: names.fresh(ROWS_PREFIX), small, reaches)
            if found is not None:
                return found
            found = hoist_row_chain(e, lambda: names.fresh(ROWS_PREFIX), small, reaches)
            if found is not None:
                return found
        return e

    def unswitched(e: Expr) -> Expr | None:
        """``e`` as a branch over two sums (:func:`unswitch`) where an arm's sum is interchanged (each
        copy costs code: only where it pays), that arm interchanged; else None."""
        switched = unswitch(e)
        if switched is e:
            return None
        lets, branch = peel_lets(switched)
        arms = list(branch.args[1:])
        for k, arm in enumerate(arms):
            done = interchange(arm, names, lambda x: canonical_products_in(x, here))
            if done is not None:
                arms[k] = done
                return wrap_lets(lets, branch.replace_args((branch.args[0], *arms)))
        return None

    root = sink_guarded_reads(root)  # (the reads autodiff hoisted under guards, written in the terms)
    if not exact_order:  # (a tuple's elements as lets: the interchange moves loops past them)
        root = split_tuple_lets(root)
    return share_hoisted(canonical_products_in(root, here), ROWS_PREFIX)


def canonical_products_in(root: Expr, here: Callable[[Expr], Expr]) -> Expr:
    """``root`` rebuilt top-down with ``here`` applied at every node before its children (on an
    explicit stack: deep let chains need no recursion)."""
    top: dict[int, Expr] = {}
    done: dict[int, Expr] = {}
    stack: list[tuple[Expr, bool]] = [(root, False)]
    keep: list[Expr] = []  # the originals stay alive while their ids are keys
    while stack:
        e, ready = stack.pop()
        if ready:
            new = top[id(e)]
            args = tuple(done.get(id(a), a) for a in new.args)  # the original kept as a fallback: as it is
            changed = any(a is not b for a, b in zip(args, new.args, strict=True))
            done[id(e)] = new.replace_args(args) if changed else new
            continue
        if id(e) in done or id(e) in top:
            continue
        keep.append(e)
        new = here(e) if e.op in (Op.BUILD, Op.SUMBUILD) else e
        top[id(e)] = new
        stack.append((e, True))
        stack.extend((a, False) for a in new.args)
    return done[id(root)]


__all__ = ["canonical_products", "canonical_products_in"]
