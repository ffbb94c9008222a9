"""`kernels.matmul` as a drop-in for torch.matmul, and the torch op `farm::matmul` under it.

torch.matmul's contract in front of a dispatcher's 2-D products (kernels/dispatch.py `Dispatcher.run`):
- A of any rank against a 2-D B (or a B whose batch dims are all 1): A's leading dims fold into M, so
  a [48, 8, 96] @ [96, 64] is one launch of 384x64x96, as torch folds it for cuBLAS;
- a 1-D operand is a row of A or a column of B, its dim removed from the result as torch removes it;
- the rest runs torch.matmul itself, which raises torch's errors for what it rejects: a batched B (one
  batched cuBLAS launch, where per-batch calls would each pay a launcher's host time, 18-38 us for the
  pointer variants on an H200 host), 1-D @ 1-D, dtypes without a kernel (float64, integers), mixed
  dtypes or devices, empty products and K = 0, mismatched shapes;
- `out=` as torch's: resized as torch resizes it (with its warning), the product copied in; where
  torch refuses it (a dtype other than the result's, autograd) torch.matmul raises.

The 2-D product is the op `farm::matmul(a, b, dispatcher, objective)`: torch.compile traces it as one
node (its fake gives the shape), its registered autograd runs each backward product through the same
dispatcher, and a CUDA graph captures whatever the chosen launcher queues. An eager call that needs no
gradient calls the dispatcher directly: through torch.library a call took 21.6 us of host against 3.5
for the dispatcher's own on a 4x4 float32 product the library served (a 2-core CPU host), time an eager
caller of a short product waits for.

Decided calls take a route. An eager call (no `out=`, no gradient, not traced) is keyed by its operands'
shapes, strides, dtypes and devices and its objective (the route key: `DropIn`); the first call of a key
decides, and leaves the key's route (`Routes`): torch.matmul itself where the library serves (a batched
A or a 1-D operand too: torch.matmul folds them) or torch.matmul's own rules apply, else the
dispatcher's 2-D route (`Dispatcher.route`: a launcher bound to its compiled kernel, grid and constexprs
where the variant binds one) behind the fold's two reshapes. The next call of the key makes the key and
calls its route, with no other check: whatever decided the route is fixed by the key, and what
torch.matmul checks the route still checks. Host time a decided call adds to torch.matmul's, 4x4 float32
on a 2-core CPU host: 2.1-2.3 us for 2-D, 3-D and 1-D operands (the 3-D and 1-D ones took 9 us while a
library route reshaped them; `is_cuda` and no objective resolved took 0.8 us off the key). On an H100
host the key took 1.31 us, the dictionary's look-up 0.26 and the capture query 0.29, a decided cuBLAS
route 2.4-2.6 us over torch.matmul's 11.7. Python calls cost more once Dynamo is set up (its frame
hook sees every one): a decided cuBLAS route read 6.0 us over torch.matmul in benchmarks/dropin_check.py's
process, which had run torch.compile, with the key in a function of its own and eight Python calls a
call; 3.8 us with four. `DropIn.__call__` makes the key and takes the route itself: two Python calls,
the call and the compile query. So made, with the key in C++, on a slower H100 host (torch.matmul 20.3
us): 2.3 us over torch.matmul, of which the capture query 0.88, now asked only by a key whose two
default objectives decide differently (`ByCapture`).
"""

from __future__ import annotations

import functools
import itertools
import math
import warnings
import weakref
from typing import Any

import torch

from kernels import route_key
from kernels.launching import bounded_put
from kernels.space import torch_dtypes

# The dtypes the variants have kernels for: the spec's dtypes (kernels.space, their one table).
KERNEL_DTYPES = frozenset(torch_dtypes().values())

# op id -> dispatcher: the op's arguments are tensors and scalars, so a dispatcher is named by its id.
_DISPATCHERS: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
_IDS = itertools.count()


def register(dispatcher: Any) -> int:
    """An id for `dispatcher` (kernels.dispatch.Dispatcher) that `farm::matmul` calls take."""
    op_id = next(_IDS)
    _DISPATCHERS[op_id] = dispatcher
    return op_id


class Routes(dict):
    """route key (`matmul`) -> the callable (a, b) -> torch.matmul(a, b) that serves it, and counts:
    `served` calls taken by a kept route, `decided` routes made. Counted, not timed: tests ask which
    path a call took."""

    def __init__(self) -> None:
        super().__init__()
        self.served = 0
        self.decided = 0


# the route key's tensor part: one C call where kernels/route_key.py built it
_route_key = route_key.key_function()
# torch.cuda.is_current_stream_capturing's own query, without its Python call (a dummy that is never
# called where torch has no CUDA: only a CUDA operand asks)
_capturing = torch.cuda.graphs._cuda_isCurrentStreamCapturing
_is_compiling = torch.compiler.is_compiling
_is_dynamo_compiling = torch.compiler.is_dynamo_compiling


class FoldedRoute:
    """A route through a 2-D product (`product`): A and B reshaped to a_shape and b_shape, the
    product to shape."""

    __slots__ = ("a_shape", "b_shape", "product", "shape")

    def __init__(self, product, a_shape: torch.Size, b_shape: torch.Size, shape: tuple[int, ...]) -> None:
        self.product, self.a_shape, self.b_shape, self.shape = product, a_shape, b_shape, shape

    def __call__(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self.product(a.reshape(self.a_shape), b.reshape(self.b_shape)).reshape(self.shape)


def kernel_operands(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether a dispatcher may multiply a and b: 2-D, one dtype that has kernels, one device, M, N
    and K above 0 and agreeing inner sizes."""
    if a.dtype != b.dtype or a.dtype not in KERNEL_DTYPES or a.device != b.device:
        return False
    a_shape, b_shape = a.shape, b.shape  # each `.shape` builds a torch.Size: read once
    return len(a_shape) == 2 and len(b_shape) == 2 and a_shape[1] == b_shape[0] and 0 not in a_shape + b_shape


@torch.library.custom_op("farm::matmul", mutates_args=())
def farm_matmul(a: torch.Tensor, b: torch.Tensor, dispatcher: int, objective: str) -> torch.Tensor:
    """a @ b for 2-D a and b, by the registered dispatcher `dispatcher`, best for `objective`."""
    if not kernel_operands(a, b):
        return torch.matmul(a, b)
    c = _DISPATCHERS[dispatcher].run(a, b, objective)
    # Compiled code indexes the output by the fake's strides (row-major): `grouped_pad` stores C in rows
    # 128 B apart, a view that must be copied to honour them.
    return c if c.is_contiguous() else c.contiguous()


@farm_matmul.register_fake
def _fake(a: torch.Tensor, b: torch.Tensor, dispatcher: int, objective: str) -> torch.Tensor:
    torch._check(a.dim() == 2 and b.dim() == 2, lambda: "farm::matmul takes 2-D operands")
    torch._check(a.shape[1] == b.shape[0], lambda: f"farm::matmul: {a.shape} @ {b.shape}")
    return a.new_empty((a.shape[0], b.shape[1]))


def _setup_context(ctx, inputs, output) -> None:
    a, b, dispatcher, objective = inputs
    ctx.save_for_backward(a, b)
    ctx.dispatcher, ctx.objective = dispatcher, objective


def _backward(ctx, grad: torch.Tensor):
    a, b = ctx.saved_tensors
    grad_a = grad_b = None
    if ctx.needs_input_grad[0]:
        grad_a = farm_matmul(grad, b.mT, ctx.dispatcher, ctx.objective)
    if ctx.needs_input_grad[1]:
        grad_b = farm_matmul(a.mT, grad, ctx.dispatcher, ctx.objective)
    return grad_a, grad_b, None, None


farm_matmul.register_autograd(_backward, setup_context=_setup_context)


def _folded(
    a: torch.Tensor, b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, tuple[int, ...] | None] | None:
    """(A as M x K, B as K x N, the result's shape or None where it is the 2-D product's) where the
    product is one 2-D product of kernel operands, else None (torch.matmul runs)."""
    if a.dim() == 2 and b.dim() == 2:  # the common case, without the reshapes' host time
        return (a, b, None) if kernel_operands(a, b) else None
    if a.dim() == 0 or b.dim() == 0 or (a.dim() == 1 and b.dim() == 1):
        return None
    a_rows = a.unsqueeze(0) if a.dim() == 1 else a  # [..., M, K]
    b_cols = b.unsqueeze(-1) if b.dim() == 1 else b  # [..., K, N]
    if any(size != 1 for size in b_cols.shape[:-2]):
        return None  # a batched B
    (m, k), n = a_rows.shape[-2:], b_cols.shape[-1]
    if k != b_cols.shape[-2]:
        return None
    # B's batch dims are all 1: the batch is A's, with B's extra leading 1s in front.
    batch = (1,) * max(0, b_cols.dim() - a_rows.dim()) + tuple(a_rows.shape[:-2])
    shape = (*batch, *(() if a.dim() == 1 else (m,)), *(() if b.dim() == 1 else (n,)))
    a2 = a_rows.reshape(math.prod(batch) * m, k)
    b2 = b_cols.reshape(k, n)
    return (a2, b2, shape) if kernel_operands(a2, b2) else None


def _resize_output(out: torch.Tensor, shape: tuple[int, ...] | torch.Size) -> None:
    """What torch does to an `out=` of another shape (ATen's resize_output, a Meta-only op in Python):
    resizes it, warning where it held elements."""
    if out.shape == shape:
        return
    if out.numel() != 0:
        warnings.warn(
            f"An output with one or more elements was resized since it had shape {list(out.shape)}, which "
            f"does not match the required output shape {list(shape)}. This behavior is deprecated, and in "
            "a future PyTorch release outputs will not be resized unless they have zero elements. You can "
            "explicitly reuse an out tensor t by resizing it, inplace, to zero elements with t.resize_(0).",
            UserWarning,
            stacklevel=4,
        )
    out.resize_(shape)


class DropIn:
    """What calls as torch.matmul(a, b, out=out) with its 2-D products through a dispatcher
    (kernels/dispatch.py's Dispatcher and Matmul): `__call__` serves a decided call from `routes`,
    `decide(a, b, out, objective, key)` every other (its objective resolved, then `matmul`).

    The route key (None where no route may serve the call: an `out=`, Dynamo tracing, not plain
    tensors, a gradient to record): the operands' sizes, strides, dtypes and devices (kernels/route_key.py:
    one C call where built), and the objective as given. Where that is None and the dispatcher has none
    of its own, the default is resolved outside torch.compile by whether the device's stream captures a
    CUDA graph (kernels.dispatch.default_objective); the key's route asks that (`ByCapture`) only where
    the two defaults decide the product differently: the query took 0.9 us of a decided cuBLAS call's
    2.3 over torch.matmul (H100 host). The fast path is made in the call itself, not a function it
    calls: each Python call costs host time (the module's docstring). `is_dynamo_compiling`, not
    `is_compiling`: one Python call where that takes two; what else compiles (torch.export's non-strict
    trace) passes tensor subclasses, which take no route."""

    routes: Routes

    def __call__(
        self,
        a: torch.Tensor,
        b: torch.Tensor,
        *,
        out: torch.Tensor | None = None,
        objective: str | None = None,
    ) -> torch.Tensor:
        """torch.matmul(a, b, out=out), its 2-D products through the dispatcher; `objective`: "eager",
        "kernel" or None (the dispatcher's own, else `default_objective`'s)."""
        key = None
        if out is None and not _is_dynamo_compiling():
            tensors = _route_key(a, b)  # None: not plain tensors, or a gradient to record
            if tensors is not None:
                key = (tensors, objective)
                routes = self.routes
                route = routes.get(key)
                if route is not None:
                    routes.served += 1
                    return route(a, b)
        return self.decide(a, b, out, objective, key)

    def decide(self, a, b, out: torch.Tensor | None, objective: str | None, key: tuple | None):
        """The call `__call__` found no route for: its objective resolved, then `matmul`."""
        raise NotImplementedError


def matmul(
    dispatcher: Any,
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    out: torch.Tensor | None,
    objective: str | None,
    key: tuple | None,
) -> torch.Tensor:
    """torch.matmul(a, b, out=out) with its 2-D product through `dispatcher`, a call `DropIn` found no
    route for; `objective` None: the dispatcher's `default_objective` for the operands' device. Where
    `key` is not None the call leaves its route under it."""
    compiling = _is_compiling()
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return torch.matmul(a, b, out=out)
    folded = _folded(a, b)
    if folded is None:
        c = torch.matmul(a, b, out=out)
        if key is not None and not compiling:
            _keep(dispatcher.routes, key, torch.matmul)
        return c
    a2, b2, shape = folded
    defaulted = objective is None  # then the capture state decides it (`ByCapture`)
    objective = objective or dispatcher.default_objective(a2.device)
    grad = torch.is_grad_enabled() and (a.requires_grad or b.requires_grad)
    if out is not None:
        if grad or out.requires_grad or out.dtype != a.dtype or out.device != a.device or compiling:
            return torch.matmul(a, b, out=out)  # what torch does there, its errors included
        c = dispatcher.run(a2, b2, objective)
        shape = c.shape if shape is None else shape
        _resize_output(out, shape)
        return out.copy_(c.reshape(shape))
    if compiling or grad:
        c = farm_matmul(a2, b2, dispatcher.op_id, objective)
        return c if shape is None else c.reshape(shape)
    c = dispatcher.run(a2, b2, objective)
    if key is not None:  # after the first launch: a bound route holds the kernel it compiled
        product = dispatcher.route(a2, b2, objective)
        # torch.matmul folds a batched A or a 1-D operand itself, and reshapes cost host time
        direct = product is torch.matmul or shape is None
        route = product if direct else FoldedRoute(product, a2.shape, b2.shape, shape)
        if defaulted and _may_capture(a2) and dispatcher.objective_matters(a2, b2):
            _keep_by_capture(dispatcher, key, route)
        else:
            _keep(dispatcher.routes, key, route)
    return c if shape is None else c.reshape(shape)


# Routes kept a dispatcher at most: a decoding process sees a new M every call (the oldest dropped first).
MAX_ROUTES = 1024


def _keep(routes: Routes, key: tuple, route) -> None:
    bounded_put(routes, key, route, MAX_ROUTES)
    routes.decided += 1


class ByCapture:
    """A key's routes where the call's objective is the default and the two defaults decide its product
    differently: `captured` while the stream captures a CUDA graph (the kernel objective), `eager`
    otherwise. A call in a state whose route is not made yet (None) decides it (`decide(a, b)`): it
    counts as served, by this entry, and as decided."""

    __slots__ = ("captured", "decide", "eager")

    def __init__(self, decide) -> None:
        self.decide, self.captured, self.eager = decide, None, None

    def __call__(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        route = self.captured if _capturing() else self.eager
        return self.decide(a, b) if route is None else route(a, b)


def _may_capture(t: torch.Tensor) -> bool:
    """Whether t's device has streams that capture CUDA graphs: a CUDA tensor's."""
    return t.is_cuda


def _keep_by_capture(dispatcher: Any, key: tuple, route) -> None:
    """Keep `route` for key in the current capture state, beside the other state's (`ByCapture`)."""
    routes = dispatcher.routes
    split = routes.get(key)
    if not isinstance(split, ByCapture):
        split = ByCapture(functools.partial(dispatcher.decide, out=None, objective=None, key=key))
        bounded_put(routes, key, split, MAX_ROUTES)
    if _capturing():
        split.captured = route
    else:
        split.eager = route
    routes.decided += 1
