"""`python -m experiments`: measure, draw and report the paper's artifacts.

  python -m experiments list
  python -m experiments run fig10 [--models smollm2-135m] [--datasets lambada,mmlu] [--systems llamacpp,edgeflow]
                                  [--bits 4,5] [--flash-mbps 200] [--launcher local_parallel] [--dry-run]
                                  [HYDRA_OVERRIDE ...]
  python -m experiments render fig10 [same selection options]
  python -m experiments report
Rows go to the results store (--results DIR, default results/runs or $EDGEFLOW_RESULTS); figures and the report to
--out DIR (default results/).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hydra.errors import HydraException

from experiments import ARTIFACTS, multirun, report, run
from experiments.base import BenchmarkArtifact
from harness.config import ConfigError
from harness.runner.store import ResultsStore


def _list(text: str) -> tuple[str, ...]:
    return tuple(x for x in text.split(",") if x)


def _bits(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in _list(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--bits takes comma-separated numbers, got {text!r}") from None


def _param(text: str) -> tuple[str, object]:
    """KEY=VALUE for a sweep keyword: a number, true/false, or a comma-separated list (a tuple)."""
    key, sep, value = text.partition("=")
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"--param takes KEY=VALUE, got {text!r}")

    def scalar(v: str):
        if v.lower() in ("true", "false"):
            return v.lower() == "true"
        for kind in (int, float):
            try:
                return kind(v)
            except ValueError:
                pass
        return v
    return key, (tuple(scalar(v) for v in _list(value)) if "," in value else scalar(value))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m experiments", description=__doc__.split("\n")[0])
    p.add_argument("--results", type=Path, default=None, help="results store root (default results/runs)")
    p.add_argument("--out", type=Path, default=run.RESULTS_DIR, help="where figures/ and REPORT.* go")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the artifacts and their sweeps' sizes")
    sub.add_parser("report", help="write REPORT.md and REPORT.html from the store")
    for command in ("run", "render"):
        c = sub.add_parser(command, help=f"{command} one artifact (or 'all')")
        c.add_argument("name", choices=[*ARTIFACTS, "all"])
        c.add_argument("--models", type=_list)
        c.add_argument("--datasets", type=_list)
        c.add_argument("--systems", type=_list)
        c.add_argument("--quantizers", type=_list)
        c.add_argument("--bits", type=_bits)
        c.add_argument("--shared-options", action="store_true",
                       help="the options are shared by several artifacts (as the Makefile passes them): the artifact "
                            "takes those its sweep has and ignores the others, saying so (default for 'all')")
        if command == "run":
            c.add_argument("--device")
            c.add_argument("--flash-mbps", dest="flash_mbps", type=float)
            c.add_argument("--dry-run", action="store_true", help="print the sweep's override lists and stop")
            c.add_argument("--param", dest="params", action="append", type=_param, default=[], metavar="KEY=VALUE",
                           help="any other keyword of the artifact's sweep, e.g. --param eval_limit=20 (repeatable)")
            c.add_argument("--launcher", help="run the sweep through `python -m harness --multirun` with this "
                           "conf/hydra/launcher option (local_parallel, slurm, slurm_gpu)")
            c.add_argument("overrides", nargs="*", help="Hydra overrides added to every point")
    return p


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line. Hydra overrides may also follow the options (`run fig10 --models m experiment.x=1`, as the
    Makefile's EXP_ARGS puts them): argparse fills a positional list only once, so later ones are added here."""
    p = parser()
    args, extra = p.parse_known_args(argv)
    if extra and (not hasattr(args, "overrides") or any(a.startswith("-") for a in extra)):
        p.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra:
        args.overrides = [*args.overrides, *extra]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    store = ResultsStore(args.results) if args.results else ResultsStore()
    if args.command == "list":
        for name, artifact in ARTIFACTS.items():
            size = "benchmark" if isinstance(artifact, BenchmarkArtifact) else f"{len(artifact.sweep())} points"
            print(f"{name:8s} {size:>12s}  {artifact.TITLE}")
        return 0
    if args.command == "report":
        for path in report.write(store, args.out):
            print(path)
        return 0
    params = {k: getattr(args, k) for k in ("models", "datasets", "systems", "quantizers", "bits", "device",
                                            "flash_mbps") if getattr(args, k, None) is not None}
    params.update(dict(getattr(args, "params", None) or []))
    names = list(ARTIFACTS) if args.name == "all" else [args.name]
    for name in names:
        kwargs = run.accepted(name, params) if args.name == "all" or args.shared_options else params
        if set(kwargs) != set(params):
            print(f"[experiments] {name}: takes no {', '.join(sorted(set(params) - set(kwargs)))}; ignored",
                  file=sys.stderr)
        try:
            if args.command == "render":
                section = run.render(name, store, args.out, **kwargs)
            elif args.dry_run:
                pts = [] if isinstance(ARTIFACTS[name], BenchmarkArtifact) else run.points(name, args.overrides,
                                                                                           **kwargs)
                if args.launcher:  # as run.run runs them: the timed points and references here, in order, then
                    first, rest = multirun.split_timed(pts)  # the pool's queue, or the launcher's lines
                    pts = first + (rest if args.launcher == multirun.LOCAL_POOL
                                   else multirun.commands(rest, args.launcher, store.root))
                for line in pts:
                    print(" ".join(line))
                continue
            else:
                section = run.run(name, store, args.out, args.overrides, args.launcher, **kwargs)
        except (run.SweepParameterError, ConfigError, HydraException) as e:  # bad options or configs: no traceback
            print(f"error: {name}: {e}", file=sys.stderr)
            return 2
        print(f"{name}: {section.verdict} — {section.summary}")
        for f in section.figures:
            print(f"  {f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
