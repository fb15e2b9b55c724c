"""Devices (see base.py for the contract). Importing the package registers every implementation."""
from harness.devices.base import DEVICES, Device, DeviceConfig, get_device
from harness.devices import android, local  # noqa: F401  (register)

__all__ = ["DEVICES", "Device", "DeviceConfig", "get_device"]
