"""Tuning through dask.distributed: DaskBuilder / DaskRunner on a LocalCluster of processes.

Same kind of log and as fast a result as the local path, no record lost when a measuring worker
is killed mid-run, runs only on workers whose CPU matches, and each config compiled once.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import autotune
import tensorlang as tl
import topi
from autotune import hostcpu
from autotune.result import MeasureErrorNo

distributed = pytest.importorskip("distributed", reason="needs the distributed extra")


@autotune.template("test_farm/matmul")
def matmul(n: int, marker: str = "", signum: int = 0) -> tuple:
    """Eight configs, far apart in speed: vectorised wide tiles win clearly. With a marker, the
    Dask worker that times config (tx=16, vec=1) first gets signal `signum` mid-run."""
    A = tl.placeholder((n, n), "float32", name="A")
    B = tl.placeholder((n, n), "float32", name="B")
    C = topi.nn.matmul(A, B)
    s = tl.create_schedule(C.op)
    y, x = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    cfg = autotune.get_config()
    cfg.define_knob("tx", [1, 4, 16, 32])
    cfg.define_knob("vec", [0, 1])
    xo, xi = s[C].split(x, factor=cfg["tx"].val)
    s[C].reorder(y, xo, k, xi)
    if cfg["vec"].val:
        s[C].vectorize(xi)
    if marker and cfg["tx"].val == 16 and cfg["vec"].val:

        def signal_my_dask_worker_once() -> None:
            """Runs in the runner process that a Dask worker started, or in a child it forked
            (a closure, so it travels by value and unpickles at once): signals that Dask
            worker, once, and leaves its process id in `marker`."""
            import psutil  # a dependency of distributed

            if not os.path.exists(marker):
                worker = psutil.Process().parent()
                while "autotune.workers" in " ".join(worker.cmdline()):
                    worker = worker.parent()
                Path(marker).write_text(str(worker.pid))
                # mid-run (within the test's run timeout): the worker has told the scheduler
                # which run it starts, an event its batched stream sends within milliseconds,
                # later on a loaded machine
                time.sleep(1.0)
                os.kill(worker.pid, signum)

        autotune.before_run(signal_my_dask_worker_once)
    return s, [A, B, C]


SIGNALLED_CONFIG = {"tx": 16, "vec": 1}


def _report_cpu(cpu: str | None) -> None:
    """Make this (worker) process report `cpu` as its CPU (None: its own again)."""
    own = getattr(hostcpu, "_own_this_host", hostcpu.this_host)
    hostcpu._own_this_host = own  # type: ignore[attr-defined]
    if cpu is None:
        hostcpu.this_host = own
    else:
        real = own()
        hostcpu.this_host = lambda: hostcpu.HostCPU(real.hostname, cpu, real.features)


OTHER_CPU = "haswell" if hostcpu.this_host().cpu != "haswell" else "znver4"


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  resources={"measure": 1}, dashboard_address=":0") as cluster:
        with distributed.Client(cluster) as c:
            yield c


def _dask_option(client, **runner: object) -> autotune.MeasureOption:
    return autotune.measure_option(autotune.DaskBuilder(client),
                                   autotune.DaskRunner(client, number=4, repeat=3, **runner))


def _local_option(**runner: object) -> autotune.MeasureOption:
    return autotune.measure_option(autotune.LocalBuilder(n_parallel=2),
                                   autotune.LocalRunner(number=4, repeat=3, **runner))


#: Runner settings that time every config in full: configs cut short as measured slow (from the
#: first batch on, once one config has a cost) log a "slow" field, on one side or the other as
#: timing noise has it, and the test below compares the two logs field by field.
NO_CUTOFF = {"relative_cutoff": 1e3}


def test_dask_tuning_logs_like_local_tuning_and_returns_its_chosen_config(client, tmp_path):
    """The farmed log has the local log's fields, and the config it returns is the one its
    re-measurement chose. (Which config is fastest is a timing, which no test asserts: on a
    loaded machine the farmed choice once timed 0.51x the local one.)"""
    task = autotune.create_task("test_farm/matmul", (96,))
    local_log, dask_log = tmp_path / "local.jsonl", tmp_path / "dask.jsonl"
    autotune.tune(task, trials=8, tuner="grid", log_file=local_log,
                  measure_option=_local_option(**NO_CUTOFF), progress=False)
    farmed = autotune.tune(task, trials=8, tuner="grid", log_file=dask_log,
                           measure_option=_dask_option(client, check_correctness=True,
                                                       **NO_CUTOFF),
                           progress=False)
    local_lines = [json.loads(x) for x in local_log.read_text().splitlines()]
    dask_lines = [json.loads(x) for x in dask_log.read_text().splitlines()]
    assert [x["remeasured"]["chosen"] for x in local_lines[8:]].count(True) == 1
    (chosen,) = [x for x in dask_lines[8:] if x["remeasured"]["chosen"]]
    assert chosen["config"]["index"] == farmed.config.index
    local_lines, dask_lines = local_lines[:8], dask_lines[:8]  # the trials
    assert [sorted(x) for x in local_lines] == [sorted(x) for x in dask_lines]
    assert [sorted(x["result"]) for x in local_lines] == [sorted(x["result"]) for x in dask_lines]
    assert sorted(x["config"]["index"] for x in dask_lines) == list(range(8))
    records = autotune.load_records(dask_log)
    assert all(r.result.ok for r in records)
    assert {r.machine for r in records} == {hostcpu.this_host().describe()}


def test_killing_a_measuring_worker_mid_run_loses_no_record(client, tmp_path):
    marker = tmp_path / "killed"
    task = autotune.create_task("test_farm/matmul", (64, str(marker), int(signal.SIGKILL)))
    log = tmp_path / "log.jsonl"
    result = autotune.tune(task, trials=8, tuner="grid", log_file=log,
                           measure_option=_dask_option(client), progress=False)
    assert marker.exists()  # a worker was killed while it timed a config
    records = [r for r in autotune.load_records(log) if not r.remeasured]
    assert len(records) == 8 == result.n_results
    assert sorted(r.config_index for r in records) == list(range(8))
    assert all(r.result.ok for r in records), [r.result.error_msg for r in records]
    client.wait_for_workers(2, timeout=60)  # the nanny replaces the killed worker


def test_a_hung_measuring_worker_costs_one_run_timeout_and_no_more_runs(tmp_path):
    """Two "machines" (their own temporary folders, so their own measurement locks)."""
    cluster = distributed.LocalCluster(n_workers=0, threads_per_worker=1, processes=True,
                                       resources={"measure": 1}, dashboard_address=":0")
    for k in range(2):
        (tmp_path / f"machine{k}").mkdir()
        cluster.new_spec = copy.deepcopy(cluster.new_spec)
        cluster.new_spec["options"]["env"] = {"TMPDIR": str(tmp_path / f"machine{k}")}
        cluster.scale(k + 1)
    marker = tmp_path / "stopped"
    task = autotune.create_task("test_farm/matmul", (64, str(marker), int(signal.SIGSTOP)))
    log = tmp_path / "log.jsonl"
    try:
        with distributed.Client(cluster) as c:
            c.wait_for_workers(2, timeout=60)
            option = autotune.measure_option(
                autotune.DaskBuilder(c),
                autotune.DaskRunner(c, number=1, repeat=1, timeout=3, hang_seconds=4,
                                    relative_cutoff=1e6))  # no run stopped before the signal
            autotune.tune(task, trials=8, tuner="grid", log_file=log, measure_option=option,
                          progress=False)
    finally:
        if marker.exists():
            os.kill(int(marker.read_text()), signal.SIGCONT)
        cluster.close()
    records = [r for r in autotune.load_records(log) if not r.remeasured]
    assert sorted(r.config_index for r in records) == list(range(8))
    (hung,) = [r for r in records if not r.result.ok]
    assert hung.result.error_no is MeasureErrorNo.RUN_TIMEOUT
    assert "finished nothing" in hung.result.error_msg and hung.knobs == SIGNALLED_CONFIG


def test_a_worker_with_another_cpu_is_never_sent_a_run(client, tmp_path):
    client.wait_for_workers(2, timeout=60)
    impostor = sorted(client.scheduler_info()["workers"])[0]
    client.run(_report_cpu, OTHER_CPU, workers=[impostor])
    try:
        runner = autotune.DaskRunner(client, number=1, repeat=1)
        assert runner.measuring_hosts()[impostor].cpu == OTHER_CPU
        task = autotune.create_task("test_farm/matmul", (32,))
        option = autotune.measure_option(autotune.DaskBuilder(client), runner)
        with distributed.get_task_stream(client) as stream:
            autotune.tune(task, trials=8, tuner="grid", measure_option=option, progress=False)
        runs = [t for t in stream.data if "_run_on_worker" in str(t["key"])]
        assert runs and all(t["worker"] != impostor for t in runs)
    finally:
        client.run(_report_cpu, None, workers=[impostor])


def test_no_worker_with_the_targets_cpu_is_a_clear_error(client):
    task = autotune.create_task("test_farm/matmul", (32,), target=f"llvm -mcpu={OTHER_CPU}")
    option = autotune.measure_option(autotune.DaskBuilder(client),
                                     autotune.DaskRunner(client, number=1, repeat=1))
    with pytest.raises(RuntimeError, match=f"no measuring worker can time code built for "
                                           f"'llvm -mcpu={OTHER_CPU}'.*{hostcpu.this_host().cpu}"):
        autotune.tune(task, trials=2, measure_option=option, progress=False)


def test_each_config_is_compiled_once(capfd, monkeypatch, tmp_path):
    """TL_DEBUG=1 prints one "llvm opt" line per compilation, from whichever process."""
    monkeypatch.setenv("TL_DEBUG", "1")
    task = autotune.create_task("test_farm/matmul", (48,))
    autotune.tune(task, trials=8, tuner="grid", measure_option=_local_option(), progress=False)
    assert capfd.readouterr().err.count("llvm opt") == 8
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=True,
                                  resources={"measure": 1}, dashboard_address=":0",
                                  env={"TL_DEBUG": "1"}) as cluster:
        with distributed.Client(cluster) as c:
            capfd.readouterr()
            autotune.tune(task, trials=8, tuner="grid", measure_option=_dask_option(c),
                          progress=False)
            assert capfd.readouterr().err.count("llvm opt") == 8


def _doc_blocks(language: str) -> list[str]:
    text = (Path(__file__).resolve().parent.parent / "docs" / "tuning_farm.md").read_text()
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def test_the_farm_recipe_of_the_docs_works(tmp_path):
    """The commands and the script of docs/tuning_farm.md, with this machine as the farm."""
    port = _free_port()
    commands = [shlex.split(line.replace("8786", str(port)).replace("scheduler-host", "127.0.0.1"))
                for block in _doc_blocks("bash") for line in block.splitlines()
                if line.startswith("dask ")]
    assert [c[:2] for c in commands] == [["dask", "scheduler"], ["dask", "worker"],
                                         ["dask", "worker"]]
    commands[0] += ["--host", "127.0.0.1", "--dashboard-address", ":0"]
    commands[2] = [{"4": "1", "build=4": "build=1"}.get(w, w) for w in commands[2]]  # 2 cores
    (script,) = [b for b in _doc_blocks("python") if "Client(" in b]
    script = (script.replace("scheduler-host:8786", f"127.0.0.1:{port}")
              .replace("llvm -mcpu=skylake-avx512", f"llvm -mcpu={hostcpu.this_host().cpu}")
              .replace("trials=64", "trials=8"))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    processes = []
    try:
        for command in commands:
            processes.append(subprocess.Popen(command, cwd=tmp_path, env=env,
                                              stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL))
        with distributed.Client(f"tcp://127.0.0.1:{port}", timeout=60) as c:
            c.wait_for_workers(2, timeout=60)
        tuned = subprocess.run([sys.executable, "-"], input=script, capture_output=True,
                               text=True, cwd=tmp_path, env=env, timeout=300)
    finally:
        for p in processes:
            p.terminate()
        for p in processes:
            p.wait(timeout=30)
    assert tuned.returncode == 0, tuned.stderr
    assert "best Config" in tuned.stdout and "(8 measurements)" in tuned.stdout, tuned.stdout
    records = autotune.load_records(tmp_path / "farm.jsonl")
    assert sum(not r.remeasured for r in records) == 8 and all(r.machine for r in records)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
