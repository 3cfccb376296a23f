"""The public layers and losses of ksdata.torch_suite through the torch front end, at the fast
shapes (issue 46, item 4): each translates unchanged and agrees with torch on fresh inputs (the
check ``translate`` runs), and its reverse derivative agrees with torch.autograd on other inputs;
the one refused is refused in one line naming the file, line and column.  ``transformers``' layers
are skipped where it is not installed."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from benchmarks.bench_torch_suite import gradient_problem  # noqa: E402
from frontends.torch import translate  # noqa: E402
from knossos.errors import KsUsageError  # noqa: E402
from ksdata.torch_suite import SUITE, available, function  # noqa: E402

#: The layers refused, and why.
REFUSED = {
    "GaussianNLLLoss": "the function reads a tensor's value",  # torch's `if torch.any(var < 0): raise`
    "ConvTranspose1d": "with a transposed convolution",
    "CTCLoss": r"unsupported op aten\._ctc_loss\.Tensor",
    "Bilinear": r"unsupported op aten\._trilinear\.default",
    "Upsample (nearest)": "a conversion of a float tensor to torch.int64",  # the source index, floored
}
#: Layers whose fast translation and gradient take seconds in the interpreter.
SLOW = {"TransformerEncoderLayer", "TransformerDecoderLayer", "Llama decoder layer", "GPT-2 block", "Llama attention"}


def test_the_suite_cites_at_least_25_layers_and_refuses_at_most_a_tenth() -> None:
    assert len(SUITE) >= 25 and set(REFUSED) <= set(SUITE)
    assert all(layer.repo.count("/") == 1 and layer.path and layer.license for layer in SUITE.values())
    assert len(REFUSED) <= len(SUITE) // 10


def test_a_layer_is_a_function_of_its_named_parameters_then_its_inputs() -> None:
    fn, args = function(SUITE["LSTMCell"], "fast")
    import inspect

    assert list(inspect.signature(fn).parameters) == [
        "weight_ih",
        "weight_hh",
        "bias_ih",
        "bias_hh",
        "input0",
        "input1",
        "input2",
    ]
    h, c = fn(*args)
    assert h.shape == c.shape == (3, 6) and h.dtype == torch.float64


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in SUITE])
def test_a_public_layer_translates_and_its_gradient_agrees(name: str) -> None:
    layer = SUITE[name]
    if not available(layer):
        pytest.skip(f"{layer.package} is not installed")
    fn, args = function(layer, "fast")
    if name in REFUSED:
        with pytest.raises(KsUsageError, match=REFUSED[name]) as info:
            translate(fn, *args)
        assert "\n" not in info.value.render() and info.value.pos is not None and info.value.file is not None
        return
    program = translate(fn, *args, name="layer")
    assert gradient_problem(program, "layer", fn, args) == ""
