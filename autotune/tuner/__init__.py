"""Tuners: which configs to measure next. All share the loop in `Tuner.tune`."""

from .base import Tuner
from .evolutionary import EvolutionaryTuner
from .ga import GATuner
from .simple import GridSearchTuner, RandomTuner
from .xgb import XGBTuner

__all__ = ["EvolutionaryTuner", "GATuner", "GridSearchTuner", "RandomTuner", "Tuner", "XGBTuner"]
