"""Devices (see base.py for the contract): one module per device type, harness/devices/<name>.py beside
conf/device/<name>.yaml; importing the package registers every device that has a config."""
from harness.devices.base import DEVICES, Device, DeviceConfig, get_device

DEVICES.load_all("device")

__all__ = ["DEVICES", "Device", "DeviceConfig", "get_device"]
