/* The rebuild of a rewrite's ancestors, in C: knossos.rebuild._climb_python, one binder at a time.
 *
 * Search rebuilds every ancestor of every rewrite, and most ancestors are the lets of long let
 * chains, so this loop is where the time of a child goes.  It does exactly what the Python loop
 * does (the same hashes, weights and costs, so either may build any node), and hands the rare
 * cases and the per-op rules back to the Python helpers of knossos.rebuild, knossos.interning and
 * knossos.alpha (knossos.rebuild hands them to init under the names below):
 *
 *   - a binder rebuilt outside its scope           -> _rebuild_binder
 *   - an alpha-table slot held by another node     -> _intern_binder (it compares alpha-variants)
 *   - a binder's position memo not filled in yet   -> _position
 *   - the free names of a node that binds nothing  -> _union_free
 *   - two free-name sets united (for a binder)     -> _join_free
 *   - a node's data (a callee, a get's index)      -> _data_hash
 *   - the cost of any node but a let               -> COST_RULES
 *
 * Weights are integers modulo the prime 2^61 - 1: sums and products of numbers below it are done in
 * 128 bits and reduced, which gives the residues Python's big integers give.  Hashes are Python's own
 * hashes of the same tuples of the same integers.  Nodes are Expr objects whose slots are filled
 * through their offsets, as _new fills them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h> /* PyMemberDef, for the offsets of slots */

typedef unsigned long long u64;
typedef long long i64;
typedef unsigned __int128 u128;

static const u64 PRIME = (1ULL << 61) - 1;

static inline u64 mulmod(u64 a, u64 b) { return (u64)(((u128)a * b) % PRIME); }
static inline u64 addmod(u64 a, u64 b) { u64 s = a + b; return s >= PRIME ? s - PRIME : s; }
static inline u64 submod(u64 a, u64 b) { return a >= b ? a - b : a + PRIME - b; }

/* What init() was given. */
static PyTypeObject *Expr_Type;
static PyObject *Ref_Type, *forget_alpha, *alpha_table, *binders, *binder_layouts, *binder_layout;
static PyObject *edges, *edge, *cost_rules, *position_fn, *intern_binder, *rebuild_binder, *table,
    *forget, *union_free, *join_free, *data_hash, *let_op, *zero;
static double let_cost;

/* Slot offsets of Expr and of the weak reference's key. */
enum {
    F_OP,
    F_ARGS,
    F_DATA,
    F_TYPE,
    F_COST,
    F_SIZE,
    F_FREE,
    F_SHAPE_HASH,
    F_FREE_WEIGHT,
    F_OCCURRENCE_WEIGHT,
    F_ALPHA_HASH,
    F_POSITIONS,
    F_POSITION_MAP,
    N_FIELDS
};
static const char *field_names[N_FIELDS] = {"op",   "args",       "data",        "type",
                                            "cost", "size",       "free",        "shape_hash",
                                            "free_weight", "occurrence_weight", "alpha_hash", "_positions",
                                            "_position_map"};
static Py_ssize_t offsets[N_FIELDS];
static Py_ssize_t key_offset;
static PyObject *str_h;

#define FIELD(obj, f) (*(PyObject **)((char *)(obj) + offsets[f]))

static int slot_offset(PyTypeObject *type, const char *name, Py_ssize_t *out) {
    PyObject *descr = PyDict_GetItemString(type->tp_dict, name);
    if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a slot", type->tp_name, name);
        return -1;
    }
    *out = ((PyMemberDescrObject *)descr)->d_member->offset;
    return 0;
}

/* A Python int known to be in [0, PRIME). */
static int as_residue(PyObject *v, u64 *out) {
    u64 x = PyLong_AsUnsignedLongLong(v);
    if (x == (u64)-1 && PyErr_Occurred()) return -1;
    *out = x % PRIME;
    return 0;
}

/* Any Python int of at most 63 bits (a change of position may be negative), reduced. */
static int as_signed_residue(PyObject *v, u64 *out) {
    i64 x = PyLong_AsLongLong(v);
    if (x == -1 && PyErr_Occurred()) return -1;
    i64 r = x % (i64)PRIME;
    *out = (u64)(r < 0 ? r + (i64)PRIME : r);
    return 0;
}

static PyObject *replaced_args(PyObject *args, Py_ssize_t i, PyObject *new) {
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    PyObject *out = PyTuple_New(n);
    if (out == NULL) return NULL;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *item = k == i ? new : PyTuple_GET_ITEM(args, k);
        Py_INCREF(item);
        PyTuple_SET_ITEM(out, k, item);
    }
    return out;
}

static PyObject *hash_of(PyObject *tuple) {
    if (tuple == NULL) return NULL;
    Py_hash_t h = PyObject_Hash(tuple);
    Py_DECREF(tuple);
    if (h == -1 && PyErr_Occurred()) return NULL;
    return PyLong_FromSsize_t(h);
}

/* (first, second, item(x) for x in items): `item` returns a new reference.  New reference. */
static PyObject *headed_tuple(PyObject *first, PyObject *second, PyObject *items, PyObject *(*item)(PyObject *)) {
    Py_ssize_t n = PyTuple_GET_SIZE(items);
    PyObject *out = PyTuple_New(n + 2);
    if (out == NULL) return NULL;
    Py_INCREF(first);
    PyTuple_SET_ITEM(out, 0, first);
    Py_INCREF(second);
    PyTuple_SET_ITEM(out, 1, second);
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *x = item(PyTuple_GET_ITEM(items, k));
        if (x == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, k + 2, x);
    }
    return out;
}

static PyObject *id_of(PyObject *x) { return PyLong_FromVoidPtr(x); } /* what id() gives */

static PyObject *s_of(PyObject *x) {
    PyObject *s = FIELD(x, F_SHAPE_HASH);
    Py_INCREF(s);
    return s;
}

/* The composition edge (r, sh) of child `index` of `op`: from _edges, or made by _edge. */
static int edge_of(PyObject *op, PyObject *index, u64 *r, u64 *sh) {
    PyObject *key = PyTuple_Pack(2, op, index);
    if (key == NULL) return -1;
    PyObject *m = PyDict_GetItemWithError(edges, key);
    if (m != NULL) {
        Py_INCREF(m);
    } else if (!PyErr_Occurred()) {
        m = PyObject_CallFunctionObjArgs(edge, op, index, NULL);
    }
    Py_DECREF(key);
    if (m == NULL) return -1;
    int failed = as_residue(PyTuple_GET_ITEM(m, 0), r) || as_residue(PyTuple_GET_ITEM(m, 1), sh);
    Py_DECREF(m);
    return failed ? -1 : 0;
}

/* The cost of `op` over `args` by its rule in COST_RULES.  New reference. */
static PyObject *rule_cost(PyObject *op, PyObject *args, PyObject *data, PyObject *t) {
    PyObject *rule = PyDict_GetItemWithError(cost_rules, op);
    if (rule == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_KeyError, "no cost rule");
        return NULL;
    }
    return PyObject_CallFunctionObjArgs(rule, args, data, t, NULL);
}

/* The size of `parent` with its child `old` replaced by `new`.  New reference. */
static PyObject *rebuilt_size(PyObject *parent, PyObject *old, PyObject *new) {
    PyObject *size = PyNumber_Subtract(FIELD(parent, F_SIZE), FIELD(old, F_SIZE));
    if (size != NULL) Py_SETREF(size, PyNumber_Add(size, FIELD(new, F_SIZE)));
    return size;
}

/* Whether the rewrite kept the child's free names (the parent's then stay): 1, 0, or -1 on error. */
static int same_free(PyObject *old, PyObject *new) {
    PyObject *nf = FIELD(new, F_FREE), *of = FIELD(old, F_FREE);
    return nf == of ? 1 : PyObject_RichCompareBool(nf, of, Py_EQ);
}

/* The free names of a binder over `args`, as _intern_binder works them out: the scope's without the
 * bound name, and the other child's (united by _join_free, which keeps large sets persistent).  Free
 * names are frozensets or knossos.freeset.FreeSets, so they are read through the generic protocols.
 * Returns a new reference. */
static PyObject *binder_free(PyObject *args, Py_ssize_t var_index, Py_ssize_t scope_index, Py_ssize_t outside_index) {
    PyObject *name = FIELD(PyTuple_GET_ITEM(args, var_index), F_DATA);
    PyObject *free = FIELD(PyTuple_GET_ITEM(args, scope_index), F_FREE);
    int bound_inside = PySequence_Contains(free, name);
    if (bound_inside < 0) return NULL;
    if (bound_inside) {
        PyObject *drop = PySet_New(NULL);
        if (drop == NULL || PySet_Add(drop, name)) {
            Py_XDECREF(drop);
            return NULL;
        }
        free = PyNumber_Subtract(free, drop);
        Py_DECREF(drop);
        if (free == NULL) return NULL;
    } else {
        Py_INCREF(free);
    }
    if (outside_index < 0) return free;
    PyObject *of = FIELD(PyTuple_GET_ITEM(args, outside_index), F_FREE);
    int of_full = PyObject_IsTrue(of), free_full = PyObject_IsTrue(free);
    if (of_full < 0 || free_full < 0) {
        Py_DECREF(free);
        return NULL;
    }
    if (!of_full) return free;
    if (!free_full) {
        Py_DECREF(free);
        Py_INCREF(of);
        return of;
    }
    int within = PyObject_RichCompareBool(of, free, Py_LE);
    if (within < 0) {
        Py_DECREF(free);
        return NULL;
    }
    if (within) return free;
    Py_SETREF(free, PyObject_CallFunctionObjArgs(join_free, free, of, NULL));
    return free;
}

/* A new Expr over `op`, `args`, `data` and the facts given, entered in `table` under `key` with a
 * weak reference whose callback forgets it, as _new with _register (or the alpha table's) do.
 * References to the values are taken here; returns a new reference to the node. */
static PyObject *new_registered_node(PyObject *op, PyObject *args, PyObject *data, PyObject *t, PyObject *cost,
                                     PyObject *size, PyObject *free, PyObject *s, PyObject *w, PyObject *c,
                                     PyObject *h, PyObject *table_, PyObject *callback, PyObject *key) {
    PyObject *node = Expr_Type->tp_alloc(Expr_Type, 0);
    if (node == NULL) return NULL;
    PyObject *values[N_FIELDS] = {op, args, data, t, cost, size, free, s, w, c, h, Py_None, Py_None};
    for (int f = 0; f < N_FIELDS; f++) {
        Py_INCREF(values[f]);
        FIELD(node, f) = values[f];
    }
    PyObject *ref = PyObject_CallFunctionObjArgs(Ref_Type, node, callback, NULL);
    if (ref == NULL) {
        Py_DECREF(node);
        return NULL;
    }
    Py_INCREF(key);
    *(PyObject **)((char *)ref + key_offset) = key;
    int failed = PyDict_SetItem(table_, key, ref);
    Py_DECREF(ref);
    if (failed) Py_CLEAR(node);
    return node;
}

/* The binder `op` over `args`, interned by alpha-hash; the same steps as _intern_binder with its
 * free names known.  Returns a new reference. */
static PyObject *intern(PyObject *op, PyObject *args, PyObject *t, PyObject *cost, PyObject *free,
                        u64 position, u64 count, PyObject *size) {
    PyObject *layout = PyDict_GetItemWithError(binder_layouts, op);
    if (layout == NULL) {
        if (PyErr_Occurred()) return NULL;
        layout = PyObject_CallOneArg(binder_layout, op);
        if (layout == NULL) return NULL;
        Py_DECREF(layout); /* the table keeps it */
    }
    Py_ssize_t var_index = PyLong_AsSsize_t(PyTuple_GET_ITEM(layout, 0));
    Py_ssize_t scope_index = PyLong_AsSsize_t(PyTuple_GET_ITEM(layout, 1));
    Py_ssize_t outside_index = PyLong_AsSsize_t(PyTuple_GET_ITEM(layout, 2));
    u64 r, sh, ro, so;
    if (as_residue(PyTuple_GET_ITEM(layout, 3), &r) || as_residue(PyTuple_GET_ITEM(layout, 4), &sh) ||
        as_residue(PyTuple_GET_ITEM(layout, 5), &ro) || as_residue(PyTuple_GET_ITEM(layout, 6), &so))
        return NULL;
    PyObject *bound = PyTuple_GET_ITEM(args, var_index);
    PyObject *scope = PyTuple_GET_ITEM(args, scope_index);
    if (free == NULL) {
        free = binder_free(args, var_index, scope_index, outside_index);
        if (free == NULL) return NULL;
    } else {
        Py_INCREF(free);
    }
    PyObject *result = NULL;
    u64 bw, scope_w, scope_c0;
    if (as_residue(FIELD(bound, F_FREE_WEIGHT), &bw) || as_residue(FIELD(scope, F_FREE_WEIGHT), &scope_w) ||
        as_residue(FIELD(scope, F_OCCURRENCE_WEIGHT), &scope_c0)) {
        Py_DECREF(free);
        return NULL;
    }
    u64 scope_c = submod(scope_c0, mulmod(bw, count));
    u64 w = addmod(mulmod(r, submod(scope_w, mulmod(bw, position))), mulmod(sh, scope_c));
    u64 c = scope_c;
    PyObject *type_h = PyObject_GetAttr(FIELD(bound, F_TYPE), str_h);
    if (type_h == NULL) {
        Py_DECREF(free);
        return NULL;
    }
    PyObject *pos_obj = PyLong_FromUnsignedLongLong(position);
    PyObject *count_obj = PyLong_FromUnsignedLongLong(count);
    PyObject *s = NULL;
    if (pos_obj != NULL && count_obj != NULL) {
        if (outside_index >= 0) {
            PyObject *outside = PyTuple_GET_ITEM(args, outside_index);
            u64 ow, oc;
            if (!as_residue(FIELD(outside, F_FREE_WEIGHT), &ow) && !as_residue(FIELD(outside, F_OCCURRENCE_WEIGHT), &oc)) {
                w = addmod(w, addmod(mulmod(ro, ow), mulmod(so, oc)));
                c = addmod(c, oc);
                s = hash_of(PyTuple_Pack(6, op, type_h, pos_obj, count_obj, FIELD(outside, F_SHAPE_HASH),
                                         FIELD(scope, F_SHAPE_HASH)));
            }
        } else {
            s = hash_of(PyTuple_Pack(5, op, type_h, pos_obj, count_obj, FIELD(scope, F_SHAPE_HASH)));
        }
    }
    Py_DECREF(type_h);
    if (s == NULL) {
        Py_XDECREF(pos_obj);
        Py_XDECREF(count_obj);
        Py_DECREF(free);
        return NULL;
    }
    PyObject *w_obj = PyLong_FromUnsignedLongLong(w);
    PyObject *c_obj = PyLong_FromUnsignedLongLong(c);
    PyObject *h = w_obj == NULL ? NULL : hash_of(PyTuple_Pack(2, s, w_obj));
    PyObject *akey = h == NULL ? NULL : PyTuple_Pack(2, h, zero);
    if (akey == NULL || c_obj == NULL) goto done;
    PyObject *ref = PyDict_GetItemWithError(alpha_table, akey);
    if (ref == NULL && PyErr_Occurred()) goto done;
    PyObject *other = ref == NULL ? Py_None : PyWeakref_GET_OBJECT(ref);
    if (ref != NULL) { /* a chain of this hash exists */
        if (other != Py_None && FIELD(other, F_OP) == op) {
            int same = PyObject_RichCompareBool(FIELD(other, F_ARGS), args, Py_EQ);
            if (same < 0) goto done;
            if (same) {
                Py_INCREF(other);
                result = other;
                goto done;
            }
        }
        /* another expression holds the slot, or a node that died: Python compares alpha-variants and
         * probes the whole chain (a live variant may sit in a later slot) */
        PyObject *bound_position = PyTuple_Pack(2, pos_obj, count_obj);
        if (bound_position == NULL) goto done;
        result = PyObject_CallFunctionObjArgs(intern_binder, op, args, t, cost, free, bound_position, size, NULL);
        Py_DECREF(bound_position);
        goto done;
    }
    result = new_registered_node(op, args, Py_None, t, cost, size, free, s, w_obj, c_obj, h, alpha_table,
                                 forget_alpha, akey);
done:
    Py_DECREF(free);
    Py_XDECREF(akey);
    Py_XDECREF(h);
    Py_XDECREF(w_obj);
    Py_XDECREF(c_obj);
    Py_DECREF(s);
    Py_DECREF(pos_obj);
    Py_DECREF(count_obj);
    return result;
}

/* An ancestor that binds nothing, as _rebuild_plain: found in the table under the key _exact_key
 * gives (op, data, ids of the children), or built with _shape_hash's shape and its weights updated by
 * the change of the child.  New reference. */
static PyObject *climb_plain(PyObject *parent, Py_ssize_t i, PyObject *index, PyObject *old, PyObject *new) {
    PyObject *op = FIELD(parent, F_OP), *args = FIELD(parent, F_ARGS), *data = FIELD(parent, F_DATA);
    PyObject *t = FIELD(parent, F_TYPE);
    PyObject *new_args = replaced_args(args, i, new);
    if (new_args == NULL) return NULL;
    PyObject *result = NULL, *free = NULL, *dh = NULL, *s = NULL, *cost = NULL, *size = NULL;
    PyObject *w_obj = NULL, *c_obj = NULL, *h = NULL;
    PyObject *key = headed_tuple(op, data, new_args, id_of);
    if (key == NULL) goto done;
    PyObject *ref = PyDict_GetItemWithError(table, key);
    if (ref == NULL && PyErr_Occurred()) goto done;
    if (ref != NULL && PyWeakref_GET_OBJECT(ref) != Py_None) {
        result = PyWeakref_GET_OBJECT(ref);
        Py_INCREF(result);
        goto done;
    }
    int kept = same_free(old, new);
    if (kept < 0) goto done;
    if (kept) {
        free = FIELD(parent, F_FREE);
        Py_INCREF(free);
    } else {
        free = PyObject_CallOneArg(union_free, new_args);
        if (free == NULL) goto done;
    }
    if (data == Py_None) {
        dh = zero;
        Py_INCREF(dh);
    } else {
        dh = PyObject_CallFunctionObjArgs(data_hash, op, data, t, NULL);
        if (dh == NULL) goto done;
    }
    s = hash_of(headed_tuple(op, dh, new_args, s_of));
    if (s == NULL) goto done;
    u64 r, sh, pw, pc, nw, nc, ow, oc;
    if (edge_of(op, index, &r, &sh) || as_residue(FIELD(parent, F_FREE_WEIGHT), &pw) || as_residue(FIELD(parent, F_OCCURRENCE_WEIGHT), &pc) ||
        as_residue(FIELD(new, F_FREE_WEIGHT), &nw) || as_residue(FIELD(new, F_OCCURRENCE_WEIGHT), &nc) ||
        as_residue(FIELD(old, F_FREE_WEIGHT), &ow) || as_residue(FIELD(old, F_OCCURRENCE_WEIGHT), &oc))
        goto done;
    u64 w = addmod(pw, addmod(mulmod(r, submod(nw, ow)), mulmod(sh, submod(nc, oc))));
    u64 c = submod(addmod(pc, nc), oc);
    w_obj = PyLong_FromUnsignedLongLong(w);
    c_obj = PyLong_FromUnsignedLongLong(c);
    if (w_obj == NULL || c_obj == NULL) goto done;
    h = hash_of(PyTuple_Pack(2, s, w_obj));
    if (h == NULL) goto done;
    cost = rule_cost(op, new_args, data, t);
    if (cost == NULL) goto done;
    size = rebuilt_size(parent, old, new);
    if (size == NULL) goto done;
    result = new_registered_node(op, new_args, data, t, cost, size, free, s, w_obj, c_obj, h, table, forget, key);
done:
    Py_DECREF(new_args);
    Py_XDECREF(key);
    Py_XDECREF(free);
    Py_XDECREF(dh);
    Py_XDECREF(s);
    Py_XDECREF(w_obj);
    Py_XDECREF(c_obj);
    Py_XDECREF(h);
    Py_XDECREF(cost);
    Py_XDECREF(size);
    return result;
}

/* One binder ancestor with the rewrite inside its scope: the common case.  Updates the position
 * changes and returns the rebuilt binder (a new reference). */
static PyObject *climb_binder(PyObject *parent, Py_ssize_t i, Py_ssize_t var_index, PyObject *old, PyObject *new,
                              PyObject *deltas, u64 a, u64 b) {
    PyObject *op = FIELD(parent, F_OP), *args = FIELD(parent, F_ARGS), *t = FIELD(parent, F_TYPE);
    PyObject *new_args = replaced_args(args, i, new);
    if (new_args == NULL) return NULL;
    PyObject *result = NULL, *cost = NULL, *position = NULL, *size = NULL;
    PyObject *name = FIELD(PyTuple_GET_ITEM(args, var_index), F_DATA);
    if (op == let_op) {
        double rhs = PyFloat_AsDouble(FIELD(PyTuple_GET_ITEM(new_args, 1), F_COST));
        double body = PyFloat_AsDouble(FIELD(PyTuple_GET_ITEM(new_args, 2), F_COST));
        if (PyErr_Occurred()) goto done;
        cost = PyFloat_FromDouble(let_cost + rhs + body);
    } else {
        cost = rule_cost(op, new_args, FIELD(parent, F_DATA), t);
    }
    if (cost == NULL) goto done;
    PyObject *memo = FIELD(old, F_POSITIONS);
    if (memo != Py_None) {
        position = PyDict_GetItemWithError(memo, name);
        if (position == NULL && PyErr_Occurred()) goto done;
        Py_XINCREF(position);
    }
    if (position == NULL) {
        position = PyObject_CallFunctionObjArgs(position_fn, old, name, NULL);
        if (position == NULL) goto done;
    }
    u64 p, n;
    if (as_residue(PyTuple_GET_ITEM(position, 0), &p) || as_residue(PyTuple_GET_ITEM(position, 1), &n)) goto done;
    PyObject *d = PyDict_GetItemWithError(deltas, name);
    if (d == NULL && PyErr_Occurred()) goto done;
    if (d != NULL) {
        u64 dp, dn;
        if (as_signed_residue(PyTuple_GET_ITEM(d, 0), &dp) || as_signed_residue(PyTuple_GET_ITEM(d, 1), &dn))
            goto done;
        p = addmod(p, addmod(mulmod(a, dp), mulmod(b, dn)));
        n = addmod(n, dn);
        if (PyDict_DelItem(deltas, name)) goto done; /* outside this scope, the name is another variable */
    }
    size = rebuilt_size(parent, old, new);
    if (size == NULL) goto done;
    int kept = same_free(old, new);
    if (kept < 0) goto done;
    result = intern(op, new_args, t, cost, kept ? FIELD(parent, F_FREE) : NULL, p, n, size);
done:
    Py_DECREF(new_args);
    Py_XDECREF(cost);
    Py_XDECREF(position);
    Py_XDECREF(size);
    return result;
}

/* climb(path, old, new, deltas) -> the new root, as _climb_python. */
static PyObject *climb(PyObject *self, PyObject *const *argv, Py_ssize_t argc) {
    if (argc != 4 || !PyList_Check(argv[0]) || (argv[3] != Py_None && !PyDict_Check(argv[3]))) {
        PyErr_SetString(PyExc_TypeError, "climb(path: list, old, new, deltas: dict | None)");
        return NULL;
    }
    PyObject *path = argv[0], *old = argv[1], *new = argv[2], *deltas = argv[3];
    if (!Py_IS_TYPE(old, Expr_Type) || !Py_IS_TYPE(new, Expr_Type)) {
        PyErr_SetString(PyExc_TypeError, "climb: old and new must be expressions");
        return NULL;
    }
    u64 a = 1, b = 0;
    Py_INCREF(new);
    for (Py_ssize_t k = PyList_GET_SIZE(path) - 1; k >= 0; k--) {
        PyObject *step = PyList_GET_ITEM(path, k);
        if (!PyTuple_Check(step) || PyTuple_GET_SIZE(step) != 2 || !Py_IS_TYPE(PyTuple_GET_ITEM(step, 0), Expr_Type)) {
            PyErr_SetString(PyExc_TypeError, "climb: the path holds (expression, child index) pairs");
            goto fail;
        }
        PyObject *parent = PyTuple_GET_ITEM(step, 0), *index = PyTuple_GET_ITEM(step, 1);
        Py_ssize_t i = PyLong_AsSsize_t(index);
        if (i == -1 && PyErr_Occurred()) goto fail;
        if (i < 0 || i >= PyTuple_GET_SIZE(FIELD(parent, F_ARGS))) {
            PyErr_SetString(PyExc_IndexError, "climb: a child index is out of range");
            goto fail;
        }
        PyObject *op = FIELD(parent, F_OP);
        PyObject *binder = PyDict_GetItemWithError(binders, op);
        if (binder == NULL && PyErr_Occurred()) goto fail;
        PyObject *found;
        if (binder == NULL) {
            found = climb_plain(parent, i, index, old, new);
        } else {
            Py_ssize_t var_index = PyLong_AsSsize_t(PyTuple_GET_ITEM(binder, 0));
            Py_ssize_t scope_index = PyLong_AsSsize_t(PyTuple_GET_ITEM(binder, 1));
            if (i != scope_index || deltas == Py_None) {
                found = PyObject_CallFunctionObjArgs(rebuild_binder, parent, index, old, new, Py_None, NULL);
                if (i == var_index) deltas = Py_None;
            } else {
                found = climb_binder(parent, i, var_index, old, new, deltas, a, b);
            }
        }
        if (found == NULL) goto fail;
        if (deltas != Py_None && PyDict_GET_SIZE(deltas) > 0) {
            u64 r, sh;
            if (edge_of(op, index, &r, &sh)) {
                Py_DECREF(found);
                goto fail;
            }
            a = mulmod(r, a);
            b = addmod(mulmod(r, b), sh);
        }
        old = parent;
        Py_SETREF(new, found);
    }
    return new;
fail:
    Py_DECREF(new);
    return NULL;
}

/* A new reference to the attribute `name` of `module`, checked to be a dict where `dict_only`. */
static int read_attr(PyObject *module, const char *name, int dict_only, PyObject **out) {
    PyObject *value = PyObject_GetAttrString(module, name);
    if (value == NULL) return -1;
    if (dict_only && !PyDict_Check(value)) {
        PyErr_Format(PyExc_TypeError, "init: %s is not a dict", name);
        Py_DECREF(value);
        return -1;
    }
    *out = value; /* kept for the module's life */
    return 0;
}

/* init(namespace): the tables and helpers are read from the namespace by their names. */
static PyObject *init(PyObject *self, PyObject *module) {
    PyObject *expr_type, *op_enum, *let_cost_obj;
    struct {
        const char *name;
        int dict_only;
        PyObject **out;
    } wanted[] = {
        {"Expr", 0, &expr_type},
        {"_Ref", 0, &Ref_Type},
        {"_forget_alpha", 0, &forget_alpha},
        {"_alpha_table", 1, &alpha_table},
        {"BINDERS", 1, &binders},
        {"_binder_layouts", 1, &binder_layouts},
        {"_binder_layout", 0, &binder_layout},
        {"_edges", 1, &edges},
        {"_edge", 0, &edge},
        {"COST_RULES", 1, &cost_rules},
        {"_position", 0, &position_fn},
        {"_intern_binder", 0, &intern_binder},
        {"_rebuild_binder", 0, &rebuild_binder},
        {"_table", 1, &table},
        {"_forget", 0, &forget},
        {"_union_free", 0, &union_free},
        {"_join_free", 0, &join_free},
        {"_data_hash", 0, &data_hash},
        {"Op", 0, &op_enum},
        {"LET_COST", 0, &let_cost_obj},
    };
    for (size_t k = 0; k < sizeof wanted / sizeof wanted[0]; k++)
        if (read_attr(module, wanted[k].name, wanted[k].dict_only, wanted[k].out)) return NULL;
    if (!PyType_Check(expr_type)) {
        PyErr_SetString(PyExc_TypeError, "init: Expr is not a class");
        return NULL;
    }
    Expr_Type = (PyTypeObject *)expr_type;
    let_op = PyObject_GetAttrString(op_enum, "LET");
    if (let_op == NULL) return NULL;
    let_cost = PyFloat_AsDouble(let_cost_obj);
    if (let_cost == -1.0 && PyErr_Occurred()) return NULL;
    for (int f = 0; f < N_FIELDS; f++)
        if (slot_offset(Expr_Type, field_names[f], &offsets[f])) return NULL;
    if (!PyType_Check(Ref_Type) || slot_offset((PyTypeObject *)Ref_Type, "key", &key_offset)) return NULL;
    str_h = PyUnicode_InternFromString("h"); /* a Type's hash */
    zero = PyLong_FromLong(0);
    if (str_h == NULL || zero == NULL) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"init", init, METH_O, "init(namespace): read the tables and helpers of knossos.rebuild by name."},
    {"climb", (PyCFunction)(void (*)(void))climb, METH_FASTCALL, "climb(path, old, new, deltas) -> new root"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "knossos._climb", NULL, -1, methods};

/* Raised whenever init's arguments or the meaning of climb change, so that knossos.rebuild can tell a
 * stale build from the current one. */
#define CLIMB_VERSION 6

PyMODINIT_FUNC PyInit__climb(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "VERSION", CLIMB_VERSION)) Py_CLEAR(m);
    return m;
}
