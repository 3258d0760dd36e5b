"""Input validation shared by every objective, and the precision rule.

Objectives receive embeddings from user code, so a wrong rank, a mismatched batch or width, or an
integer tensor is reported as a ``ValueError`` that says what was expected and what was given, e.g.::

    InfoNCE: `positives` must have shape (B, d) = (8, 384) matching `anchors`; got (8, 256)

Finiteness: every floating-point input of an objective is checked for NaN and ±inf before the loss is computed
(``Objective.checked``), so a diverged model's NaN embeddings are a ``ValueError`` naming the argument instead of a
``nan`` loss::

    InfoNCE: `anchors` holds non-finite values (3 NaN, 0 ±inf of 393216): ...

On by default. It costs one sum per input tensor and one host synchronisation per call (on a GPU the
synchronisation, which stalls the queue of kernels, is most of the cost). Measured on a 1024×384 float32 batch,
CPU, 1 thread (``python bench/finite_check.py``): InfoNCE forward 7.37 ms with the check, 7.16 ms without
(+0.21 ms, about 3 %); forward + backward 24.7 ms either way; the check alone 0.23 ms for both inputs.
Switch it off for speed with :func:`set_finite_checks` (every objective),
the :func:`finite_checks` context manager, or ``objective.check_finite = False`` (one instance). The trainer
switches it off for a training run's objectives (``Method.on_train_start``): ``train.on_nonfinite`` handles a
non-finite loss there (stop with a ``DivergenceError``, or skip the step).

Precision: losses are computed in float32 at least. ``float16`` / ``bfloat16`` inputs are upcast
(``float64`` stays ``float64``), and :func:`full_precision` turns autocast off inside the loss, so a
temperature of 0.01 (logits up to 100) cannot overflow half precision.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import torch
from torch import Tensor

CHECK_FINITE = True
"""Whether objectives check their floating-point inputs for NaN / ±inf (an instance's ``check_finite`` overrides
it); see :func:`set_finite_checks`."""

_HALF_DTYPES = (torch.float16, torch.bfloat16)
_AUTOCAST_DEVICES = ("cpu", "cuda", "xpu", "mps")


def upcast(x: Tensor) -> Tensor:
    """Return ``x`` in float32 when it is half precision (float16 / bfloat16), else unchanged."""
    return x.float() if x.dtype in _HALF_DTYPES else x


@contextlib.contextmanager
def full_precision(x: Tensor) -> Iterator[None]:
    """Disable autocast on ``x``'s device so matmuls inside a loss run in the inputs' (upcast) dtype."""
    if x.device.type not in _AUTOCAST_DEVICES:
        yield
        return
    with torch.autocast(device_type=x.device.type, enabled=False):
        yield


def set_finite_checks(enabled: bool) -> bool:
    """Turn the objectives' NaN / ±inf check of their inputs on or off (every objective without its own
    ``check_finite``); returns the previous setting."""
    global CHECK_FINITE
    previous, CHECK_FINITE = CHECK_FINITE, bool(enabled)
    return previous


@contextlib.contextmanager
def finite_checks(enabled: bool) -> Iterator[None]:
    """``with finite_checks(False): ...``: the objectives' finiteness check off (or on) inside the block only."""
    previous = set_finite_checks(enabled)
    try:
        yield
    finally:
        set_finite_checks(previous)


def check_finite(owner: str, inputs: dict[str, object]) -> None:
    """ValueError naming the first floating-point tensor of ``inputs`` (keyed by argument name) that holds NaN or
    ±inf. One sum per tensor and one host synchronisation for all of them; the exact count only on failure."""
    tensors = [(name, x) for name, x in inputs.items() if isinstance(x, Tensor) and x.is_floating_point()]
    if not tensors:
        return
    sums = torch.stack([x.detach().sum(dtype=torch.float32).reshape(()) for _, x in tensors])
    if bool(torch.isfinite(sums).all()):
        return
    for name, x in tensors:
        x = x.detach()
        if bool(torch.isfinite(x).all()):  # the sum overflowed on large finite values
            continue
        nan, inf = int(torch.isnan(x).sum()), int(torch.isinf(x).sum())
        raise ValueError(
            f"{owner}: `{name}` holds non-finite values ({nan} NaN, {inf} ±inf of {x.numel()}): the embeddings "
            "come from a diverged model or bad inputs (switch this check off with "
            "contrastext.objectives.set_finite_checks(False) or check_finite=False on the objective)"
        )


def check_embeddings(
    owner: str,
    name: str,
    x: object,
    *,
    rows: int | None = None,
    width: int | None = None,
    like: str | None = None,
    rows_name: str = "B",
    min_rows: int = 0,
) -> Tensor:
    """Check that ``x`` is a 2-D floating tensor (optionally with ``rows`` rows and ``width`` columns).

    ``owner`` is the objective's name and ``like`` the argument the shape must match; both appear in the
    message. Returns ``x`` upcast to float32 when it was half precision.
    """
    expected = f"({rows_name if rows is None else rows}, {'d' if width is None else width})"
    suffix = f" matching `{like}`" if like else ""
    if not isinstance(x, Tensor):
        raise ValueError(f"{owner}: `{name}` must be a 2-D float tensor of shape {expected}{suffix}; got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(
            f"{owner}: `{name}` must be a 2-D float tensor of shape {expected}{suffix}; got shape {tuple(x.shape)}"
        )
    if not x.is_floating_point():
        raise ValueError(f"{owner}: `{name}` must be a floating-point tensor of shape {expected}; got dtype {x.dtype}")
    if (rows is not None and x.shape[0] != rows) or (width is not None and x.shape[1] != width):
        raise ValueError(f"{owner}: `{name}` must have shape {expected}{suffix}; got {tuple(x.shape)}")
    if x.shape[0] < min_rows:
        raise ValueError(f"{owner}: `{name}` needs at least {min_rows} row(s) of shape {expected}; got {tuple(x.shape)}")
    return upcast(x)


def check_pair(owner: str, name_a: str, a: object, name_b: str, b: object) -> tuple[Tensor, Tensor]:
    """Check two (B, d) tensors of the same shape (row i of one pairs with row i of the other)."""
    a = check_embeddings(owner, name_a, a, min_rows=1)
    b = check_embeddings(owner, name_b, b, rows=a.shape[0], width=a.shape[1], like=name_a)
    a, b = common_dtype(a, b)
    return a, b


def check_paired_rows(
    owner: str,
    name_a: str,
    a: object,
    name_b: str,
    b: object,
    *,
    width_a: int | None = None,
    width_b: int | None = None,
) -> tuple[Tensor, Tensor]:
    """Check a (B, d_a) and b (B, d_b): row i of one pairs with row i of the other, widths may differ.

    For two kinds of feature of the same examples (RECLAIM's u and v); no dtype is imposed across them.
    """
    a = check_embeddings(owner, name_a, a, width=width_a, min_rows=1)
    b = check_embeddings(owner, name_b, b, width=width_b)
    if a.shape[0] != b.shape[0]:
        shape_a = f"(B, {'d' if width_a is None else width_a})"
        shape_b = f"(B, {'d' if width_b is None else width_b})"
        raise ValueError(
            f"{owner}: `{name_a}` {shape_a} and `{name_b}` {shape_b} must have the same B (row i of one pairs "
            f"with row i of the other); got {tuple(a.shape)} and {tuple(b.shape)}"
        )
    return a, b


def check_negative_sets(owner: str, name: str, x: object | None, batch: int, width: int | None = None) -> Tensor | None:
    """Check optional negatives given per row (B, K, d) or shared by the batch (K, d), K >= 1."""
    if x is None:
        return None
    expected = f"(B={batch}, K, d) per row or shared (K, d)" + ("" if width is None else f" with d = {width}")
    if not isinstance(x, Tensor):
        raise ValueError(f"{owner}: `{name}` must be a float tensor of shape {expected}; got {type(x).__name__}")
    if x.dim() not in (2, 3) or (x.dim() == 3 and x.shape[0] != batch) or (width is not None and x.shape[-1] != width):
        raise ValueError(f"{owner}: `{name}` must be {expected}; got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise ValueError(f"{owner}: `{name}` must be a floating-point tensor of shape {expected}; got dtype {x.dtype}")
    if x.shape[-2] < 1:
        raise ValueError(f"{owner}: `{name}` needs at least one negative (K >= 1) of shape {expected}; got {tuple(x.shape)}")
    return upcast(x)


def check_extra(owner: str, name: str, x: object | None, width: int, like: str = "anchors") -> Tensor | None:
    """Check optional extra candidates (N, d): any number of rows, the width of ``like``."""
    if x is None:
        return None
    return check_embeddings(owner, name, x, width=width, like=like, rows_name="N")


def check_labels(owner: str, labels: object, batch: int, name: str = "labels") -> Tensor:
    """Check a 1-D integer label tensor of length ``batch``."""
    if not isinstance(labels, Tensor):
        raise ValueError(f"{owner}: `{name}` must be a 1-D integer tensor of shape ({batch},); got {type(labels).__name__}")
    if labels.dim() != 1 or labels.shape[0] != batch:
        raise ValueError(f"{owner}: `{name}` must have shape ({batch},) (one per row); got shape {tuple(labels.shape)}")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise ValueError(f"{owner}: `{name}` must be an integer tensor of shape ({batch},); got dtype {labels.dtype}")
    return labels


def check_indices(owner: str, indices: object, batch: int, name: str = "indices") -> Tensor:
    """Check a 1-D integer tensor of ``batch`` row indices (e.g. memory-bank rows of the batch's examples)."""
    expected = f"{name} (B,) must be a 1-D integer tensor with one entry per row, B = {batch}"
    if not isinstance(indices, Tensor):
        raise ValueError(f"{owner}: {expected}; got {type(indices).__name__}")
    if indices.dim() != 1 or indices.shape[0] != batch:
        raise ValueError(f"{owner}: {expected}; got shape {tuple(indices.shape)}")
    if indices.is_floating_point() or indices.is_complex() or indices.dtype == torch.bool:
        raise ValueError(f"{owner}: {expected}; got dtype {indices.dtype}")
    return indices


def common_dtype(*tensors: Tensor) -> tuple[Tensor, ...]:
    """Cast tensors to their promoted floating dtype (e.g. float32 with float64 -> float64)."""
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = torch.promote_types(dtype, t.dtype)
    return tuple(t.to(dtype) for t in tensors)


def check_positive(owner: str, name: str, value: float) -> float:
    """Check a strictly positive finite hyper-parameter (temperature, margin scale...)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{owner}: `{name}` must be a positive number; got {value!r}")
    return float(value)


def check_non_negative(owner: str, name: str, value: float) -> float:
    """Check a finite hyper-parameter that is >= 0 (margins, weights)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{owner}: `{name}` must be a number >= 0; got {value!r}")
    return float(value)


def check_choice(owner: str, name: str, value: str, choices: tuple[str, ...]) -> str:
    """Check a string option against its allowed values."""
    if value not in choices:
        raise ValueError(f"{owner}: `{name}` must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value


def zero_with_grad(*tensors: Tensor) -> Tensor:
    """A scalar 0 connected to the inputs' graph, for batches where a loss has no term to average.

    Returning a plain ``torch.tensor(0.)`` would make ``loss.backward()`` fail in a training loop; this zero
    backpropagates (zero) gradients to every input instead.
    """
    return sum(t.sum() * 0.0 for t in tensors)  # type: ignore[return-value]
