"""Which systems the paper's figures draw, in which order, under which names and colours: read from each system's
own declarations (harness/systems/base.py, `System`: display, short, color, own_quantizer, stand_in, paper_series,
startup_metric, ttft_phases), never from a list in a figure. A new engine reaches Figures 1, 2, 10, 15 and 16 through
its module and its YAML alone (tests/test_architecture.py draws them for a toy engine).

The paper's own system is the one that sweeps bit budgets with its own quantizer (EdgeFlow: `own_quantizer`); the
others are its peers, each at the weight format it brings. Everything here is read at call time, so a system
registered after the figures were imported is drawn as well.
"""
from __future__ import annotations

import pandas as pd


def _classes() -> dict:
    """Every system of conf/system/*.yaml: {name: its class}, peers by name, the proposed system last."""
    from harness.systems.base import registered

    return registered()


def system_class(system: str):
    from harness.systems import SYSTEMS

    return SYSTEMS.get(system) if system in SYSTEMS else None


def systems() -> tuple[str, ...]:
    """Every system the figures draw: the peers (by name), then the proposed system."""
    return tuple(_classes())


def proposed() -> str:
    """The paper's system: the one that sweeps budgets with its own quantizer (exactly one)."""
    own = [name for name, cls in _classes().items() if cls.own_quantizer is not None]
    if len(own) != 1:
        raise ValueError(f"exactly one system must set own_quantizer (the paper's proposed system); got {own}")
    return own[0]


def peers() -> tuple[str, ...]:
    return tuple(s for s in systems() if s != proposed())


def check(chosen, where: str) -> None:
    """A ValueError naming the systems of `chosen` no module declares."""
    unknown = sorted(set(chosen) - set(systems()))
    if unknown:
        raise ValueError(f"{where}: unknown system(s) {unknown}; allowed: {list(systems())}")


def budgets(system: str, bits) -> tuple:
    """The bit budgets a system is swept at: `bits` for one with its own quantizer, else (None,) (its own format)."""
    return tuple(bits) if system_class(system).own_quantizer is not None else (None,)


def budget_overrides(system: str, bits) -> list[str]:
    return system_class(system).budget_overrides(bits)


def label(system: str, short: bool = False) -> str:
    """A system's name in tables and figures (`short`: in dense labels, the paper's "EF"); an unknown name stands
    for itself."""
    cls = system_class(system) if isinstance(system, str) else None
    if cls is None:
        return system
    return (short and cls.short) or cls.display or system


def labels(short: bool = False) -> dict[str, str]:
    """{name: label} of every system."""
    return {name: label(name, short) for name in systems()}


def color(system: str, default: str = "#bcbd22") -> str:
    cls = system_class(system) if isinstance(system, str) else None
    return (cls.color if cls is not None else "") or default


def series_name(system: str, bits, short: bool = False) -> str:
    """A system's series: its label, with the budget for the proposed system ("EF 5b")."""
    name = label(system, short)
    swept = system_class(system) is not None and system_class(system).own_quantizer is not None
    return f"{name} {bits:g}b" if swept and bits is not None and not pd.isna(bits) else name


def stand_in(system: str) -> str | None:
    cls = system_class(system)
    return cls.stand_in if cls is not None else None


def startup_metric(system: str) -> str | None:
    cls = system_class(system)
    return cls.startup_metric if cls is not None else None


def playing(paper_series: str) -> str | None:
    """The system whose numbers are compared with the paper's series `paper_series` (e.g. llm.npu+'s), or None."""
    return next((name for name, cls in _classes().items() if cls.paper_series == paper_series), None)


def _column(df: pd.DataFrame, name: str) -> pd.Series:
    return df[name] if name in df.columns else pd.Series(None, index=df.index, dtype=object)


def own_rows(df: pd.DataFrame) -> pd.Series:
    """Per row: a system's own artifact. The proposed system's rows count only with its own quantizer, packing
    and pipeline (other quantizers, packings and pipelines are other artifacts' ablations); a peer's always."""
    keep = pd.Series(True, index=df.index)
    for name, cls in _classes().items():
        if cls.own_quantizer is None:
            continue
        foreign = pd.Series(False, index=df.index)  # another quantizer, packing or pipeline than its own
        for col, own in (("quantizer", cls.own_quantizer), ("packing", cls.own_packing),
                         ("pipeline", cls.own_pipeline)):
            if own is not None:
                foreign |= ~(_column(df, col).isna() | (_column(df, col) == own))
        keep &= ~((_column(df, "system") == name) & foreign)
    return keep


def is_proposed(df: pd.DataFrame) -> pd.Series:
    """Per row: a number of the proposed system's (its system, or its quantizer's artifact scored without one)."""
    name = proposed()
    system, quantizer = _column(df, "system"), _column(df, "quantizer")
    return (system == name) | (system.isna() & (quantizer == system_class(name).own_quantizer))
