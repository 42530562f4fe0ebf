"""The runtime's C extensions built into an empty cache by several threads and processes at once.

A cold build of a model asks for the native runtime from the main thread and from the LLVM thread
together; several processes (a benchmark's children, test workers) share one cache directory.
Every one of them must get a working extension, and no build may change the process's working
directory (cffi's own driver does, which broke the build of whichever thread ran beside it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# Threads meet at a barrier and each builds one of the two extensions; the child prints what
# failed, the extensions it got, and whether its working directory ever changed.
_CHILD = r"""
import json, os, sys, threading, warnings
warnings.simplefilter("error")
from tensorlang.runtime import fastcall, threadpool

start = os.getcwd()
chdirs = []
_chdir = os.chdir
def spying_chdir(path):
    chdirs.append(str(path))
    _chdir(path)
os.chdir = spying_chdir

builders = [threadpool.native, fastcall.extension] * int(sys.argv[1])
barrier = threading.Barrier(len(builders))
errors, built = [], []
def build(make):
    barrier.wait()
    try:
        module = make()
        built.append(module is not None)
    except BaseException as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=build, args=(make,)) for make in builders]
for t in threads:
    t.start()
for t in threads:
    t.join()
lib = threadpool.native().lib
errors += [] if lib.tl_get_num_threads() >= 1 else ["no threads"]
print(json.dumps({"errors": errors, "built": built, "chdirs": chdirs,
                  "cwd_kept": os.getcwd() == start}))
"""


def _start_children(cache: Path, processes: int, threads: int) -> list[subprocess.Popen[str]]:
    env = {**os.environ, "TL_CACHE_DIR": str(cache)}
    return [subprocess.Popen([sys.executable, "-c", _CHILD, str(threads)], env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for _ in range(processes)]


def test_threads_and_processes_build_into_one_empty_cache(tmp_path: Path) -> None:
    children = _start_children(tmp_path, processes=3, threads=3)
    for child in children:
        out, err = child.communicate(timeout=600)
        assert child.returncode == 0, err[-3000:]
        report = json.loads(out.strip().splitlines()[-1])
        assert report["errors"] == [], report["errors"]
        assert report["built"] == [True] * 6
        assert report["chdirs"] == [] and report["cwd_kept"], report["chdirs"]
    names = sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".so")
    assert [n.split("_")[2] for n in names] == ["fastcall", "runtime"], names
    leftovers = [p.name for p in tmp_path.iterdir() if p.is_dir() or p.name.startswith(".tmp")]
    assert leftovers == [], leftovers
