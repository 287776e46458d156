"""`rlvr export RUN --to TRACKER` (`rlvr list tracker`, or package.module:attr): replay a run into a tracker.

Every line of RUN/metrics.jsonl (the step as the x axis, each at the time its line was written where the tracker
takes a time: TensorBoard, MLflow, W&B; a line older than rlvr's time/wall gets the export's), the samples of
RUN/samples.jsonl as tables, RUN/config.yaml as hyperparameters; given the root of a main job (`rlvr run`), its
RLVR run plus the held-out tables and the plots.
The run replaces the one an earlier export or the live run left in that tracker (RUN/trackers.json records it).
"""

from __future__ import annotations

import sys
from pathlib import Path


def add_parser(subparsers):
    from rlvr.rundir.trackers import TRACKERS

    p = subparsers.add_parser(
        "export",
        help="replay a run's metrics and samples into an experiment tracker",
        description=__doc__.split("\n\n")[1],
    )
    p.add_argument("run", help="a run directory (rlvr train) or a main job's root folder (rlvr run)")
    p.add_argument(
        "--to", required=True, metavar="TRACKER", help=f"the tracker: {TRACKERS.choices()} (as log.report_to takes)"
    )
    p.add_argument("--project", help="project / experiment (default: the run's log.project)")
    p.add_argument("--run-name", help="the run's name (default: the run's log.run_name, else its folder's name)")
    return p


def run(args) -> int:
    import yaml

    from rlvr.config import ConfigError
    from rlvr.rundir.files import read_jsonl
    from rlvr.rundir.trackers import TRACKERS, Resume, Trackers, check_trackers

    TRACKERS.check(args.to, "--to")  # a name of the registry, or a plug-in that imports: before the run is read

    run_dir, root = Path(args.run), None
    if not (run_dir / "metrics.jsonl").exists() and (run_dir / "rlvr" / "metrics.jsonl").exists():
        root, run_dir = run_dir, run_dir / "rlvr"  # a main job: its RLVR run, then its held-out results
    rows = read_jsonl(run_dir / "metrics.jsonl", skip_torn=True)
    if not rows:
        raise ConfigError(f"{args.run} holds no metrics.jsonl lines to export")
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text()) if (run_dir / "config.yaml").exists() else {}
    log = (cfg or {}).get("log", {})
    project = args.project or log.get("project") or "rlvr"
    name = args.run_name or log.get("run_name") or (root or run_dir).absolute().name
    check_trackers([args.to], run_dir, project)
    samples = read_jsonl(run_dir / "samples.jsonl", skip_torn=True)
    by_step: dict[int, list] = {}
    for s in samples:
        by_step.setdefault(s["step"], []).append(s)
    trackers = Trackers.open([args.to], run_dir, project=project, run_name=name, config=cfg or {}, resume=Resume(0))
    try:
        for row in rows:
            trackers.log_step(row, by_step.get(row["step"]))
        if root is not None and (root / "compare.json").exists():
            from rlvr.training.main_job import final_for_trackers

            trackers.log_final(rows[-1]["step"] + 1, *final_for_trackers(root))
    finally:
        trackers.finish()
    if trackers.failed:
        print(f"rlvr export: {args.to} failed part way (see the warning above)", file=sys.stderr)
        return 1
    print(
        f"exported {len(rows)} steps and {len(samples)} samples of {run_dir} to {args.to} "
        f"(project {project}, run {name})"
    )
    return 0
