"""Placeholder until the real pass lands."""


def unroll_loops(func):
    return func
