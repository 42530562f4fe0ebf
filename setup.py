"""Packaging for tensorlang, autotune and topi (one distribution, three packages)."""

import subprocess
import sys

from setuptools import find_packages, setup


def _xgboost_requirement() -> str:
    """The XGBoost distribution the cost model needs. `xgboost`'s Linux wheel is built for CUDA
    (about 240 MB, plus NVIDIA's NCCL, 460 MB more) while `xgboost-cpu` is the same library for
    CPUs only (18 MB), importable under the same name. The two overwrite each other's files, so an
    environment that has `xgboost` already keeps it. The check runs the target interpreter
    without pip's build isolation, which hides the environment's packages from this process;
    it decides when the package is built from source (a built wheel keeps the choice it made).
    xgboost-cpu has wheels for Linux and Windows only: macOS's `xgboost` is CPU-only anyway."""
    if sys.platform == "darwin":
        return "xgboost>=1.7,<4"
    probe = "import importlib.metadata as m; m.distribution('xgboost')"
    # -E: pip isolates the build by PYTHONPATH; without it the real site-packages show
    installed = subprocess.run([sys.executable, "-E", "-c", probe], capture_output=True,
                               check=False).returncode == 0
    return "xgboost>=1.7,<4" if installed else "xgboost-cpu>=2.1.1,<4"


setup(
    name="tensorlang",
    version="0.1.0",
    description="A tensor compiler and auto-tuner: compute/schedule DSL compiled through LLVM",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["tensorlang*", "autotune*", "topi*"]),
    package_data={"tensorlang.runtime": ["*.c", "*.h"]},
    entry_points={
        "console_scripts": ["tensorlang = tensorlang.cli:main"],
        # torch.compile(model, backend="tensorlang") finds the backend with no import of topi
        "torch_dynamo_backends": ["tensorlang = topi.graph.torch_compile:backend"],
    },
    install_requires=[
        "numpy>=1.24,<3",
        "llvmlite>=0.44,<0.60",
        "cffi>=1.15,<3",
        _xgboost_requirement(),
        "tqdm>=4.60",
        "click>=8.1",
        "cloudpickle>=2.2",
    ],
    extras_require={
        "test": ["pytest>=7", "pytest-xdist>=3", "hypothesis>=6.80", "matplotlib>=3.6", "distributed>=2023.1",
                 "onnx>=1.15", "onnxruntime>=1.17", "torch==2.13.0", "transformers>=5.0",
                 "onnxscript>=0.5", "ml_dtypes>=0.3", "gguf>=0.10",
                 # timm's own dependencies: timm is installed with --no-deps, as torchvision
                 # is (pip would otherwise pull a torchvision that replaces the pinned torch)
                 "pyyaml>=5.1", "huggingface_hub>=0.23", "safetensors>=0.4"],
        "distributed": ["distributed>=2023.1"],
        "onnx": ["onnx>=1.15", "onnxruntime>=1.17"],
        "torch": ["torch==2.13.0"],
        "plot": ["matplotlib>=3.6"],
        # bfloat16 numpy arrays: bf16 kernels' inputs, tg.build(precision="bf16")'s weights.
        "bf16": ["ml_dtypes>=0.3"],
        # tg.from_gguf: llama-family models from GGUF files.
        "gguf": ["gguf>=0.10"],
        # benchmarks/: the reference libraries, and which OpenBLAS kernel numpy runs.
        "bench": ["threadpoolctl>=3", "onnx>=1.15", "onnxruntime>=1.17", "torch==2.13.0",
                  # OpenVINO needs only numpy and its telemetry package: it leaves torch alone
                  "openvino>=2024.0",
                  # llama.cpp (built from source at install: minutes)
                  "llama-cpp-python>=0.3"],
    },
)
