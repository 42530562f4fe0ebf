"""GGUF models for `tensorlang model generate`: loading with one-line errors, and the prompt's
token ids from the command line.

topi.graph.llm does the work (import, build, generate); this module turns what a user can get
wrong (a missing file, a file of another kind, the gguf package absent, bad ids) into
`ModelError`.
"""

from __future__ import annotations

import os

import topi.graph as tg
from topi.graph.llm import CausalLM

from .models import ModelError


def parse_ids(text: str) -> list[int]:
    """`--prompt-ids 1,2,3` as ints (ValueError naming the text otherwise)."""
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--prompt-ids takes comma-separated token ids, got {text!r}") from None
    if not ids:
        raise ValueError("--prompt-ids is empty")
    return ids


def load_gguf_model(path: str, max_length: int, target: str) -> CausalLM:
    """The GGUF model at `path` built for generation of up to `max_length` positions."""
    if not os.path.isfile(path):
        raise ModelError(f"cannot read model {path}: no such file")
    try:
        return tg.from_gguf(path, max_length=max_length, target=target)
    except ImportError as err:
        raise ModelError(str(err)) from None
    except (ValueError, KeyError, OSError) as err:  # the gguf reader's errors on other files
        raise ModelError(f"{path}: {type(err).__name__}: {err}") from None
