"""Reverse mode on A-normal form: the cotangents of a block's variables, given its result's.

The block's bindings are computed first, as written; then they are visited last to first, and each
binding whose variable has a cotangent passes its parts on to its operands (:mod:`.primitives`).  A
variable used several times collects the parts in a chain of lets, ``d$x_2 = add d$x_1 part``, so
the reverse pass is as long as the forward one.

A read ``t = index k v`` gives ``v`` no full-size one-hot ``deltaVec``: it records the *element*
cotangent ``d$t`` of ``v`` at ``k``, and that record goes out of the loops it was made in for as long
as it can, so that the reverse pass costs a constant times the forward one (the cheap-gradient
principle; Dex's "Getting to the point" and JAX's transpose of a gather do the same):

* out of ``build/sumbuild n (lam k B)`` whose own index ``k`` it is, every element of ``v`` is read
  once: the cotangent of ``v`` is the *gather* ``build (size v) (lam k d$t)``, no accumulation at all
  (with ``if (lt k n)`` around the body unless ``n`` is ``(size v)``);
* out of a loop that ``k`` does not depend on, the records of each iteration are summed in the
  loop's reverse ``sumbuild``, and the sum stays an element record at ``k`` outside;
* an element at ``k`` bound outside a branch goes out of it, zero from the other branch, where it
  is a Float or ``k`` is the index of a loop over ``(size v)`` (its zero reads ``(index k v)``);
* anywhere else (``k`` computed in the loop body, a record on a variable bound in the block, the
  def's parameters) it becomes ``(deltaVec (size v) k d$t)``, which the C++ runtime adds into a
  ``sumbuild``'s accumulator in O(1).

A loop ``v = build n (lam i B)`` gives the other cotangents of the variables that ``B`` uses from
outside as one ``sumbuild n (lam i ...)`` over ``B`` and its reverse pass, seeded with
``index i d$v`` (``d$v`` itself for a sumbuild); each gather is a ``build`` of its own over ``B`` and
the part of its reverse pass that it needs (:func:`autodiff.anf.to_expr` leaves out the rest).  A
branch gives the variables from outside their cotangents from an ``if`` over the reverse passes of
the two branches, each completing the other's with zeros (one ``if`` per cotangent where the arms
compute in constant time).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Union

from autodiff.anf import Bind, Block, Branch, Loop, Names, has_float, is_atom
from autodiff.chunks import chunk_index, flatten
from autodiff.columns import Column, cheap_element, depth_to, gather, nest_path
from autodiff.extents import Extents
from autodiff.primitives import as_op, known_callee, reverse_op
from autodiff.shared_calls import tape_shared_calls
from autodiff.tangent import Shapes
from knossos import expr as E
from knossos.callee import Callee
from knossos.expr import Expr
from knossos.ops import Op
from knossos.types import FLOAT, INTEGER, Kind, Type, vec

#: The derivative of the target of a call (the call, and where it is written in the source).
CallDerivative = Callable[[Expr, "Expr | None"], Callee]
#: An element record's key: the vector variable's name and the index (an atom) it was read at.
Key = tuple[str, Expr]


def wants(atom: Expr) -> bool:
    """Whether an operand takes a cotangent: a variable with Floats in its value."""
    return atom.op is Op.VAR and has_float(atom.type)


def _same_var(a: Expr, b: Expr) -> bool:
    return a.op is Op.VAR and b.op is Op.VAR and a.data == b.data


#: How a cotangent's part is laid out: ``None``, a value of the variable's cotangent type; a tuple, a
#: tuple value whose slots are parts laid out so in turn (the sum of a loop's parts, kept apart).
Layout = Union[tuple["Layout", ...], None]
#: A part of a full cotangent: its value (an atom, but for parts after the first) and its layout.
Part = tuple[Expr, Layout]


class Cotangents:
    """What a block's reverse pass gives: full cotangents by variable name, as the parts that add up to
    them (:meth:`Reverse.total` adds them), and element records."""

    def __init__(self) -> None:
        self.full: dict[str, list[Part]] = {}
        self.elems: dict[Key, Expr] = {}
        #: Element records of a matrix from outside a loop nest read transposed (:mod:`.columns`):
        #: made in the innermost loop's body (the element, by the matrix's name and the outer index's),
        #: then, out of it, its columns.
        self.nested: dict[tuple[str, str], Expr] = {}
        self.columns: list[Column] = []


class Reverse:
    def __init__(self, names: Names, derivative: CallDerivative) -> None:
        self.names = names
        self.shapes = Shapes(names)
        self.derivative = derivative
        #: Every variable that was given a cotangent, by name (names are unique in a def).
        self.vars: dict[str, Expr] = {}
        #: The sizes of the forward vectors known before the def runs (to see that a loop covers one).
        self.extents = Extents()
        #: The forward blocks whose sizes :attr:`extents` has (with every block inside them).
        self.recorded: set[int] = set()
        #: The size of every loop, by its index's name (``(index i v)`` cannot fail where it is ``v``'s).
        self.ranges: dict[str, Expr] = {}
        #: Values of loops two deep, stored by the outer loop's reverse pass: by name, the outer loop's
        #: index and the tape (a build over the outer loop of builds over the inner one).
        self.taped: dict[str, tuple[Expr, Expr]] = {}
        #: Gathers not yet bound, by the name of the variable that stands for each in the parts: the
        #: loop, its reverse body, the vector and the element (:meth:`_settle` binds them).
        self.pending: dict[str, tuple[Loop, Block, Expr, Expr]] = {}
        #: Vectors read in chunks (:mod:`.chunks`), by the name of the variable that stands for each
        #: as a vector of chunks in element records: the vector and the chunks' length.
        self.chunks: dict[str, tuple[Expr, int]] = {}
        #: The blocks being reversed, outermost first: each forward block and its reverse block.
        self.stack: list[tuple[Block, Block]] = []
        #: The loop whose body each block is, by the block's id (for :func:`columns.nest_path`).
        self.enclosing: dict[int, Loop] = {}

    def def_block(self, b: Block, seed: Expr) -> tuple[Block, Cotangents]:
        """:meth:`block` of a def's body, its loops' inner Float loops taped (:meth:`_pretape`)."""
        return self.block(Block([x for bind in b.binds for x in self._pretape(bind)], b.result), seed)

    def _pretape(self, bind: Bind) -> list[Bind]:
        """``bind``, a loop whose body computes Float loops that are not its element (a row's sum of
        exponentials, a group's variance), as tapes of them (builds over the loop of its body up to
        each) followed by the loop reading them from there.  The reverse pass needs them too: it
        reads them from the tapes instead of computing them again (in tapes of its own, as
        :meth:`_stored` makes for loops that are not Floats).  No loop is computed twice: each tape's
        body reads the earlier tapes."""
        loop = bind.value
        if not isinstance(loop, Loop):
            return [bind]
        tapes: list[Bind] = []
        binds: list[Bind] = []
        for inner in loop.body.binds:
            value = inner.value
            if isinstance(value, Loop) and value.type is FLOAT and inner.var is not loop.body.result:
                tape = E.var(self.names.fresh(f"{inner.var.data}$tape"), vec(FLOAT))
                tapes.append(Bind(tape, Loop(Op.BUILD, loop.n, loop.index, Block([*binds, inner], inner.var))))
                binds.append(Bind(inner.var, E.op(Op.INDEX, loop.index, tape), inner.source))
            else:
                binds.append(inner)
        if not tapes:
            return [bind]
        return [*tapes, Bind(bind.var, Loop(loop.op, loop.n, loop.index, Block(binds, loop.body.result)), bind.source)]

    def block(self, b: Block, seed: Expr, stored: dict[str, Bind] | None = None) -> tuple[Block, Cotangents]:
        """``b``'s bindings, then its reverse pass from the cotangent ``seed`` of its result; and the
        cotangents (atoms) of the variables, bound in ``b`` or outside it, that have one: full ones,
        and element records of variables from outside ``b``.  ``stored`` replaces forward bindings, by
        variable name (values read back from where the forward pass stored them, not computed again)."""
        replaced = stored or {}
        out = Block([replaced.get(x.var.data, x) for x in b.binds])
        cot = Cotangents()
        if id(b) not in self.recorded:
            self.extents.record(b)
            self.recorded |= _blocks(b)
        assert b.result is not None
        if wants(b.result):
            self.give(out, cot, b.result, seed if is_atom(seed) else self.names.bind(out, seed, "d$r"))
        self.stack.append((b, out))
        for bind in reversed(b.binds):
            name = bind.var.data
            self._nest(cot, bind)
            self.flush(out, cot, lambda key, name=name: self._record_of(key[0]) == name)  # type: ignore[misc]
            dv = self.total(out, cot, name)
            if dv is not None:
                self._bind(out, cot, bind, dv)
        self.stack.pop()
        return out, cot

    def _nest(self, cot: Cotangents, bind: Bind) -> None:
        """The records of ``t = (index j V)`` at the index of an outer loop, as records of ``V``'s
        elements where :mod:`.columns` gathers them (else :meth:`flush` makes them one-hot rows)."""
        value = bind.value
        if not isinstance(value, Expr) or value.op is not Op.INDEX or not wants(value.args[1]):
            return
        j, v = value.args
        for key in [key for key in cot.elems if key[0] == bind.var.data]:
            i = key[1]
            part = cot.elems[key]
            if not nest_path(self.stack, self.enclosing, v, j, i):
                continue
            if not cheap_element(self.stack, part, depth_to(self.stack, self.enclosing, i)):
                continue
            del cot.elems[key]
            self.vars[v.data] = v
            nested = (v.data, i.data)
            prev = cot.nested.get(nested)
            out = self.stack[-1][1]
            cot.nested[nested] = part if prev is None else self.names.bind(out, E.op(Op.ADD, prev, part), f"d${v.data}")

    def give(self, out: Block, cot: Cotangents, atom: Expr, part: Expr, layout: Layout = None) -> None:
        """Add ``part`` (laid out as ``layout``) to the cotangent of ``atom`` (nothing for a literal or a
        value without Floats).  The parts are kept apart until :meth:`total` adds them: a variable from
        outside a loop gets them, one slot each, from the loop's ``sumbuild``, which the C++ adds into its
        accumulator in place (a one-hot in O(1)), where ``(add part part)`` in each iteration would make
        a full-size value (a weight matrix's, per batch row and output)."""
        if not wants(atom):
            return
        name = atom.data
        self.vars[name] = atom
        parts = cot.full.setdefault(name, [])
        if not parts and not is_atom(part):  # later parts stay unbound: total() adds them as they are
            part = self.names.bind(out, part, f"d${name}")
        parts.append((part, layout))

    def total(self, out: Block, cot: Cotangents, name: str) -> Expr | None:
        """The full cotangent of the variable ``name`` (an atom; its parts added in ``out``), or None."""
        parts = cot.full.get(name)
        if parts is None:
            return None
        leaves = [leaf for part in self._settle(out, parts) for leaf in self._leaves(out, part, name)]
        acc = leaves[0]
        for leaf in leaves[1:]:
            acc = self.names.bind(out, E.op(Op.ADD, acc, leaf), f"d${name}")
        cot.full[name] = [(acc, None)]
        return acc

    def _leaves(self, out: Block, part: Part, name: str) -> Iterator[Expr]:
        atom, layout = part
        if layout is None:
            yield atom
            return
        if not is_atom(atom):
            atom = self.names.bind(out, atom, f"d${name}")
        for k, slot in enumerate(layout):
            got = self.names.bind(out, E.get(k + 1, len(layout), atom), f"d${name}")
            yield from self._leaves(out, (got, slot), name)

    def _bundle(self, inner: Block, parts: list[Part], name: str) -> Part:
        """The parts as one value (bound in ``inner``): the one part, or the tuple of them."""
        parts = self._settle(inner, parts)
        atoms = [atom if is_atom(atom) else self.names.bind(inner, atom, f"d${name}") for atom, _ in parts]
        if len(parts) == 1:
            return atoms[0], parts[0][1]
        return E.tuple_(*atoms), tuple(layout for _, layout in parts)

    def give_elem(self, out: Block, cot: Cotangents, v: Expr, k: Expr, part: Expr) -> None:
        """Add ``part`` to the cotangent of the element ``k`` of ``v``."""
        self.vars[v.data] = v
        key = (v.data, k)
        prev = cot.elems.get(key)
        if prev is None:
            cot.elems[key] = part if is_atom(part) else self.names.bind(out, part, f"d${v.data}")
        else:
            cot.elems[key] = self.names.bind(out, E.op(Op.ADD, prev, part), f"d${v.data}")

    def flush(self, out: Block, cot: Cotangents, which: Callable[[Key], bool]) -> None:
        """The element records ``which`` selects, as one-hot vectors added to their variables' cotangents
        (a chunk's record: a sum of one-hots at its elements)."""
        for key in [key for key in cot.elems if which(key)]:
            part = cot.elems.pop(key)
            if key[0] in self.chunks:
                v, c = self.chunks[key[0]]
                j = E.var(self.names.fresh("i"), INTEGER)
                body = Block()
                elem = self.names.bind(body, E.op(Op.INDEX, j, part), "d$elem")
                at = E.op(Op.ADD, E.op(Op.MUL, key[1], E.const(c)), j)
                body.result = self.names.bind(body, E.op(Op.DELTAVEC, E.op(Op.SIZE, v), at, elem), f"d${v.data}")
                self.give(out, cot, v, self.names.bind(out, Loop(Op.SUMBUILD, E.const(c), j, body), f"d${v.data}"))
                continue
            v = self.vars[key[0]]
            self.give(out, cot, v, E.op(Op.DELTAVEC, E.op(Op.SIZE, v), key[1], part))

    def _record_of(self, name: str) -> str:
        """The variable whose elements the records of ``name`` are (itself, or the vector of a chunk)."""
        chunked = self.chunks.get(name)
        return name if chunked is None else chunked[0].data

    def _chunked(self, name: str, c: int) -> Expr:
        """The variable that stands for ``name``'s vector as a vector of chunks of ``c`` in records."""
        v = self.vars[name]
        key = f"{name}$chunks{c}"  # (never bound: no name of the def has a '$' and a number so)
        self.chunks[key] = (v, c)
        self.vars[key] = E.var(key, vec(v.type))
        return self.vars[key]

    def _bind(self, out: Block, cot: Cotangents, bind: Bind, dv: Expr) -> None:
        value = bind.value
        if isinstance(value, Loop):
            self._loop(out, cot, value, dv, bind.var)
        elif isinstance(value, Branch):
            self._branch(out, cot, value, dv)
        elif value.op is Op.CALL and not known_callee(value.data):
            self._call(out, cot, value, dv, bind.source)
        elif value.op is Op.INDEX and wants(value.args[1]):
            self.give_elem(out, cot, value.args[1], value.args[0], dv)
        else:
            e = as_op(value) if value.op is Op.CALL else value
            for atom, part in reverse_op(e, bind.var, dv, wants, self.shapes):
                self.give(out, cot, atom, part)

    def _call(self, out: Block, cot: Cotangents, call: Expr, dv: Expr, source: Expr | None) -> None:
        args = call.args
        if not any(wants(a) for a in args):
            return
        rev = self.derivative(call, source)
        parts = self.names.bind(out, E.call(rev, *args, dv), f"d${call.data.name}")
        for k, a in enumerate(args):
            if wants(a):
                self.give(out, cot, a, parts if len(args) == 1 else E.get(k + 1, len(args), parts))

    # -- loops and branches: what goes out of an inner block --------------------------------------
    def _outer(self, inner: Block, cot: Cotangents, bound: set[str]) -> list[str]:
        """The variables from outside ``inner`` that its reverse pass gave a full cotangent."""
        return sorted(set(cot.full) - bound - {b.var.data for b in inner.binds})

    def _parts(self, inner: Block, cot: Cotangents, names: list[str], keys: list[Key]) -> Expr:
        """The tuple (or the one part) of ``names``' full cotangents and ``keys``' element records,
        zeros for those ``cot`` lacks (the sums of parts bound in ``inner``)."""
        parts = self._part_list(inner, cot, names, keys)
        return parts[0] if len(parts) == 1 else E.tuple_(*parts)

    def _part_list(self, inner: Block, cot: Cotangents, names: list[str], keys: list[Key]) -> list[Expr]:
        """:meth:`_parts` as a list."""
        parts: list[Expr] = []
        for n in names:
            full = self.total(inner, cot, n)
            parts.append(full if full is not None else self.shapes.zero_like(self.vars[n]))
        for key in keys:
            part = cot.elems.get(key)
            parts.append(part if part is not None else self._zero_elem(key))
        return parts

    def _zero_elem(self, key: Key) -> Expr:
        """The zero of the element ``key`` of a vector: shaped like it, read where the index is in
        range; where it may not be (a record out of a guard, :meth:`_branch`), an empty value past
        the end, which no gather reads (each reads the elements below the vector's size)."""
        name, k = key
        v = self.vars[name]
        zero = self.shapes.zero_like(E.op(Op.INDEX, k, v))
        if v.type.elem is FLOAT or self._in_range(key):
            return zero
        return E.op(Op.IF, E.op(Op.LT, k, E.op(Op.SIZE, v)), zero, _empty(v.type.elem, self.names))

    def _in_range(self, key: Key) -> bool:
        """Whether the index of ``key`` is that of a loop over its vector's size."""
        name, k = key
        n = self.ranges.get(k.data) if k.op is Op.VAR else None
        return n is not None and self.extents.covers(n, self.vars[name])

    def _collect(self, out: Block, cot: Cotangents, names: list[str], keys: list[Key], parts: Expr) -> None:
        count = len(names) + len(keys)
        for k, name in enumerate(names):
            self.give(out, cot, self.vars[name], parts if count == 1 else E.get(k + 1, count, parts))
        for k, key in enumerate(keys, len(names)):
            self.give_elem(out, cot, self.vars[key[0]], key[1], parts if count == 1 else E.get(k + 1, count, parts))

    def _loop(self, out: Block, cot: Cotangents, loop: Loop, dv: Expr, v: Expr) -> None:
        seed = E.op(Op.INDEX, loop.index, dv) if loop.op is Op.BUILD else dv
        self.ranges[loop.index.data] = loop.n
        self.enclosing[id(loop.body)] = loop
        inner, inner_cot = self.block(loop.body, seed, self._stored(out, loop, v))
        start = len(out.binds)  # (where a tape of the derivative calls the loops below share goes)
        for (name, at), part in inner_cot.nested.items():  # the loop over j: columns from here
            row = E.var(self.names.fresh(f"{loop.index.data}"), INTEGER)
            inner_cot.columns.append(Column(self.vars[name], E.var(at, INTEGER), part, row))
        for col in inner_cot.columns:
            if col.at.data == loop.index.data:  # the loop over i: the gather
                self.give(out, cot, col.v, gather(self.names, out, col, loop, inner))
            else:  # the loop over j, or one between: summed over
                col.loops.append((loop, inner))
                cot.columns.append(col)
        bound = {b.var.data for b in loop.body.binds}
        values = {b.var.data: b.value for b in loop.body.binds if isinstance(b.value, Expr)}
        gathers: dict[str, Expr] = {}
        lifted: list[Key] = []
        for key in list(inner_cot.elems):
            name, k = key
            o = None if name in self.chunks else chunk_index(k, loop, values, bound)
            if o is not None:  # elements o c + j for j < c: chunk o, gathered (autodiff/chunks.py)
                c = loop.n.data
                assert isinstance(c, int)
                chunk = Loop(Op.BUILD, loop.n, loop.index, Block(inner.binds, inner_cot.elems.pop(key)))
                self.give_elem(out, cot, self._chunked(name, c), o, self.names.bind(out, chunk, f"d${name}"))
            elif _same_var(k, loop.index):
                gathers[name] = inner_cot.elems.pop(key)
            elif name not in self.chunks and name not in bound and self._to_the_end(loop, k, values, bound):
                shift = _shift(k, loop.index, values, bound)
                assert shift is not None
                part = inner_cot.elems.pop(key)
                self.give(
                    out, cot, self.vars[name], self._shifted_gather(out, loop, inner, self.vars[name], part, shift)
                )
            elif k.op is Op.CONST or (k.op is Op.VAR and k.data not in bound):
                lifted.append(key)
        self.flush(inner, inner_cot, lambda key: key not in lifted)
        names = self._outer(loop.body, inner_cot, {loop.index.data})
        # One sumbuild per cotangent: each computes only what its part needs, and nothing has to take
        # its part out of a tuple (the C++ adds a loop in a sumbuild's body straight into the sum).
        bundles = [(name, *self._bundle(inner, inner_cot.full[name], name)) for name in names]
        lifted_parts = [(key, self._parts(inner, inner_cot, [], [key])) for key in lifted]
        shared = [r for _, r, _ in bundles] + [p for _, p in lifted_parts] + list(gathers.values())
        tape_shared_calls(self.names, out, start, loop, inner, shared)
        for name, result, layout in bundles:
            summed = Block(inner.binds, result)
            part = self.names.bind(out, Loop(Op.SUMBUILD, loop.n, loop.index, summed), f"d${name}")
            self.give(out, cot, self.vars[name], part, layout)
        for key, parts in lifted_parts:
            part = self.names.bind(out, Loop(Op.SUMBUILD, loop.n, loop.index, Block(inner.binds, parts)), f"d${key[0]}")
            self._collect(out, cot, [], [key], part)
        for name, part in gathers.items():  # bound when the parts are added (:meth:`_settle`)
            if name in self.chunks:  # the chunks of a vector, gathered: flattened into its shape
                v, c = self.chunks[name]
                rows = self.names.bind(out, Loop(Op.BUILD, loop.n, loop.index, Block(inner.binds, part)), f"d${name}")
                self.give(out, cot, v, flatten(self.names, self.shapes, out, v, c, rows, loop.n))
                continue
            v = self.vars[name]
            stand_in = E.var(self.names.fresh(f"d${name}$gather"), v.type)  # never in the output
            self.pending[stand_in.data] = (loop, inner, v, part)
            self.give(out, cot, v, stand_in)

    def _settle(self, out: Block, parts: list[Part]) -> list[Part]:
        """``parts`` with their pending gathers bound in ``out``: a run of gathers next to each other
        over loops of the same size is one gather of the sum of their elements (the loops fused: one
        pass writes the cotangent, where each gather and each add of two would be a pass of its own
        over a vector the size of ``v``); the elements add in the order the parts did."""
        settled: list[Part] = []
        run: list[tuple[Loop, Block, Expr, Expr]] = []

        def close() -> None:
            if run:
                settled.append((self._fused_gather(out, run), None))
                run.clear()

        for atom, layout in parts:
            gather = self.pending.pop(atom.data, None) if atom.op is Op.VAR else None
            if gather is None:
                close()
                settled.append((atom, layout))
                continue
            if run and not self._same_size(run[0][0].n, gather[0].n):
                close()
            run.append(gather)
        close()
        return settled

    def _same_size(self, a: Expr, b: Expr) -> bool:
        """Whether two loop sizes (atoms) are the same value: one atom, or sizes of one vector."""
        if a.op is b.op and a.data == b.data:
            return True
        sizes = self.extents.size_of
        return a.op is Op.VAR and b.op is Op.VAR and a.data in sizes and sizes.get(b.data) == sizes[a.data]

    def _fused_gather(self, out: Block, run: list[tuple[Loop, Block, Expr, Expr]]) -> Expr:
        """One gather (bound in ``out``) of the sum of the elements of the gathers ``run`` (loops of
        one size): their reverse bodies one after the other in one loop, over the first's index (the
        others' indices bound to it; a def's names are its own, so the bodies bind no name twice)."""
        loop, inner, v, part = run[0]
        if len(run) == 1:
            return self._gather(out, loop, inner, v, part)
        body = Block(list(inner.binds))
        acc = part
        for other, other_inner, _, other_part in run[1:]:
            body.binds.append(Bind(other.index, loop.index))
            body.binds += other_inner.binds
            acc = self.names.bind(body, E.op(Op.ADD, acc, other_part), f"d${v.data}")
        return self._gather(out, loop, body, v, acc)

    def _stored(self, out: Block, loop: Loop, v: Expr) -> dict[str, Bind]:
        """The forward bindings of ``loop``'s body that its reverse pass reads back instead of computing
        them again in each of its loops: a build's element from the loop's value ``v`` (the reverse
        pass of ``(tanh s)``, ``(exp s)``, ``(div a b)`` needs it, and would otherwise compute ``s``, a
        dot product say, again), and each inner loop's value from a *tape*, a build over the loop of
        the body up to that value, bound in ``out`` (a hidden layer's activations, once, instead of
        once per cotangent that needs them)."""
        r = loop.body.result
        stored: dict[str, Bind] = {}
        for bind in loop.body.binds:
            name = bind.var.data
            if name in self.taped:
                outer, tape = self.taped.pop(name)
                row = self.names.bind(out, E.op(Op.INDEX, outer, tape), f"{name}$row")
                stored[name] = Bind(bind.var, E.op(Op.INDEX, loop.index, row), bind.source)
            elif loop.op is Op.BUILD and r is not None and bind.var is r:
                stored[name] = Bind(r, E.op(Op.INDEX, loop.index, v), bind.source)
            elif isinstance(bind.value, Loop):
                forward = Block(loop.body.binds, bind.var)
                tape = self.names.bind(out, Loop(Op.BUILD, loop.n, loop.index, forward), f"{name}$tape")
                stored[name] = Bind(bind.var, E.op(Op.INDEX, loop.index, tape), bind.source)
            if isinstance(bind.value, Loop):
                self._tape_inner(out, loop, bind.value)
        return stored

    def _tape_inner(self, out: Block, loop: Loop, inner: Loop) -> None:
        """Tapes, over ``loop`` and its inner loop ``inner``, of the loops in ``inner``'s body: the
        reverse pass of ``loop`` reads ``inner``'s from them (:attr:`taped`) instead of computing them
        again in each of its cotangents' loops (a matrix-vector product per cotangent of an RNN cell)."""
        for bind in inner.body.binds:
            if not isinstance(bind.value, Loop):
                continue
            name = bind.var.data
            row = E.var(self.names.fresh(f"{name}$row"), vec(bind.var.type))
            rows = Loop(Op.BUILD, inner.n, inner.index, Block(inner.body.binds, bind.var))
            forward = Block([*loop.body.binds, Bind(row, rows)], row)
            tape = self.names.bind(out, Loop(Op.BUILD, loop.n, loop.index, forward), f"{name}$tape")
            self.taped[name] = (loop.index, tape)

    def _gather(self, out: Block, loop: Loop, inner: Block, v: Expr, part: Expr) -> Expr:
        """``build (size v) (lam i part)``: the cotangent of ``v`` whose element ``i`` the loop's
        iteration ``i`` reads (only there, and only it); bound in ``out``, its variable returned."""
        i = loop.index
        n = loop.n
        if self.extents.covers(n, v):
            return self.names.bind(out, Loop(Op.BUILD, n, i, Block(inner.binds, part)), f"d${v.data}")
        # Where the loop may not be over (size v), v's elements past its end get zeros, in a vector
        # made only when the sizes differ, so that the usual gather is a plain build (which the C++
        # adds into a sum element by element, and recognises in products).  The padded vector
        # computes the body again where it has no loops (a constant more code); else it copies the
        # gather, since a second copy of a reverse pass with loops in every loop around it doubles
        # the code per level of a loop nest.
        size = self.names.bind(out, E.op(Op.SIZE, v), "t")
        zero = Block([], self.shapes.zero_like(E.op(Op.INDEX, i, v)))
        if not _has_loop(inner):
            plain = Block()
            plain.result = self.names.bind(plain, Loop(Op.BUILD, n, i, Block(inner.binds, part)), f"d${v.data}")
            element = Block()
            element.result = self.names.bind(
                element, Branch(E.op(Op.LT, i, n), Block(inner.binds, part), zero), "d$elem"
            )
            padded = Block()
            padded.result = self.names.bind(padded, Loop(Op.BUILD, size, i, element), f"d${v.data}")
            return self.names.bind(out, Branch(E.op(Op.EQ, n, size), plain, padded), f"d${v.data}")
        gathered = self.names.bind(out, Loop(Op.BUILD, n, i, Block(inner.binds, part)), f"d${v.data}")
        j = E.var(self.names.fresh("i"), i.type)
        read = Block()
        read.result = self.names.bind(read, E.op(Op.INDEX, j, gathered), "d$elem")
        element = Block()
        element.result = self.names.bind(
            element, Branch(E.op(Op.LT, j, n), read, Block([], self.shapes.zero_like(E.op(Op.INDEX, j, v)))), "d$elem"
        )
        padded = Block()
        padded.result = self.names.bind(padded, Loop(Op.BUILD, size, j, element), f"d${v.data}")
        return self.names.bind(out, Branch(E.op(Op.EQ, n, size), Block([], gathered), padded), f"d${v.data}")

    def _to_the_end(self, loop: Loop, k: Expr, values: dict[str, Expr], bound: set[str]) -> bool:
        """Whether the loop reads ``(index (add j c) v)`` from ``c`` on, over ``(sub N c)`` iterations (a
        triangular matrix's row): then the gather of ``v`` (:meth:`_shifted_gather`) computes about
        as many elements as the loop has iterations.  A window of a fixed size at ``c`` (a
        convolution's kernel) keeps its one-hots: a gather of the whole vector per window would cost
        the vector's length per output."""
        shift = _shift(k, loop.index, values, bound)
        n = loop.n
        if shift is None or n.op is not Op.VAR:
            return False
        size = next((b.value for f, _ in reversed(self.stack) for b in f.binds if b.var.data == n.data), None)
        return isinstance(size, Expr) and size.op is Op.SUB and size.args[1] is shift

    def _shifted_gather(self, out: Block, loop: Loop, inner: Block, v: Expr, part: Expr, shift: Expr) -> Expr:
        """``build (size v) (lam u ..)``: the cotangent of ``v`` whose element ``u`` the loop's iteration
        ``u - shift`` reads (``(index (add j c) v)``: one iteration per element, the index map
        invertible), zero where that iteration is not in the loop's range; bound in ``out``."""
        j, n = loop.index, loop.n
        u = E.var(self.names.fresh(j.data), INTEGER)
        elem = Block([Bind(j, E.op(Op.SUB, u, shift))])
        low = self.names.bind(elem, E.op(Op.GTE, j, E.const(0)), "t")
        high = self.names.bind(elem, E.op(Op.LT, j, n), "t")
        ok = self.names.bind(elem, E.op(Op.AND, low, high), "t")
        zero = Block([], self._zero_elem((v.data, u)))
        elem.result = self.names.bind(elem, Branch(ok, Block(inner.binds, part), zero), "d$elem")
        size = self.names.bind(out, E.op(Op.SIZE, v), "t")
        return self.names.bind(out, Loop(Op.BUILD, size, u, elem), f"d${v.data}")

    def _branch(self, out: Block, cot: Cotangents, branch: Branch, dv: Expr) -> None:
        then, then_cot = self.block(branch.then, dv)
        other, other_cot = self.block(branch.other, dv)
        keys: list[Key] = []
        for inner, inner_cot, source in ((then, then_cot, branch.then), (other, other_cot, branch.other)):
            bound = {b.var.data for b in source.binds}

            def passes(key: Key, bound: set[str] = bound) -> bool:
                """A Float element, or one whose zero (read at an index in range) costs nothing to make;
                out of a guard (autodiff/hoist.py), any element at a loop's index (its zero then tests
                the range: :meth:`_zero_elem`)."""
                name, k = key
                outside = k.op is Op.CONST or (k.op is Op.VAR and k.data not in bound)
                guarded = branch.guard and (k.data in self.ranges if k.op is Op.VAR else k.op is Op.CONST)
                return outside and (self.vars[name].type.elem is FLOAT or self._in_range(key) or guarded)

            self.flush(inner, inner_cot, lambda key, passes=passes: not passes(key))  # type: ignore[misc]
            keys += [key for key in inner_cot.elems if key not in keys]
        names = sorted(
            set(self._outer(branch.then, then_cot, set())) | set(self._outer(branch.other, other_cot, set()))
        )
        if not names and not keys:
            return
        then_parts = self._part_list(then, then_cot, names, keys)
        other_parts = self._part_list(other, other_cot, names, keys)
        if len(then_parts) > 1 and _constant_cost(then) and _constant_cost(other):
            # One branch per cotangent, as one sumbuild per cotangent of a loop: each computes only its
            # part (to_expr leaves out the rest), and a loop summing it adds a one-hot part in place
            # (a tuple of them would be made, taken apart and added in every iteration, and each
            # cotangent's loop would compute the others' parts too).  The arms compute in constant
            # time, so a copy costs a constant: with a loop in one it could cost a pass per cotangent.
            for k, (a, b) in enumerate(zip(then_parts, other_parts, strict=True)):
                single = self.names.bind(out, Branch(branch.cond, Block(then.binds, a), Block(other.binds, b)), "d$if")
                if k < len(names):
                    self.give(out, cot, self.vars[names[k]], single)
                else:
                    key = keys[k - len(names)]
                    self.give_elem(out, cot, self.vars[key[0]], key[1], single)
            return
        then.result = then_parts[0] if len(then_parts) == 1 else E.tuple_(*then_parts)
        other.result = other_parts[0] if len(other_parts) == 1 else E.tuple_(*other_parts)
        parts = self.names.bind(out, Branch(branch.cond, then, other), "d$if")
        self._collect(out, cot, names, keys, parts)


def _constant_cost(b: Block) -> bool:
    """Whether ``b`` computes in constant time: no loop and no call of a def (in it or its branches)."""
    for bind in b.binds:
        value = bind.value
        if isinstance(value, Loop):
            return False
        if isinstance(value, Branch):
            if not (_constant_cost(value.then) and _constant_cost(value.other)):
                return False
        elif value.op is Op.CALL and not known_callee(value.data):
            return False
    return True


def _shift(k: Expr, j: Expr, values: dict[str, Expr], bound: set[str]) -> Expr | None:
    """``c`` where the index ``k`` is bound in the loop over ``j`` to ``(add j c)``, ``(add c j)`` or
    ``(sub j c')`` (``c = (sub 0 c')``: then an atom only for a literal) with ``c`` an Integer atom
    from outside the loop; None otherwise."""
    value = values.get(k.data) if k.op is Op.VAR else None
    if value is None or value.op not in (Op.ADD, Op.SUB):
        return None
    a, b = value.args
    if value.op is Op.ADD and _same_var(b, j):
        a, b = b, a
    if not _same_var(a, j) or b.type is not INTEGER or (b.op is Op.VAR and b.data in bound) or _same_var(b, j):
        return None
    if value.op is Op.ADD:
        return b
    return E.const(-b.data) if b.op is Op.CONST else None


def _empty(t: Type, names: Names) -> Expr:
    """A value of type ``t`` with every vector in it empty (which nothing reads)."""
    if t.kind is Kind.VEC:
        return E.build(E.const(0), E.var(names.fresh("i"), INTEGER), _empty(t.elem, names))
    if t.kind is Kind.TUPLE:
        return E.tuple_(*(_empty(c, names) for c in t.children))
    return E.const(0.0) if t is FLOAT else E.tuple_()


def _has_loop(b: Block) -> bool:
    """Whether a loop is bound in ``b`` or in a branch of it."""
    for bind in b.binds:
        value = bind.value
        if isinstance(value, Loop) or (isinstance(value, Branch) and (_has_loop(value.then) or _has_loop(value.other))):
            return True
    return False


def _blocks(b: Block) -> set[int]:
    """The ids of ``b`` and of every block inside it."""
    out = {id(b)}
    for bind in b.binds:
        value = bind.value
        if isinstance(value, Loop):
            out |= _blocks(value.body)
        elif isinstance(value, Branch):
            out |= _blocks(value.then) | _blocks(value.other)
    return out
