"""Measuring on a device elsewhere: configs cross-built here, timed there by the native runner."""

from .cpu import DeviceCPU
from .link import DeviceLink
from .runner import DeviceRunner

__all__ = ["DeviceCPU", "DeviceLink", "DeviceRunner"]
