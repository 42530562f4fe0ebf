"""DeviceRunner: configs for aarch64 cross-built here and timed by the native runner on a device
(qemu user mode standing for a board): tuning runs of a GEMM template and of an auto-scheduled
compute whose logs name the device and whose best configs match numpy under qemu, files copied
to a device of its own, the device's description, and bad set-ups, crashes and hangs as clear
errors. Timings under qemu say nothing about speed: no test reads them but as numbers. Tests that
run code for aarch64 skip without the cross compiler or qemu."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from auto_schedule_workloads import REFERENCES, gemm_relu
from test_cross_targets import NEON, _missing_tools, _run

import autotune
import tensorlang as tl
from autotune.artifact import TaskSpec, build_job
from autotune.device import DeviceCPU
from tensorlang.runtime.toolchain import build_runner, emulator_command
from topi.x86.dense import matmul_template

pytestmark = pytest.mark.filterwarnings("ignore:workload")

QEMU_DESCRIPTION = """machine: aarch64
hostname: vm
kernel: Linux 6.1.0
cpus: 2
hwcap: 0xecfffffb
hwcap2: 0x7f877fff
midr: 0xf0510
cpuinfo: processor\t: 0
cpuinfo: vendor_id\t: AuthenticAMD
cpuinfo: model name\t: AMD EPYC
"""


@pytest.fixture(scope="module")
def tools() -> None:
    reason = _missing_tools(NEON)
    if reason:
        pytest.skip(reason)


def _artifacts(task: autotune.Task, indices: list[int]) -> list[autotune.Artifact]:
    """The task's configs built in this process, as a builder hands them to a runner."""
    return [build_job((TaskSpec.of(task), index, None), lambda *stage: None) for index in indices]


def _gemm_task(target: str = NEON) -> autotune.Task:
    return autotune.create_task("matmul.x86", args=((13, 29), (29, 40), "float32"), target=target)


def _records_of_the_device(log: Path) -> list[autotune.Record]:
    records = autotune.load_records(log)
    assert records and all(r.result.ok for r in records), [r.result for r in records]
    for r in records:
        assert r.target == NEON and r.cpu_signature == "generic neon-128 fma"
        assert "(aarch64 qemu-max, emulated on x86_64" in r.machine, r.machine
        assert all(c > 0 for c in r.result.costs)
    return records


# -- tuning for an aarch64 device under qemu ------------------------------------------------------

def test_tuning_a_gemm_template_for_an_aarch64_device(tools, tmp_path):
    log = tmp_path / "gemm.jsonl"
    runner = autotune.DeviceRunner(number=2, repeat=2, check_correctness=True, n_parallel=2)
    option = autotune.measure_option(autotune.LocalBuilder(n_parallel=1), runner)
    result = autotune.tune(_gemm_task(), trials=4, tuner="random", log_file=log,
                           measure_option=option, seed=3, progress=False, remeasure_rounds=2)
    assert result.config is not None
    records = _records_of_the_device(log)
    assert sum(not r.remeasured for r in records) == 4
    assert {len(r.result.costs) for r in records if not r.remeasured} == {2}  # a cost per round
    with autotune.apply_history_best(log), tl.Target(NEON):
        s, tensors = matmul_template((13, 29), (29, 40), "float32")
        tl.build(s, tensors, name="kernel").export_library(tmp_path / "best.so")
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(shape).astype("float32") for shape in ((13, 29), (29, 40)))
    proc, (out,) = _run(NEON, build_runner(tl.Target(NEON), tmp_path / "run"),
                        tmp_path / "best.so", {"a": a, "b": b})
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)


def test_tuning_an_auto_scheduled_compute_for_an_aarch64_device(tools, tmp_path):
    log = tmp_path / "auto.jsonl"
    task = autotune.create_task(gemm_relu, (7, 19, 33), target=NEON)
    option = autotune.measure_option(autotune.LocalBuilder(n_parallel=1),
                                     autotune.DeviceRunner(number=1, repeat=1, n_parallel=2))
    autotune.tune(task, trials=4, log_file=log, measure_option=option, seed=0, progress=False,
                  remeasure_top=0)
    records = _records_of_the_device(log)
    assert all(r.trace for r in records)
    s, tensors = task.apply_best(log)
    with tl.Target(NEON):
        tl.build(s, tensors, name="kernel").export_library(tmp_path / "best.so")
    rng = np.random.default_rng(1)
    inputs = {t.name: rng.standard_normal(tuple(map(int, t.shape))).astype("float32")
              for t in tensors[:-1]}
    proc, (out,) = _run(NEON, build_runner(tl.Target(NEON), tmp_path / "run"),
                        tmp_path / "best.so", inputs)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_allclose(out, REFERENCES["gemm_relu"](*inputs.values()), rtol=1e-5,
                               atol=1e-5)


# -- a device with files of its own, and wrong answers --------------------------------------------

def test_files_are_pushed_to_a_device_and_outputs_pulled_back(tools, tmp_path):
    device = tmp_path / "device"
    device.mkdir()
    runner = autotune.DeviceRunner(
        number=1, repeat=3, check_correctness=True, n_parallel=1, remote_dir=str(device),
        push=["cp", "{local}", "{remote}"], pull=["cp", "{remote}", "{local}"],
        staging_dir=tmp_path / "staging")
    artifacts = _artifacts(_gemm_task(), [0, 5])

    def corrupting_push(local: Path, remote: str) -> None:
        if local.name.startswith("in-"):
            np.save(remote, np.load(local) + 1)
        else:
            shutil.copy(local, remote)

    corrupted = autotune.DeviceRunner(number=1, repeat=1, check_correctness=True, n_parallel=1,
                                      remote_dir=str(tmp_path), push=corrupting_push,
                                      pull=["cp", "{remote}", "{local}"])
    try:
        results = runner.run(artifacts)
        assert all(r.ok and len(r.costs) == 3 for r in results), results
        names = {p.name for p in device.iterdir()}
        assert "tl-runner-aarch64" in names and any(n.startswith("in-") for n in names)
        assert sum(n.endswith(".so") for n in names) == 2
        (wrong,) = corrupted.run(artifacts[:1])
        assert wrong.error_no is autotune.MeasureErrorNo.WRONG_ANSWER, wrong
        assert "differs from the reference" in wrong.error_msg
    finally:
        runner.close()
        corrupted.close()


# -- crashes, hangs and bad set-ups ---------------------------------------------------------------

def _device_script(path: Path, on_run: str) -> list[str]:
    """A device command that describes the emulated device but does `on_run` for a run."""
    qemu = " ".join(emulator_command(tl.Target(NEON)))
    path.write_text(f'#!/bin/sh\nif [ "$2" = --describe ]; then exec {qemu} "$@"; fi\n{on_run}\n')
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return [str(path)]


def test_a_runner_that_crashes_or_hangs_is_an_error_result(tools, tmp_path):
    (artifact,) = _artifacts(_gemm_task(), [0])
    crashing = autotune.DeviceRunner(_device_script(tmp_path / "crash", "kill -SEGV $$"),
                                     n_parallel=1)
    hanging = autotune.DeviceRunner(_device_script(tmp_path / "hang", "exec sleep 30"),
                                    timeout=2, n_parallel=1)
    unreachable = autotune.DeviceRunner(["sh", "-c", "echo 'board: no route' >&2; exit 255"],
                                        n_parallel=1)
    try:
        (crashed,) = crashing.run([artifact])
        assert crashed.error_no is autotune.MeasureErrorNo.RUNTIME_ERROR
        assert "killed by SIGSEGV" in crashed.error_msg and "aarch64" in crashed.machine
        start = time.monotonic()
        (hung,) = hanging.run([artifact])
        assert hung.error_no is autotune.MeasureErrorNo.RUN_TIMEOUT, hung
        assert "ran past 2 s" in hung.error_msg and time.monotonic() - start < 20
        (lost,) = unreachable.run([artifact])
        assert lost.error_no is autotune.MeasureErrorNo.RUNTIME_ERROR
        assert "did not describe itself" in lost.error_msg and "no route" in lost.error_msg
    finally:
        for r in (crashing, hanging, unreachable):
            r.close()


def test_code_for_a_cpu_the_device_lacks_is_named(tools):
    (artifact,) = _artifacts(_gemm_task("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-v1"), [0])
    qemu = emulator_command(tl.Target(NEON))
    a72 = autotune.DeviceRunner([qemu[0], "-cpu", "cortex-a72", *qemu[3:]], n_parallel=1)
    try:
        (result,) = a72.run([artifact])
    finally:
        a72.close()
    assert result.error_no is autotune.MeasureErrorNo.RUNTIME_ERROR
    assert "killed by SIGILL: an instruction that the device's CPU lacks" in result.error_msg
    assert "(aarch64 cortex-a72, emulated on" in result.machine


def test_bad_setups_are_named(tmp_path):
    with pytest.raises(ValueError, match="'no-such-device-tool' is not found"):
        autotune.DeviceRunner(["no-such-device-tool", "board"])
    with pytest.raises(TypeError, match="list of strings"):
        autotune.DeviceRunner("ssh board")
    with pytest.raises(ValueError, match="needs remote_dir"):
        autotune.DeviceRunner(["ssh", "board"], push=["scp", "{local}", "board:{remote}"])
    with pytest.raises(ValueError, match=r"\{local\} and \{remote\}"):
        autotune.DeviceRunner(["ssh", "board"], push=["scp", "{local}"], remote_dir="/tmp")
    with pytest.raises(ValueError, match="needs pull"):
        autotune.DeviceRunner(["ssh", "board"], push=["scp", "{local}", "board:{remote}"],
                              remote_dir="/tmp", check_correctness=True)
    with pytest.raises(ValueError, match="number and repeat >= 1"):
        autotune.DeviceRunner(number=0)
    runner = autotune.DeviceRunner(["ssh", "board"])
    with pytest.raises(ValueError, match="runs on this machine: time it with LocalRunner"):
        runner.run(_artifacts(_gemm_task("llvm"), [0]))
    runner.close()


# -- what the device says of itself ---------------------------------------------------------------

def test_the_native_runner_times_rounds_and_describes_its_machine(tmp_path):
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    runner = build_runner(tl.Target("llvm"), tmp_path / "run")
    a = tl.placeholder((37,), name="a")
    b = tl.compute((37,), lambda i: a[i] * 2.0, name="b")
    tl.build(tl.create_schedule(b.op), [a, b], name="kernel").export_library(tmp_path / "k.so")
    np.save(tmp_path / "a.npy", np.arange(37, dtype="float32"))
    proc = subprocess.run([str(runner), str(tmp_path / "k.so"), f"a={tmp_path / 'a.npy'}",
                           "--out", str(tmp_path / "b.npy"), "--repeat", "3", "--number", "2"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("ms per call (2 calls)") == 3
    np.testing.assert_array_equal(np.load(tmp_path / "b.npy"), np.arange(37) * 2.0)
    described = subprocess.run([str(runner), "--describe"], capture_output=True, text=True,
                               timeout=60)
    device = DeviceCPU.parse(described.stdout)
    assert (device.arch, device.emulated_on, device.hostname) == ("x86_64", "", os.uname()[1])
    assert device.cpus >= 1


@pytest.mark.parametrize("text, described", [
    (QEMU_DESCRIPTION, "vm (aarch64 qemu-max, emulated on x86_64 AMD EPYC)"),
    ("machine: aarch64\nhostname: graviton\ncpus: 64\nmidr: 0x413fd0c1\n"
     "cpuinfo: processor\t: 0\ncpuinfo: Features\t: fp asimd cpuid asimddp\n"
     "cpuinfo: CPU implementer\t: 0x41\ncpuinfo: CPU part\t: 0xd0c\n",
     "graviton (aarch64 neoverse-n1)"),
    ("machine: aarch64\nhostname: phone\ncpus: 8\n"
     "cpuinfo: CPU implementer\t: 0x41\ncpuinfo: CPU part\t: 0xd05\n"
     "cpuinfo: CPU implementer\t: 0x41\ncpuinfo: CPU part\t: 0xd05\n"
     "cpuinfo: CPU implementer\t: 0x41\ncpuinfo: CPU part\t: 0xd0b\n",
     "phone (aarch64 cortex-a55+cortex-a76)"),
    ("machine: aarch64\nhostname: dev\ncpus: 4\nmidr: 0x410fd999\n",
     "dev (aarch64 arm part 0xd99)"),
    ("machine: riscv64\nhostname: visionfive\ncpus: 4\nhwcap: 0x112d\n"
     "cpuinfo: isa\t\t: rv64imafdc_zicntr\ncpuinfo: uarch\t\t: sifive,u74-mc\n",
     "visionfive (riscv64 sifive,u74-mc rv64imafdc_zicntr)"),
    ("machine: riscv64\nhostname: vm\ncpus: 2\nhwcap: 0x20112d\n"
     "cpuinfo: vendor_id\t: GenuineIntel\ncpuinfo: model name\t: Xeon\n",
     "vm (riscv64 rv64imafdcv, emulated on x86_64 Xeon)"),
])
def test_device_descriptions(text, described):
    assert DeviceCPU.parse(text).describe() == described


def test_a_description_without_an_architecture_is_refused():
    with pytest.raises(ValueError, match="not a device description"):
        DeviceCPU.parse("ssh: connect to host board port 22: Connection refused\n")
