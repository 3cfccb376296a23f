"""Row-wise sums and the register-blocked product nest of the function emitter."""

from __future__ import annotations

import functools
from collections.abc import Callable

from cpp_backend.block_terms import inline_term_lets
from cpp_backend.cpp_text import cpp_type
from cpp_backend.emitter_core import EmitStep, EmitterCore, Hoisted, is_identifier
from cpp_backend.loop_facts import cannot_fail, has_loop, loop_invariants, only_read, walk_evaluated, walks_column
from knossos.expr import Expr
from knossos.ops import Op
from knossos.types import FLOAT, INTEGER

#: A matrix product's rows are summed this many at a time, over tiles of this many columns, with the
#: BLOCK_ROWS x BLOCK_COLS partial sums in registers (see RowProducts._block_rows).
BLOCK_ROWS = 8
BLOCK_COLS = 16
BLOCK_PANEL = 256  # rows computed together, so that each packed column tile serves them all


class RowProducts(EmitterCore):
    """Matrix products written as sums of rows: computed row-wise, or a panel of rows at a time by
    the blocked nest."""

    def _row_sum(self, node: Expr) -> Expr | None:
        """The ``(sumbuild m (lam j e))`` of ``(build n (lam k body))`` that is better computed for
        every ``k`` at once with ``j`` outside (see Loops): one that ``body`` evaluates whatever the
        values (``body`` itself, or inside arithmetic and lets around it), ``e`` a Float depending on
        ``k``, allocating nothing, walking no column, and depending on nothing ``body`` binds."""
        _, var, body = node.args
        k = var.data
        bound: dict[str, int] = {}  # variables bound inside body -> how many of its lets are in scope
        found: list[Expr] = []

        def visit(item: Expr) -> bool:
            if found:
                return False
            if (
                item.op is Op.SUMBUILD
                and item.type is FLOAT
                and self._sums_rows(item, k)
                and not any(bound.get(x) for x in item.free)
            ):
                found.append(item)
                return False
            return True

        walk_evaluated(body, bound, visit)
        return found[0] if found else None

    def _sums_rows(self, sums: Expr, k: str) -> bool:
        size, j, e = sums.args
        return (
            k != j.data
            and k not in size.free
            and k in e.free
            and not self.may_allocate(e)
            and not walks_column(e, j.data, k)
        )

    def _sum_rows(self, n: str, result: str, k: str, sums: Expr) -> EmitStep:
        """``result[k] = (sumbuild m (lam j e))`` for ``k`` in [0, ``n``), written as ``result[k] += e``
        in a ``k`` loop inside the ``j`` loop: the same additions in the same order per element."""
        size, j, e = sums.args
        self.line(f"if ({n} > 0) {{")
        self.depth += 1
        m = yield size  # the same for every k
        self.line(f'ks::check_size({m}, "sumbuild");')
        kk = self.fresh_var(k)
        self.line(f"for (std::int64_t {kk} = 0; {kk} < {n}; ++{kk}) {result}.data[{kk}] = 0.0;")
        jj = self.fresh_var(j.data)

        def add_term() -> EmitStep:
            value = yield from self._in_scope(k, kk, e)
            self.line(f"{result}.data[{kk}] += {value};")
            return value

        def row() -> EmitStep:
            saved = self._push(j.data, jj)
            yield from self._loop(n, kk, k, e, frozenset({k}), add_term, nonempty=True, independent=True)
            self._pop(j.data, saved)
            return jj

        yield from self._loop(m, jj, j.data, e, frozenset({j.data, k}), row)
        self.depth -= 1
        self.line("}")
        return result

    def _rows_or_block(self, key: int, n: str, result: str, k: str, sums: Expr) -> EmitStep:
        """``result[k]`` = the row sums of :meth:`_sum_rows`, copied from the block that an enclosing
        blocked loop nest computed for this build (``key``) where it did."""
        block = self._row_blocks.get(key)
        if block is None:
            yield from self._sum_rows(n, result, k, sums)
            return result
        ok, blk, offset = block
        self.line(f"if ({ok}) {{")
        self.line(f"    std::copy_n({blk}.data + {offset}, {n}, {result}.data);")
        self.line("} else {")
        self.depth += 1
        yield from self._sum_rows(n, result, k, sums)
        self.depth -= 1
        self.line("}")
        return result

    def _blockable(self, node: Expr) -> tuple[Expr, Expr] | None:
        """For ``(build n (lam i (build m (lam k body))))`` whose inner build is computed with row sums
        ``(sumbuild p (lam j e))`` (:meth:`_row_sum`) and whose ``e`` depends on ``i`` (a matrix
        product): the inner build and that sum, which :meth:`_block_rows` computes for several ``i``
        at once; otherwise None."""
        _, var, inner = node.args
        if inner.op is not Op.BUILD:
            return None
        sums = self._row_sum(inner)
        if sums is None:
            return None
        i, m, k = var.data, inner.args[0], inner.args[1].data
        p, j, e = sums.args
        if len({i, j.data, k}) < 3 or i in m.free or i in p.free or i not in e.free or has_loop(e):
            return None
        return inner, sums

    def _hoist(self, exprs: list[Expr]) -> EmitStep:
        for h in exprs:
            atom = yield h
            self._hoisted[id(h)] = (h, atom, self._bindings(h))
        return ""

    def _block_rows(
        self, n: str, i: str, ivar: str, sums: Expr, block: tuple[str, str, str, str], inner: Expr
    ) -> EmitStep:
        """At every ``i`` that is a multiple of BLOCK_PANEL, the row sums of :meth:`_row_sum` for the
        next ``count`` rows (BLOCK_PANEL, or fewer at the end, a multiple of BLOCK_ROWS) into ``blk``
        (row after row, ``w`` columns each); the rows past ``count`` compute their own.

        A register-blocked loop nest (a matrix product's tiling): the elements of the vectors that ``e``
        reads at the column index and that depend on the term ``j`` only (the right-hand matrix's rows)
        are copied once, by the first panel, into ``pk``: a contiguous ``p`` x BLOCK_COLS panel per tile
        of BLOCK_COLS columns (:meth:`_pack`: each row read once, in order; copying a tile's columns
        from every row again for every panel of rows cost a sixth of a Llama MLP gradient's nests).
        Every tile has BLOCK_COLS columns (the last ends at ``m``, overlapping the one before, and
        stores only its new columns; ``m`` < BLOCK_COLS: row-wise), so the nest is written once.
        Then for each tile and each BLOCK_ROWS rows, BLOCK_ROWS x BLOCK_COLS accumulators stay in
        registers while ``j`` runs over the terms, so each element read serves BLOCK_ROWS rows.  Every
        accumulator starts at +0.0 and adds its terms in the order of ``j``, as the row-wise loop does,
        so the sums are the same to the bit (under exact order; otherwise a product term is one fused
        multiply-add, ``KS_MADD``, where the CPU has it).  The vectors read through pointers are checked
        dense and long enough first (``ks::require_dense``); anything that fails or is not dense (an
        error, a lazy vector) throws, and every row of the panel then computes its sums as before, in
        its own iteration, so errors are those of the row-wise code."""
        count, blk, width, panels = block
        rows, cols, panel = BLOCK_ROWS, BLOCK_COLS, BLOCK_PANEL
        m_expr, k = inner.args[0], inner.args[1].data
        p_expr, jv, e = sums.args
        e = inline_term_lets(e)  # (mul x y) and B's reads written out: a fused multiply-add, packed panels
        j = jv.data
        saved_hoisted, saved_dense, saved_reads = dict(self._hoisted), dict(self._dense), dict(self._reads)
        per_row, row_ranged = loop_invariants(e, j, frozenset({j, k}))  # depend on i (or nothing)
        per_row_term, ranged = loop_invariants(e, k, frozenset({k}))  # on i and j
        dense = [x for x in ranged if x.type in (FLOAT, INTEGER)]
        packed = [x for x in dense if j in x.args[1].free and ivar not in x.args[1].free and only_read(e, x.args[1], k)]
        direct = [x for x in dense if x not in packed]
        row_dense = [x for x in row_ranged if x.type in (FLOAT, INTEGER)]  # (index j v), v per row
        skip = {id(x) for x in (*per_row, *per_row_term, *dense)}
        simd = cannot_fail(e, skip)

        self.line(f"if ({i} % {panel} == 0) {{")
        self.depth += 1
        self.line(f"{count} = 0;")
        self.line(f"if ({n} - {i} >= {rows}) try {{")
        self.depth += 1
        m = yield m_expr
        p = yield p_expr
        self.line(f'ks::check_size({p}, "sumbuild");')
        self.line(
            f"if ({m} < {cols} || {m} > (std::int64_t(1) << 40) || {p} < 1 || {p} > (std::int64_t(1) << 40) / {m})"
            " throw ks::Fallback();"  # (the packed copy has m * p elements; every tile has BLOCK_COLS columns)
        )
        rows_here = self.fresh("r")
        self.line(f"const std::int64_t {rows_here} = std::min<std::int64_t>({panel}, {n} - {i}) / {rows} * {rows};")
        self.line(f"{width} = {m};")
        self.line(f"{blk} = ks::make_vec<double>({rows_here} * {m});")
        base = dict(self._hoisted)
        tiles = self.fresh("nt")
        self.line(f"const std::int64_t {tiles} = ({m} + {cols} - 1) / {cols};")
        if packed:
            yield from self._pack(packed, panels, (m, p, j, tiles), base)
        packs = [self.fresh("pack") for _ in packed]
        kb = self.fresh("c")
        self.line(f"for (std::int64_t {kb} = 0; {kb} < {m}; {kb} += {cols}) {{")
        self.depth += 1
        tile = self.fresh("n")  # the last tile ends at m, overlapping the one before (written once)
        self.line(f"const std::int64_t {tile} = std::min<std::int64_t>({kb}, {m} - {cols});")
        for q, pack in enumerate(packs):  # this tile's columns of the rows that every row reads: p x cols
            self.line(
                f"const double* __restrict {pack} = {panels}.data + ({q} * {tiles} + {kb} / {cols}) * {p} * {cols};"
            )
        rb = self.fresh("rb")
        self.line(f"for (std::int64_t {rb} = 0; {rb} < {rows_here}; {rb} += {rows}) {{")
        self.depth += 1
        row_atoms = []
        row_states = []
        for r in range(rows):
            row_atoms.append(self.fresh_var(ivar))
            self.line(f"const std::int64_t {row_atoms[r]} = {i} + {rb} + {r};")
        row_vectors: list[list[str]] = []
        for r in range(rows):
            self._hoisted = dict(base)
            saved_i = self._push(ivar, row_atoms[r])
            yield from self._hoist(per_row)
            vs = []
            for x in row_dense:
                vs.append((yield x.args[1]))
                self.line(f"ks::require_dense({p}, {vs[-1]});")
            for x in direct:
                if j not in x.args[1].free:
                    v = yield x.args[1]
                    self.line(f"ks::require_dense({m}, {v});")
            row_vectors.append(vs)
            self._pop(ivar, saved_i)
            row_states.append(self._hoisted)
        row_info = (row_atoms, row_states, base, row_vectors)
        pack_of = [(x.args[1], pack) for x, pack in zip(packed, packs, strict=True)]
        if any(j in x.args[1].free for x in direct):  # vectors per row and term: checked first
            yield from self._block_terms(
                p, j, ivar, row_info, per_row_term, direct, pack_of, lambda r, vs, jj: self._require(m, vs)
            )
        acc = self.fresh("acc")
        self.line(f"double {acc}[{rows}][{cols}] = {{}};")

        def accumulate(r: int, vectors: list[str], jj: str, bound: str) -> EmitStep:
            u, ku = self.fresh("u"), self.fresh_var(k)
            for x, v in zip(direct, vectors, strict=True):
                if is_identifier(v):
                    ptr = self.fresh("d")
                    self.line(f"const {cpp_type(x.type)}* __restrict {ptr} = {v}.data;")
                    self._dense[(ku, v)] = ptr
            for pack in packs:
                self._reads[(ku, pack)] = f"{pack}[{jj} * {cols} + {u}]"
            if simd:
                self.line("KS_SIMD")
            self.line(f"for (std::int64_t {u} = 0; {u} < {bound}; ++{u}) {{")
            self.depth += 1
            self.line(f"[[maybe_unused]] const std::int64_t {ku} = {tile} + {u};")
            saved_k = self._push(k, ku)
            cell = f"{acc}[{r}][{u}]"
            if e.op is Op.MUL and e.args[0].type is FLOAT and e.args[1].type is FLOAT:
                left = yield e.args[0]
                right = yield e.args[1]
                self.line(f"{cell} = KS_MADD({cell}, {left}, {right});")
            else:
                value = yield e
                self.line(f"{cell} += {value};")
            self._pop(k, saved_k)
            self.depth -= 1
            self.line("}")
            return ""

        # a whole tile always (a constant trip count, the accumulators in registers): the code once
        yield from self._block_terms(
            p, j, ivar, row_info, per_row_term, direct, pack_of, functools.partial(accumulate, bound=str(cols))
        )
        for r in range(rows):  # a column's sum is the same whichever tile computes it: stored once
            self.line(
                f"for (std::int64_t u = {kb} - {tile}; u < {cols}; ++u)"
                f" {blk}.data[({rb} + {r}) * {m} + {tile} + u] = {acc}[{r}][u];"
            )
        self.depth -= 1
        self.line("}")
        self.depth -= 1
        self.line("}")
        self.line(f"{count} = {rows_here};")
        self.depth -= 1
        self.line("} catch (...) {")
        self.line(f"    {count} = 0;  // the rows compute their own sums, failing as they would")
        self.line("}")
        self.depth -= 1
        self.line("}")
        self._hoisted, self._dense, self._reads = saved_hoisted, saved_dense, saved_reads
        return count

    def _pack(self, packed: list[Expr], panels: str, sizes: tuple[str, str, str, str], base: Hoisted) -> EmitStep:
        """Unless an earlier panel of rows did (they all read the same), copy the vectors of ``packed``
        (``(index k v)`` with ``v`` depending on the term ``j`` only: the right-hand matrix's rows) into
        ``panels``: for each vector and each tile of BLOCK_COLS columns, its ``p`` x BLOCK_COLS
        elements (the last tile's end at ``m``), contiguous.  Each row is read once, in order; the copy is kept only when complete
        (a panel that fails leaves it for the next)."""
        m, p, j, tiles = sizes
        cols = BLOCK_COLS
        self.line(f"if ({panels}.n == 0) {{")
        self.depth += 1
        fill = self.fresh("pack")
        self.line(f"const ks::Vec<double> {fill} = ks::make_vec<double>({len(packed)} * {tiles} * {p} * {cols});")
        jj = self.fresh_var(j)
        self.line(f"for (std::int64_t {jj} = 0; {jj} < {p}; ++{jj}) {{")
        self.depth += 1
        saved_j = self._push(j, jj)
        self._hoisted = dict(base)
        for q, x in enumerate(packed):
            v = yield x.args[1]
            self.line(f"ks::require_dense({m}, {v});")
            self.line(f"for (std::int64_t c = 0; c < {m}; c += {cols}) {{")
            self.line(
                f"    double* __restrict to = {fill}.data + (({q} * {tiles} + c / {cols}) * {p} + {jj}) * {cols};"
            )
            self.line(f"    const double* __restrict from = {v}.data + std::min<std::int64_t>(c, {m} - {cols});")
            self.line(f"    for (std::int64_t u = 0; u < {cols}; ++u) to[u] = from[u];")
            self.line("}")
        self._pop(j, saved_j)
        self.depth -= 1
        self.line("}")
        self.line(f"{panels} = {fill};")
        self.depth -= 1
        self.line("}")
        return panels

    def _require(self, m: str, vectors: list[str]) -> EmitStep:
        for v in vectors:
            self.line(f"ks::require_dense({m}, {v});")
        return ""
        yield  # a generator

    def _block_terms(
        self,
        p: str,
        j: str,
        ivar: str,
        rows: tuple[list[str], list[Hoisted], Hoisted, list[list[str]]],
        per_row_term: list[Expr],
        direct: list[Expr],
        packed: list[tuple[Expr, str]],
        body: Callable[[int, list[str], str], EmitStep],
    ) -> EmitStep:
        """``for j`` in [0, ``p``): for each row (``rows``: its index atom, what was computed for it, what
        was computed before, its vectors checked to be read at ``j``), what depends on the row and ``j`` (the vectors of ``packed`` are their
        panels, not computed), the vectors of ``direct``, then ``body(r, vectors, j's atom)``."""
        row_atoms, row_states, base, row_vectors = rows
        jj = self.fresh_var(j)
        self.line(f"for (std::int64_t {jj} = 0; {jj} < {p}; ++{jj}) {{")
        self.depth += 1
        saved_j = self._push(j, jj)
        saved_dense, saved_reads = dict(self._dense), dict(self._reads)
        for r, row in enumerate(row_atoms):
            self._hoisted = {**base, **row_states[r]}
            saved_i = self._push(ivar, row)
            for v, pack in packed:
                self._hoisted[id(v)] = (v, pack, self._bindings(v))
            for vec_atom in row_vectors[r]:  # checked dense and long enough for every term
                if is_identifier(vec_atom):
                    self._reads[(jj, vec_atom)] = f"{vec_atom}.data[{jj}]"
            yield from self._hoist(per_row_term)
            vectors = []
            for x in direct:
                vectors.append((yield x.args[1]))
            yield from body(r, vectors, jj)
            self._pop(ivar, saved_i)
            self._dense, self._reads = dict(saved_dense), dict(saved_reads)
        self._pop(j, saved_j)
        self.depth -= 1
        self.line("}")
        return jj
