"""Builds and sums of the function emitter: dense loops, and sums accumulated part by part."""

from __future__ import annotations

import math

from cpp_backend.cpp_text import c_string, cpp_type
from cpp_backend.emit_rows import BLOCK_PANEL, RowProducts
from cpp_backend.emitter_core import EmitStep, is_identifier
from cpp_backend.loop_facts import copy_source, has_loop
from cpp_backend.zeros import zero_shaped
from knossos.expr import Expr
from knossos.ops import Op
from knossos.types import FLOAT, INTEGER, Type, vec


class LoopConstructs(RowProducts):
    """``build`` and ``sumbuild``: filled and accumulated in place, part by part where the body has loops."""

    def _build(self, node: Expr) -> EmitStep:
        size, var, body = node.args
        n = yield size
        self.line(f'ks::check_size({n}, "build");')
        elem = cpp_type(body.type)
        zero = zero_shaped(node)
        if zero is not None:  # a reverse pass's zero cotangent: read lazily, as every element zero
            value = yield zero
            return self.bind(node.type, f"ks::zero_like({value})")
        if body.op in (Op.CONST, Op.VAR) and var.data not in body.free:
            value = yield body
            return self.bind(node.type, f"ks::const_vec<{elem}>({n}, {value})")
        copied = copy_source(var.data, body)
        if copied is not None:  # a copy of v (a gather of a cotangent): v itself where it has n elements
            value = yield copied
            return self.bind(node.type, f"ks::prefix_copy({n}, {value})")
        result = self.fresh()
        self.line(f"const {cpp_type(node.type)} {result} = ks::make_vec<{elem}>({n});")
        sums = self._row_sum(node)
        if sums is body:
            yield from self._rows_or_block(id(node), n, result, var.data, sums)
            return result
        sums_by_row = None
        if sums is not None:  # the sums first, row-wise, into a vector the element loop then reads
            sums_by_row = self.fresh()
            self.line(f"const ks::Vec<double> {sums_by_row} = ks::make_vec<double>({n});")
            yield from self._rows_or_block(id(node), n, sums_by_row, var.data, sums)
        i = self.fresh_var(var.data)
        blocked = self._blockable(node)
        if blocked is not None:  # rows' sums BLOCK_ROWS at a time (see _block_rows)
            count, blk, width = self.fresh("r"), self.fresh("blk"), self.fresh("w")
            panels = self.fresh("pk")
            self.line(f"std::int64_t {count} = 0;")
            self.line(f"ks::Vec<double> {blk};")
            self.line(f"std::int64_t {width} = 0;")
            self.line(f"ks::Vec<double> {panels};  // packed once, for every panel of rows")

        def store() -> EmitStep:
            saved = self._push(var.data, i)
            if blocked is not None:
                yield from self._block_rows(n, i, var.data, blocked[1], (count, blk, width, panels), blocked[0])
                self._row_blocks[id(body)] = (f"{i} % {BLOCK_PANEL} < {count}", blk, f"({i} % {BLOCK_PANEL}) * {width}")
            if sums is not None:
                value = self.bind(FLOAT, f"{sums_by_row}.data[{i}]")
                self._hoisted[id(sums)] = (sums, value, self._bindings(sums))
            value = yield body
            self._row_blocks.pop(id(body), None)
            self._pop(var.data, saved)
            self.line(f"{result}.data[{i}] = {value};")
            return value

        yield from self._loop(
            n,
            i,
            var.data,
            body,
            frozenset({var.data}),
            store,
            done=sums,
            parallel=body.type.is_scalar,
            independent=True,
        )
        return result

    def _sumbuild(self, node: Expr) -> EmitStep:
        size, var, body = node.args
        t = node.type
        n = yield size
        self.line(f'ks::check_size({n}, "sumbuild");')
        acc = self.fresh()
        self.line(f"{cpp_type(t)} {acc}{{}};")
        scalar = t is FLOAT or t is INTEGER
        skipped = self.fresh("s")
        if not scalar:
            self.line(f"if ({n} == 0) {acc} = ks::zero_of<{cpp_type(t)}>({c_string(str(t))});")
            self.line(f"bool {skipped} = false;")
        i = self.fresh_var(var.data)

        # A body with loops in it adds its parts straight into the accumulator (no full-size value of the
        # iteration made and then added; the first iteration assigns them, flagged at run time, so that
        # the body is written once): see _accumulate.  Not in exact order, whose sums of parts would
        # associate otherwise.
        direct = not scalar and not self.exact_order and has_loop(body)
        reset = self._parts_allocate(body, {}) if direct else self.may_allocate(body)
        mark = self.fresh("m")

        def accumulate() -> EmitStep:
            if reset:
                self.line(f"const ks::Arena::Mark {mark} = ks::arena().mark();")
            if direct:
                first = self.fresh("f")
                self.line(f"const bool {first} = {i} == 0;")
                saved = self._push(var.data, i)
                yield from self._accumulate(acc, body, skipped, {}, first)
                self._pop(var.data, saved)
                if reset:  # the first iteration's memory is the accumulator's: release only after later ones
                    self.line(f"if (!{first}) ks::arena().reset({mark});")
                return acc
            value = yield from self._in_scope(var.data, i, body)
            release = f" ks::arena().reset({mark});" if reset else ""
            if t is FLOAT:
                self.line(f"{acc} += {value};{release}")
            elif t is INTEGER:
                self.line(f"{acc} = ks::add_i({acc}, {value});{release}")
            else:
                # the first iteration's memory is the accumulator's: release only after later ones
                self.line(f"if ({i} == 0) {{")
                self.line(f"    {acc} = ks::copy_dense({value});")
                self.line("} else {")
                self.line(f"    ks::add_inplace({acc}, {value}, {skipped});{release}")
                self.line("}")
            return value

        reduce = acc if t is FLOAT else None
        yield from self._loop(
            n,
            i,
            var.data,
            body,
            frozenset({var.data}),
            accumulate,
            parallel=t is FLOAT,
            independent=t is FLOAT,
            reduce=reduce,
        )
        if not scalar:
            self.line(f"if ({skipped}) ks::normalise_zeros({acc});")
        return acc

    def _accumulate(self, dest: str, e: Expr, skipped: str, deferred: dict[str, Expr], first: str | None) -> EmitStep:
        """``dest += e`` for a dense ``dest`` (a sumbuild's accumulator or a part of it), without making
        ``e``'s value where it is a loop: a ``build`` adds each element into its element of ``dest``, a
        ``sumbuild`` each term into ``dest``, a ``deltaVec`` its element into one element, a ``tuple``
        each part, an ``if`` its branch; a ``let`` whose variable is a part of the result (used nowhere else) is added where
        that part is (``deferred``).  Float sums are reassociated (never under exact order, where
        the caller does not come here); the same sizes are checked as ``ks::add_inplace`` checks.

        Where the C++ Bool ``first`` holds (None: never), ``dest`` is the accumulator's first value
        instead: each part is assigned as ``ks::copy_dense`` of the value would make it, a build's
        vector allocated, an inner sum started as its value starts (+0.0, or its first term), so that
        one body serves every iteration."""
        op = e.op
        found = self._hoisted.get(id(e))
        if found is not None and found[2] == self._bindings(e):
            op = Op.CONST  # computed before the loop: added as a value
        elif op is Op.BUILD and self._blockable(e) is not None:
            # a matrix product (a batch's part of dW summed over the batch): made by the blocked nest as
            # a value, then added; taken apart here it would be scalar loops walking a column
            op = Op.CONST
        if op is Op.LET:
            var, rhs, body = e.args
            if deferrable(var.data, rhs, body):
                yield from self._accumulate(dest, body, skipped, {**deferred, var.data: rhs}, first)
                return dest
            value = yield rhs
            if var.data not in body.free and is_identifier(value):
                self.line(f"(void){value};")
            saved = self._push(var.data, value)
            yield from self._accumulate(dest, body, skipped, deferred, first)
            self._pop(var.data, saved)
            return dest
        if op is Op.VAR and e.data in deferred:
            yield from self._accumulate(dest, deferred[e.data], skipped, {}, first)
            return dest
        if op is Op.TUPLE:
            for slot, piece in enumerate(e.args):
                yield from self._accumulate(f"std::get<{slot}>({dest})", piece, skipped, deferred, first)
            return dest
        loop = op is Op.BUILD or op is Op.SUMBUILD
        if loop and e.args[1].data in e.args[2].free and zero_shaped(e) is None:  # a zero: added lazily
            yield from self._accumulate_loop(dest, e, skipped, first)
            return dest
        if op is Op.IF:
            cond = yield e.args[0]
            self.line(f"if ({cond}) {{")
            self.depth += 1
            yield from self._accumulate(dest, e.args[1], skipped, {}, first)
            self.depth -= 1
            self.line("} else {")
            self.depth += 1
            yield from self._accumulate(dest, e.args[2], skipped, {}, first)
            self.depth -= 1
            self.line("}")
            return dest
        if op is Op.BUILD and _plus_zeros(e):
            # a zero cotangent (a branch's other arm): nothing added, no lazy vector made and added in
            # each iteration; a skipped +0.0 as ks::add_inplace records it (-0.0 elements normalised)
            n = yield e.args[0]
            value = yield e.args[2]
            self.line(f'ks::check_size({n}, "build");')
            if first is not None:
                self.line(f"if ({first}) {dest} = ks::copy_dense(ks::const_vec<double>({n}, {value})); else {{")
                self.depth += 1
            self.line(f"if ({dest}.n != {n}) ks::size_mismatch({dest}.n, {n});")
            self.line(f"if ({n} > 0) {skipped} = true;")
            if first is not None:
                self.depth -= 1
                self.line("}")
            return dest
        if op is Op.DELTAVEC:
            n = yield e.args[0]
            k = yield e.args[1]
            value = yield e.args[2]
            if first is not None:
                delta = f"ks::delta_vec<{cpp_type(e.type.elem)}>({n}, {k}, {value})"
                self.line(f"if ({first}) {dest} = ks::copy_dense({delta}); else {{")
                self.depth += 1
            self.line(f"if ({dest}.n != {n}) ks::size_mismatch({dest}.n, {n});")
            inside = f"static_cast<std::uint64_t>({k}) < static_cast<std::uint64_t>({n})"
            self.line(f"if ({inside}) {{")
            self.depth += 1
            self._add_into(f"{dest}.data[{k}]", e.type.elem, value, skipped, None)
            self.depth -= 1
            self.line("}")
            self.line(f"if ({n} > 1 || !({inside})) {skipped} = true;")
            if first is not None:
                self.depth -= 1
                self.line("}")
            return dest
        value = yield e
        self._add_into(dest, e.type, value, skipped, first)
        return dest

    def _accumulate_loop(self, dest: str, e: Expr, skipped: str, first: str | None) -> EmitStep:
        """:meth:`_accumulate` of a ``build`` (element by element) or a ``sumbuild`` (term by term)."""
        size, var, body = e.args
        n = yield size
        build = e.op is Op.BUILD
        t = cpp_type(e.type)
        self.line(f'ks::check_size({n}, "{"build" if build else "sumbuild"}");')
        own = None  # a vector sum's skipped zeros where dest is its first value: they are its own
        if build:
            check = f"if ({dest}.n != {n}) ks::size_mismatch({dest}.n, {n});"
            if first is None:
                self.line(check)
            else:
                self.line(f"if ({first}) {dest} = ks::make_vec<{cpp_type(e.type.elem)}>({n}); else {check}")
        elif e.type.is_scalar:
            if first is not None:  # the value starts at +0.0 (or 0) and adds every term in order
                self.line(f"if ({first}) {dest} = {t}{{}};")
                self.line(f"else if ({n} == 0) {skipped} = true;")
            else:
                self.line(f"if ({n} == 0) {skipped} = true;")  # the sum of nothing is +0.0
        else:
            zero = f"ks::zero_of<{t}>({c_string(str(e.type))})"
            if first is None:
                self.line(f"if ({n} == 0) (void){zero};")
            else:
                self.line(f"if ({n} == 0) {{ if ({first}) {dest} = {zero}; else (void){zero}; }}")
                own = self.fresh("s")
                self.line(f"bool {own} = false;")
        i = self.fresh_var(var.data)
        reset = self._parts_allocate(body, {})
        mark = self.fresh("m")
        part = f"{dest}.data[{i}]" if build else dest

        def each() -> EmitStep:
            if reset:
                self.line(f"const ks::Arena::Mark {mark} = ks::arena().mark();")
            inner = first if build else None
            if own is not None:  # the first term is the first value
                inner = self.fresh("f")
                self.line(f"const bool {inner} = {first} && {i} == 0;")
            saved = self._push(var.data, i)
            yield from self._accumulate(part, body, own or skipped, {}, inner)
            self._pop(var.data, saved)
            if reset and first is not None:  # the first value's memory is the accumulator's
                self.line(f"if (!{first}) ks::arena().reset({mark});")
            elif reset:
                self.line(f"ks::arena().reset({mark});")
            return dest

        yield from self._loop(n, i, var.data, body, frozenset({var.data}), each)
        if own is not None:  # zeros skipped in dest's own terms: as the sum's value would be normalised
            self.line(f"if ({own}) {{ if ({first}) ks::normalise_zeros({dest}); else {skipped} = true; }}")
        return dest

    def _parts_allocate(self, e: Expr, deferred: dict[str, Expr]) -> bool:
        """Whether :meth:`_accumulate` of ``e`` may allocate arena memory in an iteration where it is not
        the first value (whose memory is the accumulator's): a deltaVec, a tuple or an ``if`` added
        part by part allocates nothing of its own (a loop, conservatively, may: what it computes
        before its own loop).  Where nothing may, iterations need no arena mark and reset
        (rev$maxpool: a third of each iteration's instructions)."""
        op = e.op
        if op is Op.LET:
            var, rhs, body = e.args
            if deferrable(var.data, rhs, body):
                return self._parts_allocate(body, {**deferred, var.data: rhs})
            return self.may_allocate(rhs) or self._parts_allocate(body, deferred)
        if op is Op.VAR and e.data in deferred:
            return self._parts_allocate(deferred[e.data], {})
        if op is Op.TUPLE:
            return any(self._parts_allocate(x, deferred) for x in e.args)
        if op is Op.IF:
            return self.may_allocate(e.args[0]) or any(self._parts_allocate(x, {}) for x in e.args[1:])
        if op is Op.DELTAVEC:
            return any(self.may_allocate(x) for x in e.args)
        return self.may_allocate(e)

    def _add_into(self, dest: str, t: Type, value: str, skipped: str, first: str | None) -> None:
        if first is not None and t is FLOAT:
            # a select, which g++ vectorises (LayerNorm's dgamma: 1.3x slower as an if-else); only the
            # chosen operand is evaluated, so the first iteration never reads the fresh element
            self.line(f"{dest} = {first} ? {value} : {dest} + {value};")
            return
        if first is not None and t.is_scalar:
            self.line(f"if ({first}) {dest} = {value}; else")
            self.depth += 1
        elif first is not None:
            self.line(f"if ({first}) {dest} = ks::copy_dense({value}); else")
            self.depth += 1
        if t is FLOAT:
            self.line(f"{dest} += {value};")
        elif t is INTEGER:
            self.line(f"{dest} = ks::add_i({dest}, {value});")
        else:
            self.line(f"ks::add_inplace({dest}, {value}, {skipped});")
        if first is not None:
            self.depth -= 1


def _plus_zeros(e: Expr) -> bool:
    """Whether ``e`` is ``(build n (lam i +0.0))``, a vector of Floats that are all +0.0."""
    body = e.args[2]
    return (
        e.type == vec(FLOAT)
        and body.op is Op.CONST
        and isinstance(body.data, float)
        and body.data == 0.0
        and math.copysign(1.0, body.data) > 0
    )


def deferrable(name: str, rhs: Expr, body: Expr) -> bool:
    """Whether ``let name = rhs`` in an accumulation may be added where ``body`` (lets, then a tuple
    of parts or one part) has ``name`` as a part: its only use, no let between rebinding a variable
    of ``rhs``, and ``rhs`` a loop, a branch, a deltaVec or a tuple (what is worth not making)."""
    if rhs.op not in (Op.BUILD, Op.SUMBUILD, Op.LET, Op.IF, Op.DELTAVEC, Op.TUPLE):
        return False
    node = body
    while node.op is Op.LET:
        var, value, node = node.args
        if name in value.free or var.data in rhs.free or var.data == name:
            return False
    parts = node.args if node.op is Op.TUPLE else (node,)
    uses = sum(1 for p in parts if p.op is Op.VAR and p.data == name)
    return uses == 1 and not any(name in p.free for p in parts if not (p.op is Op.VAR and p.data == name))
