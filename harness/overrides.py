"""Command-line overrides checked (and, for sweeps over a config group, adjusted) before Hydra composes anything.

Why: in a --multirun, Hydra composes a "master" config with the sweep overrides left out, then one config per point.
`--multirun quantizer=rtn_clip,edgeflow quantizer.budget_bits=6` therefore fails before any work: in the master config
the group `quantizer` is still its default (null), so the plain key override `quantizer.budget_bits=6` has nowhere
to go ("Key 'quantizer' is not in struct"). A single-valued sweep, `quantizer.budget_bits=choice(6)`, is applied per
point only, which is what the user meant; `prepare` rewrites such keys to that form.

It also checks every `group.key=...` against each option the group is set or swept to (conf/<group>/<option>.yaml),
so a key that only some quantizers have fails at once, naming the option that lacks it, instead of after the first
points ran (or, for the FP default, with Hydra's "not in struct").
"""
from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from harness import registry
from harness.config import ConfigError

_ABSENT = object()


def prepare(args: list[str], conf_dir: Path | None = None) -> list[str]:
    """`args` (sys.argv[1:]) with every key of a swept group made a per-point sweep; ConfigError on a key that some
    option of its group does not have. Arguments this does not understand are left to Hydra."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    multirun = any(a in ("-m", "--multirun") for a in args)
    parser = OverridesParser.create()
    parsed = []
    for a in args:
        try:
            parsed.append(None if a.startswith("-") else parser.parse_override(a))
        except Exception:  # Hydra reports its own syntax errors
            parsed.append(None)
    conf_dir = conf_dir or registry.CONF_DIR
    groups = {p.name for p in conf_dir.iterdir() if p.is_dir() and p.name != "hydra"}
    chosen: dict[str, list[str]] = {}  # group -> the options it is set or swept to on this command line
    swept: set[str] = set()
    for o in parsed:
        if o is None or o.is_hydra_override() or o.key_or_group not in groups or o.is_delete():
            continue
        options = _options(o)
        if options is None:  # glob() and other sweeps Hydra expands itself: not checked here
            continue
        chosen[o.key_or_group] = options
        if o.is_sweep_override():
            swept.add(o.key_or_group)
    null_defaults = _null_default_groups(conf_dir)
    out = []
    for a, o in zip(args, parsed):
        group, _, key = (o.key_or_group.partition(".") if o is not None else ("", "", ""))
        if not key or o.is_hydra_override() or group not in groups or o.is_add() or o.is_force_add() or o.is_delete():
            out.append(a)
            continue
        options = chosen.get(group)
        if options is None and group in null_defaults:
            available = sorted(p.stem for p in (conf_dir / group).glob("*.yaml"))
            raise ConfigError(f"{o.key_or_group}: no {group} is selected (the default is none); add {group}=<option> "
                              f"(one of {', '.join(available)}) before setting its keys")
        if options:
            _check_key(group, key, options, conf_dir, a.partition("=")[2])
        if multirun and group in swept and not o.is_sweep_override() and a.partition("=")[2]:
            a = f"{o.key_or_group}=choice({a.partition('=')[2]})"
        out.append(a)
    return out


def _options(o) -> list[str] | None:
    if not o.is_sweep_override():
        value = o.value()
        return [str(value)] if value is not None else []
    try:
        return [str(v) for v in o.sweep_string_iterator()]
    except Exception:
        return None


def _null_default_groups(conf_dir: Path) -> set[str]:
    root = OmegaConf.load(conf_dir / "config.yaml")
    out = set()
    for entry in root.get("defaults", []):
        if hasattr(entry, "items"):  # `- group: option`; a plain `- _self_` is a string
            out |= {k for k, v in entry.items() if v is None}
    return out


def _check_key(group: str, key: str, options: list[str], conf_dir: Path, value: str = "...") -> None:
    """Every option of `group` on the command line must have `key` (a dotted path inside its YAML); `value` as
    given, for the message."""
    have, lack = [], []
    for option in options:
        path = conf_dir / group / f"{option}.yaml"
        if not path.is_file():
            continue  # an unknown option: Hydra names it and lists the available ones
        node = OmegaConf.load(path)
        (have if OmegaConf.select(node, key, default=_ABSENT) is not _ABSENT else lack).append(option)
    if not lack:
        return
    files = ", ".join(f"conf/{group}/{x}.yaml" for x in lack)
    if all(key in _defaulted_keys(group, conf_dir / group / f"{x}.yaml") for x in lack):
        raise ConfigError(f"{group}.{key}: {files} leave(s) {key!r} at its default; set it with "
                          f"'+{group}.{key}={value}' (Hydra overrides only the keys a YAML spells out)")
    which = "none of the options on this command line" if not have else ", ".join(have)
    raise ConfigError(f"{group}.{key}: {group} {', '.join(repr(x) for x in lack)} ({files}) has no key {key!r}; it "
                      f"is a key of {which}. Sweep the {group} options that have it in a separate command.")


def _defaulted_keys(group: str, path: Path) -> set[str]:
    """Keys an option of `group` accepts beyond its YAML: its schema's fields (harness/runner/schemas.py)."""
    from dataclasses import fields

    from harness.runner.schemas import schema_of

    schema = schema_of(group, OmegaConf.load(path))
    return {f.name for f in fields(schema)} if schema is not None else set()
