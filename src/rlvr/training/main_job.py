"""The main job (`rlvr run`): the whole loop the write-up describes, and its honest question answered.

1. Evaluate the starting model on the held-out split.
2. Train with RLVR (the preset's algorithm) within a time budget, logging validation accuracy.
3. Train the supervised baseline (rejection-sampling fine-tuning) on as many sampled completions as RLVR
   generated, so the two spend the same sampling compute.
4. Evaluate both on the same held-out problems, with the same samples per problem and the same verifier.
5. Compare them against the start per band (paired bootstrap; strict and lenient, the gain split into format and
   answers learned), and write report.md with plots (pass@k against k, the sampler-vs-trainer mismatch), warning in
   its first lines when other processes took much of the CPU while RL trained (rlvr.training.contention).
   With eval.controls (`rlvr run --controls`), RL runs under control rewards first, and RLVR minus each per band.
6. With log.report_to, add the held-out tables, the headline numbers and the plots to the RLVR run in each tracker
   (named after the root folder unless log.run_name says otherwise).

Every phase writes into one root folder; a phase whose output is already complete is not redone, so an
interrupted main job picks up where it stopped (rlvr.training.main_folder: what a rerun keeps, and when it refuses).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from rlvr.config import Config, as_config, dump
from rlvr.rundir.card_update import measure
from rlvr.rundir.files import RunDir, atomic_write_text, check_output_dir
from rlvr.rundir.final import add_heldout
from rlvr.training.main_folder import PhaseClock, cached_eval, check_finished_phases, phase_cfgs, rl_phase_cfg


def _evaluate(name: str, model, cfg: Config, root: Path, quiet: bool):
    """Held-out evaluation of one model into root/eval/<name>, as `cfg` says (an environment task: as episodes)."""
    from rlvr.evaluation.run_eval import config_settings, eval_setup, evaluate_model

    settings = config_settings(cfg, quiet)
    return cached_eval(
        root / "eval" / name,
        name,
        lambda: evaluate_model(model, cfg.task.name, settings, cfg=cfg, task_settings=cfg.task.settings),
        eval_setup(settings, cfg.task.settings, settings.backend),
    )


def _out_of_domain(cfg: Config, root: Path, models: dict, quiet: bool) -> list[tuple[str, dict]]:
    """Every model on every eval.out_of_domain set, compared with the start: [(label, comparison)]."""
    from rlvr.evaluation.compare import compare, write_comparison
    from rlvr.evaluation.out_of_domain import evaluate_set, folder_name, ood_sets, set_setup, trained_problems

    results, trained = [], trained_problems(cfg)
    for spec in ood_sets(cfg):
        folder = folder_name(spec)
        evals = {
            name: cached_eval(
                root / "eval" / folder / name,
                f"{name} on {spec['label']}",
                lambda m=model, s=spec: evaluate_set(m, s, cfg, quiet, trained),
                set_setup(spec, cfg),
            )[0]
            for name, model in models.items()
        }
        result = compare(evals, baseline="start", metric="pass@1", seed=cfg.seed)
        write_comparison(result, root, f"compare-{folder}")
        results.append((spec["label"], result))
    return results


def _start_up(cfg: Config, overwrite: bool) -> tuple[Path, Config, Config, RunDir]:
    """Every check that can fail before any phase runs (registry names, the data, out-of-domain sets, trackers,
    controls, the output folder, the model), `demo: auto` decided, then the root folder with its config.yaml; returns
    (root, the config every phase runs with, the RL phase's config, the root RunDir, whose lock keeps a second job out
    of the folder while this one lives)."""
    from rlvr.evaluation.demo_choice import DEMO_FILE, settled
    from rlvr.evaluation.out_of_domain import check_sets
    from rlvr.policy.load import resolve_model_path
    from rlvr.rundir.trackers import check_trackers
    from rlvr.training.controls import check_controls
    from rlvr.training.lifecycle import check_prompt_format, check_registered
    from rlvr.training.step import load_configured_task
    from rlvr.training.teacher import resolve_teacher

    check_registered(cfg)
    load_configured_task(cfg)  # the data's every refusal (columns, golds, splits) before any model
    check_sets(cfg)
    root = Path(cfg.output_dir)
    rl_cfg = rl_phase_cfg(cfg, root)
    check_trackers(rl_cfg.log.report_to, root / "rlvr", rl_cfg.log.project)  # before any phase
    check_controls(cfg, root, rl_cfg)  # a control that cannot apply stops here, not after the RLVR phase
    resolve_teacher(rl_cfg)  # a distillation teacher that cannot teach this policy, likewise
    resume = (root / "config.yaml").exists() and not overwrite
    check_output_dir(root, resume=resume, overwrite=overwrite)  # an unusable folder first, then the model:
    resolve_model_path(cfg.model.name)  # a hub id the hub cannot give stops here, before any folder exists
    check_prompt_format(cfg)  # a chat format asked of a base model's tokenizer, likewise
    cfg, demo = settled(cfg, root, resume)  # demo "auto": measured on the start model once (read back on a rerun)
    rl_cfg = rl_phase_cfg(cfg, root)
    if resume:
        check_finished_phases(cfg, root, rl_cfg)
    held = RunDir(root, resume=resume, overwrite=overwrite)
    atomic_write_text(root / "config.yaml", dump(cfg.to_dict()))
    if demo is not None:
        atomic_write_text(root / DEMO_FILE, json.dumps(demo, indent=2) + "\n")
    return root, cfg, rl_cfg, held


def _train_phases(cfg: Config, root: Path, rl_cfg: Config, timed: PhaseClock, quiet: bool) -> tuple[Path, Path]:
    """The RLVR and SFT phases in _phase_cfgs' order, each skipped once finished (and reported to the clock as read
    back). Returns (rlvr dir, sft dir)."""
    from rlvr.training.loop import train
    from rlvr.training.sft import sft

    rl_dir, sft_dir = root / "rlvr", root / "sft"
    phases = phase_cfgs(cfg, root, rl_cfg)

    def run_rl() -> None:
        if not (rl_dir / "final" / "merged").exists():
            resume = (rl_dir / "checkpoints").exists()
            # report=False: the main job's report.md shows this run beside its held-out results
            timed("train rlvr", train, phases["rlvr"], resume=resume, overwrite=not resume, quiet=quiet, report=False)
        else:
            timed.read_back("train rlvr")

    def run_sft() -> None:
        if not (sft_dir / "final" / "merged").exists():
            timed("train sft", sft, phases["sft"], quiet=quiet, overwrite=True)
        else:
            timed.read_back("train sft")

    for run_phase in (run_sft, run_rl) if cfg.train.init_from_sft else (run_rl, run_sft):
        run_phase()
    return rl_dir, sft_dir


def run_main(cfg: Config | dict, *, overwrite: bool = False, quiet: bool = False) -> dict:
    """Run every phase; returns {"root", "report", "compare", "wall_s", ...} for the summary printout. A dict (the
    Python API) is checked as the command line checks a file (rlvr.config.as_config)."""
    from rlvr.evaluation.compare import compare, compare_markdown, head_to_head, write_comparison
    from rlvr.evaluation.summary import summary_markdown
    from rlvr.training.controls import run_controls
    from rlvr.training.loop import train

    t0, cfg = time.perf_counter(), as_config(cfg)
    root, cfg, rl_cfg, _held = _start_up(cfg, overwrite)
    timed = PhaseClock()
    start_eval = timed("eval start", _evaluate, "start", cfg.model.name, cfg, root, quiet)
    rl_dir, sft_dir = _train_phases(cfg, root, rl_cfg, timed, quiet)
    evals = {"start": start_eval[0]}
    summaries = {"start": start_eval[1]}
    for name, run in (("sft", sft_dir), ("rlvr", rl_dir)):
        evals[name], summaries[name] = timed(f"eval {name}", _evaluate, name, str(run), cfg, root, quiet)
        # the model card gets its held-out table, with what it measured (an rlvr eval that measures less keeps it)
        add_heldout(run / "final", summary_markdown(summaries[name]), measure(summaries[name], root / "eval" / name))
    teacher_kl = _teacher_phase(
        cfg, root, {"start": cfg.model.name, "rlvr": str(rl_dir)}, evals, summaries, timed, quiet
    )
    result = compare(evals, baseline="start", metric="pass@1", seed=cfg.seed)
    paths = write_comparison(result, root, "compare")
    # the question the supervised baseline is there for: does RL beat it on problems neither trained on?
    against_sft = head_to_head(evals, "rlvr", "sft", seed=cfg.seed)
    atomic_write_text(root / "compare-sft.json", json.dumps(against_sft, indent=2) + "\n")
    controls = run_controls(
        cfg, root, rl_cfg, evals["rlvr"], train=train, evaluate=_evaluate, timed=timed, quiet=quiet
    )  # eval.controls: the same RL (from the start model) under rewards without the answer, or without tools
    ood = timed(
        "eval out of domain",
        _out_of_domain,
        cfg,
        root,
        {"start": cfg.model.name, "sft": str(sft_dir), "rlvr": str(rl_dir)},
        quiet,
    )
    wall = time.perf_counter() - t0
    wall_line = timed.line(wall)
    report = _write_report(root, cfg, result, summaries, evals, wall_line, ood, controls, against_sft, teacher_kl)
    report_to_trackers(rl_cfg, root)
    return {
        "root": root,
        "report": report,
        "compare_md": compare_markdown(result),
        "compare": result,
        "against_sft": against_sft,
        "plots": sorted((root / "plots").glob("*.png")) + [paths["png"]],
        "wall_s": wall,
        "wall_line": wall_line,
        "timings": timed.spent,
    }


def _teacher_phase(cfg: Config, root: Path, models: dict, evals: dict, summaries: dict, timed, quiet: bool) -> str:
    """With a distillation teacher: the teacher itself evaluated as a fourth model (its pass@1 is the ceiling the
    students aim at; a served one is not evaluated here), and each model's held-out reverse KL to it
    (rlvr.training.teacher_eval) as the report's section; "" without a teacher."""
    from transformers import AutoTokenizer

    from rlvr.policy.load import resolve_model_path
    from rlvr.prompts.stream import spread_over_bands
    from rlvr.tasks import load_task
    from rlvr.training.teacher import resolve_teacher
    from rlvr.training.teacher_eval import heldout_reverse_kl, kl_markdown, whole_teacher

    spec = resolve_teacher(rl_phase_cfg(cfg, root))
    if spec is None:
        return ""
    if spec.form != "server":
        evals["teacher"], summaries["teacher"] = timed(
            "eval teacher", _evaluate, "teacher", spec.label, cfg, root, quiet
        )
    problems = spread_over_bands(load_task(cfg.task.name, **cfg.task.settings).problems(cfg.eval.split), cfg.eval.limit)
    figures, teacher = {}, None
    for name, ref in models.items():
        path = root / "eval" / name / "teacher_kl.json"  # a rerun reads the figure back
        if path.exists():
            figures[name] = json.loads(path.read_text())
            continue
        teacher = teacher or whole_teacher(spec, cfg, AutoTokenizer.from_pretrained(resolve_model_path(cfg.model.name)))
        figures[name] = timed(f"teacher KL {name}", heldout_reverse_kl, ref, teacher, cfg, problems)
        atomic_write_text(path, json.dumps(figures[name], indent=2) + "\n")
    return kl_markdown(figures, spec.label)


def _report_plots(root: Path, rows: list[dict], summaries: dict) -> dict:
    """The report's plots by title: the RLVR run's training curves, held-out per band, coverage where there are several
    k, then the rest of the run's own (rlvr.training.run_report.training_plots: mismatch, episodes, bands)."""
    from rlvr.evaluation import report
    from rlvr.training.run_report import training_plots

    own = list(training_plots(rows, root / "plots").items())
    plots = {**dict(own[:1]), "Held-out pass@1 per band (95% CI)": root / "compare.png"}
    coverage = report.pass_at_k_plot(summaries, root / "plots" / "pass_at_k.png")
    if coverage is not None:
        plots["Held-out pass@k against k (coverage)"] = coverage
    return {**plots, **dict(own[1:])}


def _write_report(root, c: Config, result, summaries, evals, wall_line, ood, controls, against_sft, teacher_kl) -> Path:
    from rlvr.evaluation import report
    from rlvr.evaluation.compare import compare_markdown
    from rlvr.evaluation.summary import summary_markdown
    from rlvr.tasks import load_task
    from rlvr.training.run_report import config_meta, load_line, read_load, run_warnings
    from rlvr.training.settings_report import chosen_section

    rows = report.read_metrics(root / "rlvr")
    plots = _report_plots(root, rows, summaries)
    task = load_task(c.task.name, **c.task.settings)
    prompts = {p.id: p.prompt for p in task.problems(c.eval.split)}
    pairs = report.example_pairs(evals["start"], evals["rlvr"], k=10)
    meta = {
        **config_meta(c),  # model, task, algorithm, seed, rollout: as the RLVR run's own report says them
        "budget": f"{c.train.steps} steps max, {c.train.time_budget_min:g} min of RL training; "
        + (
            "SFT first on reference traces, RL from it"
            if c.train.init_from_sft
            else "SFT matched on sampled completions"
        ),
        "steps trained": len(rows),
        "evaluation": f"{c.eval.split} split, {c.eval.n} samples per problem at temperature {c.rollout.temperature}"
        f" + greedy, {c.eval.limit or 'all'} problems",
        "RL training load": load_line(read_load(root / "rlvr")),
        "wall time": wall_line,
        "versions": ", ".join(f"{k} {v}" for k, v in report.versions().items()),
    }
    return report.write_report(
        root,
        meta=meta,
        compare_md=compare_markdown(result),
        warnings=run_warnings(root / "rlvr", rows, c.log.quiet_steps_per_min),  # the RLVR run's own report's
        summaries_md={name: summary_markdown(s) for name, s in summaries.items()},
        plots=plots,
        examples_md=report.examples_markdown(pairs, prompts),
        reading=reading(result),
        out_of_domain_md=_ood_markdown(ood),
        sections={
            **chosen_section(root, c),
            **_sft_section(against_sft),
            **({"Distillation: reverse KL to the teacher": teacher_kl} if teacher_kl else {}),
            **_controls_section(root, rows, controls),
        },
    )


def _sft_section(against_sft) -> dict[str, str]:
    """The report's "RLVR against the SFT baseline" section: the paired difference per band, sampled and greedy."""
    from rlvr.evaluation.compare import head_to_head_markdown

    sentence = reading(against_sft[0], closing="")
    return {
        "RLVR against the SFT baseline": head_to_head_markdown(against_sft)
        + f"\n**Reading ({against_sft[0]['metric']}).** {sentence}\n"
    }


def _controls_section(root: Path, rows: list[dict], controls: dict | None) -> dict[str, str]:
    """The report's "Controls" section: RLVR minus each control per band, and the training curves side by side."""
    from rlvr.evaluation.report import curves_plot, read_metrics
    from rlvr.training.controls import control_name, controls_markdown

    if not controls:
        return {}
    runs = {"rlvr": rows, **{control_name(k): read_metrics(root / control_name(k)) for k in controls}}
    plot = curves_plot(runs, root / "plots" / "controls.png")
    return {"Controls": controls_markdown(controls, str(plot.relative_to(root)))}


def _ood_markdown(ood) -> str:
    """The out-of-domain section: each set's table and a plain sentence on whether any model got worse."""
    from rlvr.evaluation.compare import compare_markdown
    from rlvr.evaluation.out_of_domain import worse_sentence

    if not ood:
        return ""
    parts = ["Each set graded by its own task's grader; the models never trained on it.", ""]
    for label, result in ood:
        parts += [f"### {label}", "", compare_markdown(result), "", worse_sentence(label, result), ""]
    return "\n".join(parts)


def final_for_trackers(root: Path) -> tuple[dict, dict, dict]:
    """(tables, images, scalars) of a finished main job, read back from its folder: the held-out summaries per
    model and band, the paired comparison, the overall accuracies, and the report's plots."""
    from rlvr.evaluation.report import heldout_scalars, heldout_tables

    result = json.loads((root / "compare.json").read_text())
    summaries = {
        m: json.loads((root / "eval" / m / "summary.json").read_text())
        for m in result["models"]
        if (root / "eval" / m / "summary.json").exists()
    }
    images = {
        f"plots/{p.stem}": p for p in [*sorted((root / "plots").glob("*.png")), root / "compare.png"] if p.exists()
    }
    return heldout_tables(summaries, result), images, heldout_scalars(result)


def report_to_trackers(rl_cfg: Config, root: Path) -> None:
    """The end of the main job in each tracker of log.report_to: the RLVR run reopened, the held-out results and
    plots added one step past its last (a tracker that fails warns; the report is already written)."""
    from rlvr.evaluation.report import read_metrics
    from rlvr.rundir.trackers import Trackers

    log, rl_dir = rl_cfg.log, Path(rl_cfg.output_dir)
    rows = read_metrics(rl_dir)
    if not log.report_to or not rows:
        return
    trackers = Trackers.reopen(log.report_to, rl_dir, project=log.project, run_name=log.run_name)
    try:
        trackers.log_final(rows[-1]["step"] + 1, *final_for_trackers(root))
    finally:
        trackers.finish()


HELD_OUT_NOTE = " The training reward is not the result: these are held-out problems none of the models trained on."


def reading(result: dict, closing: str = HELD_OUT_NOTE) -> str:
    """A plain sentence per model: where it beats the baseline outside the noise, where it is worse, where neither."""
    out = []
    for model, per_band in result["diffs"].items():
        bands = {
            v: [b for b, d in per_band.items() if d["verdict"] == v] for v in ("better", "worse", "inside the noise")
        }
        clauses = [
            f"better outside the 95% noise on {', '.join(bands['better'])}"
            if bands["better"]
            else "no band better outside the noise"
        ]
        if bands["worse"]:
            clauses.append(f"worse on {', '.join(bands['worse'])}")
        if bands["inside the noise"]:
            clauses.append(f"inside the noise on {', '.join(bands['inside the noise'])}")
        out.append(f"{model} vs {result['baseline']}: " + "; ".join(clauses) + ".")
    return " ".join(out) + closing
