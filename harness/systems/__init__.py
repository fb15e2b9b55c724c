"""Systems under test (see base.py for the contract): one module per system, harness/systems/<name>.py beside
conf/system/<name>.yaml; importing the package registers every system that has a config."""
from harness.systems.base import SYSTEMS, Measurement, Metric, NotRun, Prepared, System, SystemConfig, get_system

SYSTEMS.load_all("system")

__all__ = ["SYSTEMS", "Measurement", "Metric", "NotRun", "Prepared", "System", "SystemConfig", "get_system"]
