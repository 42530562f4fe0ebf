"""autotune: tunable schedule templates, measurement, cost models, tuners and logs.

Data flow: a template (a function of shapes reading `get_config()`) -> `create_task` -> its
`ConfigSpace` -> a tuner proposes configs -> a `Builder` compiles each into an `Artifact` and a
`Runner` times it (`LocalBuilder` / `LocalRunner` in isolated processes here, `DaskBuilder` /
`DaskRunner` on a farm, `DeviceRunner` on a device of another architecture) -> `MeasureResult`
-> a JSON line in the log and back into the cost model -> `apply_history_best` deploys the best
config.
"""

from . import auto_schedule, tuner
from .auto_schedule import workload
from .artifact import Artifact, before_run
from .cost_model import CostModel, RandomModel, XGBoostCostModel
from .device import DeviceRunner
from .explorer import SimulatedAnnealing, diverse_pick
from .farm import DaskBuilder, DaskRunner
from .features import FEATURE_VERSION, FeatureExtractor, feature_names
from .measure import Builder, LocalBuilder, LocalRunner, MeasureOption, Runner, measure_option
from .record import (
    ApplyHistoryBest,
    Record,
    apply_history_best,
    best_records,
    load_records,
    log_to_file,
)
from .result import MeasureErrorNo, MeasureInput, MeasureResult
from .space import (
    ConfigEntity,
    ConfigSpace,
    FallbackConfig,
    InstantiationError,
)
from .buckets import create_task
from .task import Task, current_target, get_config, query_config, template
from .tuning import Result, TuningError, remeasure, tune

__all__ = [
    "FEATURE_VERSION",
    "ApplyHistoryBest",
    "Artifact",
    "Builder",
    "ConfigEntity",
    "ConfigSpace",
    "CostModel",
    "DaskBuilder",
    "DaskRunner",
    "DeviceRunner",
    "FallbackConfig",
    "FeatureExtractor",
    "InstantiationError",
    "LocalBuilder",
    "LocalRunner",
    "MeasureErrorNo",
    "MeasureInput",
    "MeasureOption",
    "MeasureResult",
    "RandomModel",
    "Record",
    "Result",
    "Runner",
    "SimulatedAnnealing",
    "Task",
    "TuningError",
    "XGBoostCostModel",
    "apply_history_best",
    "auto_schedule",
    "before_run",
    "best_records",
    "create_task",
    "current_target",
    "diverse_pick",
    "feature_names",
    "get_config",
    "load_records",
    "log_to_file",
    "measure_option",
    "query_config",
    "remeasure",
    "template",
    "tune",
    "tuner",
    "workload",
]
