"""What an on-device sampler recorded, in SI units: memory timeline, power, temperatures, energy over a window.

sampler_tool (sampler_tool.c beside this file) writes raw sysfs values, because their units and sign differ per
device. The normalisation heuristics, each overridable in the device config:

- current_now: the kernel ABI says microamperes, but some vendors report milliamperes. `auto`: a median magnitude
  above 20,000 is µA (a phone draws 20 mA to 5 A, i.e. 2e4-5e6 µA, and never 20 A), else mA.
- voltage_now: µV by the ABI (a Li-ion cell is 3.0-4.5 V, i.e. 3e6-4.5e6); some report mV. `auto`: a median above
  100,000 is µV, above 1,000 mV, else V.
- sign: most devices report discharge as positive, many Qualcomm ones as negative. `auto`: the sign that makes the
  median power positive, since the phone discharges while it runs the benchmark on battery. On USB power the
  battery current is net of the charger and says nothing about consumption: the energy is then not reported
  (battery status Charging or Full).
- temperatures: thermal zones report millidegrees C (a value above 1,000), a few tenths or whole degrees; battery
  `temp` is tenths of a degree C by the ABI.

The power is the whole phone's (battery) power, not the measured process's: energy over the cold start includes
the idle floor of the screen, radios and the sampler itself.
"""
from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field

CURRENT_UNITS = {"uA": 1e-6, "mA": 1e-3, "A": 1.0}
VOLTAGE_UNITS = {"uV": 1e-6, "mV": 1e-3, "V": 1.0}
SIGNS = {"discharge_positive": 1.0, "discharge_negative": -1.0}


@dataclass
class Samples:
    """One sampler file, parsed. Times in seconds since the measured process started (the sampler's own start plus
    the offset it recorded); None where a value was unreadable."""

    pid: int
    interval_ms: float
    t: list[float] = field(default_factory=list)
    rss_kb: list[int | None] = field(default_factory=list)
    hwm_kb: list[int | None] = field(default_factory=list)
    pss_kb: list[int | None] = field(default_factory=list)
    current_raw: list[float | None] = field(default_factory=list)
    voltage_raw: list[float | None] = field(default_factory=list)
    temps_raw: dict[str, list[float | None]] = field(default_factory=dict)
    end_reason: str | None = None  # "exited", "max-seconds", or None when the file was cut short

    @property
    def rate_hz(self) -> float:
        if len(self.t) < 2:
            return 0.0
        return (len(self.t) - 1) / (self.t[-1] - self.t[0]) if self.t[-1] > self.t[0] else 0.0


def _num(tok: str) -> float | None:
    return None if tok == "-" else float(tok)


def parse_samples(text: str) -> Samples:
    """Parse sampler_tool's output; a clear error for anything else."""
    lines = text.splitlines()
    head = re.match(r"# sampler_tool 1 pid=(\d+) interval_ms=(\d+)", lines[0]) if lines else None
    late = re.search(r"started_after_s=(-?[\d.]+)", lines[0]) if lines else None
    offset = float(late.group(1)) if late and float(late.group(1)) >= 0 else 0.0  # onto the process's clock
    if not head or len(lines) < 2 or not lines[1].startswith("# columns "):
        raise ValueError(f"not a sampler_tool file (first line {lines[0][:80] if lines else ''!r})")
    columns = lines[1].split()[2:]
    temps = [c.split(":", 1)[1] for c in columns[6:]]
    s = Samples(int(head.group(1)), float(head.group(2)), temps_raw={name: [] for name in temps})
    for line in lines[2:]:
        if line.startswith("# end"):
            m = re.search(r"reason=(\S+)", line)
            s.end_reason = m.group(1) if m else "?"
            continue
        toks = line.split()
        if len(toks) != len(columns):
            continue  # a line cut short by a killed sampler
        s.t.append(float(toks[0]) + offset)
        for name, tok in zip(("rss_kb", "hwm_kb", "pss_kb"), toks[1:4]):
            getattr(s, name).append(None if tok in ("-", "-1") else int(tok))
        s.current_raw.append(_num(toks[4]))
        s.voltage_raw.append(_num(toks[5]))
        for name, tok in zip(temps, toks[6:]):
            s.temps_raw[name].append(_num(tok))
    return s


def current_scale(raw: list[float | None], unit: str = "auto") -> tuple[float, str]:
    """(amperes per raw unit, unit name) for current_now values."""
    if unit != "auto":
        if unit not in CURRENT_UNITS:
            raise ValueError(f"device.current_unit must be auto or one of {sorted(CURRENT_UNITS)}, got {unit!r}")
        return CURRENT_UNITS[unit], unit
    mags = [abs(v) for v in raw if v is not None]
    unit = "uA" if mags and statistics.median(mags) > 20_000 else "mA"
    return CURRENT_UNITS[unit], unit


def voltage_scale(raw: list[float | None], unit: str = "auto") -> tuple[float, str]:
    if unit != "auto":
        if unit not in VOLTAGE_UNITS:
            raise ValueError(f"device.voltage_unit must be auto or one of {sorted(VOLTAGE_UNITS)}, got {unit!r}")
        return VOLTAGE_UNITS[unit], unit
    vals = [v for v in raw if v is not None]
    med = statistics.median(vals) if vals else 0.0
    unit = "uV" if med > 100_000 else "mV" if med > 1_000 else "V"
    return VOLTAGE_UNITS[unit], unit


@dataclass
class Power:
    """Battery power per sample (W, positive = consumption) and how it was derived."""

    t: list[float]
    watts: list[float]
    how: str  # e.g. "current_now in uA, voltage_now in uV, discharge reported negative"


def power_series(s: Samples, current_unit: str = "auto", voltage_unit: str = "auto",
                 sign: str = "auto") -> tuple[Power | None, str | None]:
    """(Power, None), or (None, reason) when the sampler read no current/voltage."""
    pairs = [(t, i, v) for t, i, v in zip(s.t, s.current_raw, s.voltage_raw) if i is not None and v is not None]
    if not pairs:
        return None, "no readable current_now/voltage_now on this device"
    ia, iu = current_scale([p[1] for p in pairs], current_unit)
    va, vu = voltage_scale([p[2] for p in pairs], voltage_unit)
    raw_w = [i * ia * v * va for _, i, v in pairs]
    if sign == "auto":
        factor = 1.0 if statistics.median(raw_w) >= 0 else -1.0
    elif sign in SIGNS:
        factor = SIGNS[sign]
    else:
        raise ValueError(f"device.current_sign must be auto or one of {sorted(SIGNS)}, got {sign!r}")
    how = (f"current_now in {iu}{' (auto)' if current_unit == 'auto' else ''}, voltage_now in {vu}"
           f"{' (auto)' if voltage_unit == 'auto' else ''}, discharge reported "
           f"{'positive' if factor > 0 else 'negative'}{' (auto)' if sign == 'auto' else ''}")
    return Power([p[0] for p in pairs], [w * factor for w in raw_w], how), None


def energy_joules(power: Power, start_s: float, end_s: float, min_coverage: float = 0.5) -> float | None:
    """Trapezoid integral of power over [start_s, end_s] (seconds on the process's clock), interpolated linearly
    between samples and held at the first/last sample outside them; None when the samples cover less than
    `min_coverage` of the window (see coverage)."""
    t, w = power.t, power.watts
    if len(t) < 2 or end_s <= start_s or coverage(power, start_s, end_s) < min_coverage:
        return None
    def at(x):
        if x <= t[0]:
            return w[0]
        if x >= t[-1]:
            return w[-1]
        j = next(k for k in range(1, len(t)) if t[k] >= x)
        f = (x - t[j - 1]) / (t[j] - t[j - 1]) if t[j] > t[j - 1] else 0.0
        return w[j - 1] + f * (w[j] - w[j - 1])
    xs = [start_s] + [x for x in t if start_s < x < end_s] + [end_s]
    return sum((xs[k + 1] - xs[k]) * (at(xs[k]) + at(xs[k + 1])) / 2 for k in range(len(xs) - 1))


def coverage(power: Power, start_s: float, end_s: float) -> float:
    """Fraction of [start_s, end_s] between the first and the last power sample."""
    if not power.t or end_s <= start_s:
        return 0.0
    return max(0.0, min(end_s, power.t[-1]) - max(start_s, power.t[0])) / (end_s - start_s)


def celsius(raw: float | None, battery: bool = False) -> float | None:
    """A thermal reading in degrees C (see the module docstring for the unit heuristics)."""
    if raw is None:
        return None
    if battery:
        return raw / 10.0
    if abs(raw) >= 1000:
        return raw / 1000.0
    return raw / 10.0 if abs(raw) >= 200 else float(raw)
