"""Group and instance normalisation of NC... data: statistics per (sample, channel group) over
the group's channels and all spatial positions, then a per-channel scale and shift.

As in layer_norm, two reduction stages (the sum, then the sum of squared deviations from the
mean) feed one elementwise output stage; the reduce schedule computes the statistics per
(sample, group) and the output in one pass.
"""

from __future__ import annotations

import tensorlang as tl
from tensorlang.expr import Expr

from .utils import check_same_dim, check_tensor, const_shape


def group_norm(x: tl.Tensor, gamma: tl.Tensor, beta: tl.Tensor, num_groups: int,
               epsilon: float = 1e-5) -> tl.Tensor:
    """(x - mean) / sqrt(var + epsilon) * gamma[c] + beta[c], with mean and (biased) variance
    over each sample's group of C / num_groups channels and all positions after axis 1 (torch's
    group_norm, ONNX's GroupNormalization-21 with per-channel scale and bias).

    Returns:
        The output, tagged "group_norm_output".

    Raises:
        ValueError: x has fewer than 2 dimensions, num_groups does not divide C, gamma/beta
            are not of shape (C,).
        TypeError: x is not a float tensor.
    """
    check_tensor(x, "group_norm: x")
    if x.ndim < 2:
        raise ValueError(f"group_norm: x must be (N, C, ...), got shape {x.shape}")
    if not x.dtype.startswith("float"):
        raise TypeError(f"group_norm: x must be a float tensor, got {x.dtype}")
    dims = const_shape(x, "group_norm")
    channels = dims[1]
    if (isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups < 1
            or channels % num_groups):
        raise ValueError(f"group_norm: num_groups {num_groups!r} must divide {channels} channels")
    for name, t in (("gamma", gamma), ("beta", beta)):
        check_tensor(t, f"group_norm: {name}", 1)
        check_same_dim(t.shape[0], channels, f"group_norm: {name} size")
    per_group = channels // num_groups
    spatial = dims[2:]
    count = per_group
    for d in spatial:
        count *= d
    inv_count = tl.const(1.0 / count, x.dtype)

    def group_reduce(body, name: str) -> tl.Tensor:
        rc = tl.reduce_axis((0, per_group), name=f"{name}_c")
        rs = [tl.reduce_axis((0, d), name=f"{name}_s{k}") for k, d in enumerate(spatial)]

        def f(n: Expr, g: Expr) -> Expr:
            return tl.sum(body(x[(n, g * per_group + rc, *rs)], n, g), axis=[rc, *rs])

        return tl.compute((dims[0], num_groups), f, name=name, tag=name)

    total = group_reduce(lambda v, n, g: v, "group_norm_sum")

    def deviation_squared(v: Expr, n: Expr, g: Expr) -> Expr:
        centred = v - total[n, g] * inv_count
        return centred * centred

    var_sum = group_reduce(deviation_squared, "group_norm_varsum")
    eps = tl.const(float(epsilon), x.dtype)

    def f(*i: Expr) -> Expr:
        n, c = i[0], i[1]
        g = c // per_group
        scale = tl.rsqrt(var_sum[n, g] * inv_count + eps)
        return (x[i] - total[n, g] * inv_count) * scale * gamma[c] + beta[c]

    return tl.compute(x.shape, f, name="group_norm", tag="group_norm_output")


def instance_norm(x: tl.Tensor, gamma: tl.Tensor, beta: tl.Tensor,
                  epsilon: float = 1e-5) -> tl.Tensor:
    """Group norm with one channel per group: statistics per (sample, channel) over the spatial
    positions (torch's instance_norm without running statistics, ONNX's InstanceNormalization).

    Returns:
        The output, tagged "group_norm_output".
    """
    check_tensor(x, "instance_norm: x")
    if x.ndim < 2:
        raise ValueError(f"instance_norm: x must be (N, C, ...), got shape {x.shape}")
    return group_norm(x, gamma, beta, const_shape(x, "instance_norm")[1], epsilon)
