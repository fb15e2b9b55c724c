"""Systems under test (see base.py for the contract). Importing the package registers every implementation."""
from harness.systems.base import SYSTEMS, Measurement, Metric, NotRun, Prepared, System, SystemConfig, get_system
from harness.systems import edgeflow, llamacpp, llmnpu, mnn  # noqa: F401  (register)

__all__ = ["SYSTEMS", "Measurement", "Metric", "NotRun", "Prepared", "System", "SystemConfig", "get_system"]
