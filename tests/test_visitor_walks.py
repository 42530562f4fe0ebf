"""nodes_below: every node once, parents first; `stop_at` types yielded but not entered."""

from __future__ import annotations

import tensorlang as tl
from tensorlang.ir import Buffer, BufferLoad
from tensorlang.visitor import nodes_below


def test_stop_at_yields_a_buffer_without_entering_its_shape() -> None:
    n = tl.var("n")
    A = tl.placeholder((n, 3), name="A")
    B = tl.compute((n, 3), lambda i, j: A[i, j] * 2.0, name="B")
    s = tl.create_schedule(B.op)
    func = tl.lower(s, [A, B]).main
    every = list(nodes_below(func.body))
    stopped = list(nodes_below(func.body, stop_at=Buffer))
    assert any(isinstance(x, Buffer) for x in stopped)
    assert any(isinstance(x, BufferLoad) for x in stopped)
    assert len({id(x) for x in every}) == len(every)  # each shared node once
    assert {id(x) for x in stopped} < {id(x) for x in every}  # buffers' shapes left out
    shape_only = {id(x) for b in every if isinstance(b, Buffer) for x in nodes_below(b)
                  if x is not b} - {id(x) for x in nodes_below(func.body, stop_at=(Buffer,))}
    assert shape_only and not shape_only & {id(x) for x in stopped}
