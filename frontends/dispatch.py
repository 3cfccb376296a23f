"""Tracing a PyTorch function by the core ATen ops it calls, on its example tensors.

``trace(fn, args)`` runs ``fn`` on the examples under a dispatch mode that records every ATen call
into a ``torch.fx.Graph`` of the form :func:`frontends.torch.translate` lowers: placeholders
for the arguments and for the tensor constants the function reads, one ``call_function`` node per
op with its value in ``meta["val"]`` and the Python stack in ``meta["stack_trace"]``; an op with
several results has one ``operator.getitem`` node per tensor result, so that every result is traced.
An op with a lowering is recorded as it is; any other is replaced by its core ATen decomposition
(the table ``run_decompositions()`` uses) when it has one, and recorded otherwise (lowering names
it).  A tensor computed from the arguments may not leave torch (``.numpy()``, ``.tolist()``): what
the function made of its values outside would be baked in.

Why not ``torch.export``: it imports ``torch._dynamo`` (1.5-1.8 s here, more than the import of
torch itself), while this tracer runs the function's own CPU kernels and stays within what
``import torch`` loads; ``translate(..., tracer="export")`` gives the same graph for every op of the
table (tests/test_torch_frontend.py).  Running on real values, it must refuse what the examples'
values would otherwise decide silently: reading a tensor's value (``if x.sum() > 0``, ``.item()``)
and ops whose output shape depends on the data (``x[x > 0]``).
"""

from __future__ import annotations

import functools
import operator
import traceback
from collections.abc import Callable
from typing import Any

import torch
from torch._decomp import core_aten_decompositions
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from knossos.errors import KsUsageError

#: Ops whose output's size depends on the input's values.
DATA_DEPENDENT_SHAPES = frozenset(
    {"nonzero", "masked_select", "unique", "_unique2", "unique_dim", "unique_consecutive"}
)
#: Ops that read a tensor's value into Python (control flow or a number on the data).
VALUE_READS = frozenset({"_local_scalar_dense", "item", "is_nonzero", "equal"})


#: Tensor methods that hand a tensor's values to numpy or Python, where the tracer cannot follow them.
VALUE_EXPORTS = frozenset({"numpy", "tolist", "__array__", "__dlpack__"})
#: In-place ops that change only the tensor's view of its memory (its shape and strides), not the
#: memory: no other tensor sees them.
METADATA_IN_PLACE = frozenset({"transpose_", "t_", "squeeze_", "unsqueeze_", "swapdims_", "swapaxes_"})
#: The key of ``node.meta`` that says a node's value is computed from the function's arguments.
FROM_INPUTS = "from_inputs"


class TraceError(KsUsageError):
    """Something the examples' values would decide; ``stack`` is where the function did it."""

    def __init__(self, message: str, stack: str) -> None:
        super().__init__(message)
        self.stack = stack


class _Recorder(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Records ATen calls on tracked tensors into ``graph``."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch otherwise wraps __torch_dispatch__ in torch._dynamo.disable, whose first call imports
        # all of dynamo (1.5 s); nothing here is ever compiled by dynamo.
        return False

    def __init__(self, keep: Callable[[str], bool]) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.keep = keep
        self.decompositions = _decompositions()
        self.graph = torch.fx.Graph()
        self.nodes: dict[int, torch.fx.Node] = {}  # id of a tensor -> its node
        self.alive: list[torch.Tensor] = []  # the tracked tensors, so that their ids are not reused
        self.constants: dict[str, torch.Tensor] = {}
        self.inputs: list[str] = []
        #: Tensors an in-place op changed through another tensor that shares their memory (id ->
        #: the message and stack of that op): their nodes no longer hold their values.
        self.stale: dict[int, tuple[str, str]] = {}

    def track(self, t: torch.Tensor, node: torch.fx.Node) -> None:
        node.meta["val"] = _meta(t)
        self.nodes[id(t)] = node
        self.alive.append(t)

    def input(self, t: torch.Tensor) -> None:
        node = self.graph.placeholder(f"arg{len(self.inputs)}")
        node.meta[FROM_INPUTS] = True
        self.inputs.append(node.name)
        self.track(t, node)

    def from_inputs(self, t: torch.Tensor) -> bool:
        """Whether ``t`` is traced and computed from an argument (a global weight is not)."""
        node = self.nodes.get(id(t))
        return node is not None and bool(node.meta.get(FROM_INPUTS))

    def node_of(self, t: torch.Tensor, stack: str = "") -> torch.fx.Node:
        """``t``'s node; a tensor not traced becomes a constant, read first at ``stack``."""
        if id(t) in self.stale:
            raise TraceError(*self.stale[id(t)])
        node = self.nodes.get(id(t))
        if node is None:  # a tensor the function read from elsewhere (a global, a closure, numpy)
            node = self.graph.placeholder(f"const{len(self.constants)}")
            node.meta["stack_trace"] = stack  # an error about the constant names the line that reads it
            self.constants[node.name] = t.detach().clone()
            self.track(t, node)
        return node

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
        key = str(func).removeprefix("aten.")
        if name in VALUE_READS:
            raise TraceError(
                f"the function reads a tensor's value ({func}): control flow or numbers that depend "
                "on the data cannot be translated",
                _stack(),
            )
        if name in DATA_DEPENDENT_SHAPES or (name == "index" and _has_mask(args)):
            raise TraceError(f"a dynamic shape: {func} gives a tensor whose size depends on the data", _stack())
        if func._schema.is_mutable:
            return self.in_place(func, name, args, kwargs)
        if not self.keep(key):
            if name == "lift_fresh":  # torch.tensor([...]) in the function: a constant
                return args[0]
            if func in self.decompositions:
                decompose = self.decompositions[func]
                with self:
                    out = decompose(*args, **kwargs)
                if out is not NotImplemented:
                    return out
            with self:
                out = func.decompose(*args, **kwargs)  # a CompositeImplicitAutograd op: its definition
            if out is not NotImplemented:
                return out
        out = func(*args, **kwargs)
        flat_out, _ = tree_flatten(out)
        if not any(isinstance(t, torch.Tensor) for t in flat_out):
            return out  # prim.device and the like: facts about the tensors, not computation
        stack = _stack()
        to_node = lambda a: self.node_of(a, stack) if isinstance(a, torch.Tensor) else a  # noqa: E731
        node = self.graph.call_function(func, tree_map(to_node, tuple(args)), tree_map(to_node, dict(kwargs)))
        node.meta["stack_trace"] = stack
        node.meta[FROM_INPUTS] = any(n.meta.get(FROM_INPUTS) for n in node.all_input_nodes)
        self.track_results(out, node)
        return out

    def track_results(self, out: Any, node: torch.fx.Node) -> None:
        """``out`` (a tensor, or a tuple or list of them, nested) as ``node``'s value: each tensor of
        several results through an ``operator.getitem`` node, as torch.export writes them, so that
        every result an op gives is traced (an untracked one would become a constant)."""
        if isinstance(out, torch.Tensor):
            self.track(out, node)
            return
        node.meta["val"] = tree_map(_meta, out)
        for k, item in enumerate(out if isinstance(out, list | tuple) else ()):
            if isinstance(item, torch.Tensor | list | tuple):
                part = self.graph.call_function(operator.getitem, (node, k))
                part.meta["stack_trace"] = node.meta["stack_trace"]
                part.meta[FROM_INPUTS] = node.meta.get(FROM_INPUTS, False)
                self.track_results(item, part)

    def in_place(self, func: Any, name: str, args: Any, kwargs: Any) -> Any:
        """An in-place op (``x.add_(y)``, the ``squeeze_`` in matmul's own definition, the
        ``sigmoid_`` of the gates in ATen's ``gru_cell``) as its out-of-place form, the tensor then
        standing for the result.  Every other tensor that shares an element with it (its base, a
        view of it) no longer holds the value its node computes: it becomes stale, and reading it
        later is the error (a view that shares no element, another piece of a split, is fine)."""
        target = args[0] if args and isinstance(args[0], torch.Tensor) else None
        outplace = getattr(torch.ops.aten, name.removesuffix("_"), None) if name.endswith("_") else None
        overload = _same_overload(outplace, func) if outplace is not None else None
        message = f"an in-place op {func} on a tensor that other tensors share: write it out of place"
        if target is None or overload is None or kwargs.get("out") is not None:
            raise TraceError(message, _stack())
        with self:
            result = overload(*args, **kwargs)
        func(*args, **kwargs)  # the real tensor changes too: later ops compute on its new value
        self.nodes[id(target)] = self.node_of(result)
        self.alive.append(target)
        if name in METADATA_IN_PLACE:
            return target
        stack = _stack()
        for u in self.alive:
            if u is not target and id(u) not in self.stale and _overlap(u, target):
                self.stale[id(u)] = (message, stack)
        return target


@functools.cache
def _decompositions() -> Any:
    """torch's table, made once: making it collects every composite op (0.06 s a trace here)."""
    return core_aten_decompositions()


class _Exports(TorchFunctionMode):
    """Refuses a tensor computed from the arguments leaving torch (``x.numpy()``, ``x.tolist()``,
    ``np.asarray(x)``): what the function makes of the values there (numpy arithmetic, a Python
    branch) is invisible to the tracer and would be baked into the program with the examples'
    values.  Provenance is the graph's: a node is from the inputs when one of its arguments is."""

    def __init__(self, recorder: _Recorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = getattr(func, "__name__", "")
        if name in VALUE_EXPORTS and any(isinstance(a, torch.Tensor) and self.recorder.from_inputs(a) for a in args):
            raise TraceError(
                f"the function takes the values of a tensor computed from its arguments out of torch "
                f"(Tensor.{name}): what it makes of them cannot be traced and would be baked into the program",
                _stack(),
            )
        return func(*args, **(kwargs or {}))


def _same_overload(packet: Any, func: Any) -> Any:
    """The overload of the out-of-place ``packet`` with the in-place ``func``'s overload name, or
    else with its arguments (``transpose_.default`` is ``transpose.int``)."""
    found = getattr(packet, func._overloadname, None)
    if found is not None:
        return found
    want = [a.name for a in func._schema.arguments]
    for name in packet.overloads():
        overload = getattr(packet, name)
        if [a.name for a in overload._schema.arguments] == want:
            return overload
    return None


def _elements(t: torch.Tensor) -> torch.Tensor:
    """The storage offsets of ``t``'s elements."""
    offsets = torch.tensor([t.storage_offset()], dtype=torch.int64)
    for size, stride in zip(t.shape, t.stride(), strict=True):
        offsets = (offsets[:, None] + torch.arange(size, dtype=torch.int64)[None, :] * stride).reshape(-1)
    return offsets


def _overlap(u: torch.Tensor, t: torch.Tensor) -> bool:
    """Whether ``u`` and ``t`` share an element of memory."""
    if u.device != t.device or u.untyped_storage().data_ptr() != t.untyped_storage().data_ptr():
        return False
    if u.numel() == 0 or t.numel() == 0 or u.element_size() != t.element_size():
        return u.numel() > 0 and t.numel() > 0
    return bool(torch.isin(_elements(u), _elements(t)).any())


def _meta(t: Any) -> Any:
    """A tensor's shape and dtype now (an in-place op may change the tensor's own later)."""
    return torch.empty(t.shape, dtype=t.dtype, device="meta") if isinstance(t, torch.Tensor) else t


def _has_mask(args: Any) -> bool:
    """Whether ``aten.index``'s indices include a Boolean mask (``x[x > 0]``)."""
    indices = args[1] if len(args) > 1 else []
    return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices)


def _stack() -> str:
    return "".join(traceback.format_stack()[:-2])


def results(out: Any) -> list[Any]:
    """A function's results, flattened: a tensor, or the tensors of a tuple or list, nested ones
    (``nn.LSTM``'s ``(output, (h, c))``) in order."""
    if not isinstance(out, list | tuple):
        return [out]
    return [leaf for item in out for leaf in results(item)]


def trace(
    fn: Callable[..., Any], args: tuple[torch.Tensor, ...], keep: Callable[[str], bool]
) -> tuple[torch.fx.Graph, list[str], dict[str, torch.Tensor]]:
    """The graph of ``fn`` on ``args``, the names of its argument placeholders in order, and its
    constants by placeholder name.  ``keep(key)`` says an op (``"add.Tensor"``) is recorded as it is
    rather than decomposed.  Raises :class:`TraceError` for what the examples' values would decide."""
    recorder = _Recorder(keep)
    inputs = [a.detach().clone() for a in args]  # the function must not see (or change) the caller's tensors
    for a in inputs:
        recorder.input(a)
    with torch.no_grad(), _Exports(recorder), recorder:
        out = fn(*inputs)
    found = []
    for item in results(out):
        if not isinstance(item, torch.Tensor):
            raise KsUsageError(f"the function returns a {type(item).__name__}; return tensors")
        found.append(recorder.node_of(item))
    recorder.graph.output(found[0] if not isinstance(out, list | tuple) else tuple(found))
    recorder.graph.eliminate_dead_code()
    return recorder.graph, recorder.inputs, recorder.constants
