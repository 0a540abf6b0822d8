"""Judge discrimination without human labels: every LLM judge also judges answers whose verdict is known.

For a few instances per benchmark entry (`judge_probes: N` in the experiment; 0 = off, the default, so
no existing config sends a request more) perseval writes answers itself and has each LLM judge judge
them, item by item, exactly as it judges an agent's output:
  gold        the hidden items stated outright: an IBA / custom answer that says every checkpoint's
              statement, a Bespoke response made of the gold claims. Every item should pass.
  empty       an empty answer. Every item should fail.
  wrong-user  IBA / custom: the checkpoint statements of another instance of the same scenario, on the
              items whose gold value differs (a wrong-user answer); Bespoke: the gold claims of another
              query. These items should fail.
Each benchmark writes these answers itself (Benchmark.probe_answers, from its known items by default).
PrefEval's generation checks get their own answers (perseval.benchmarks.prefeval.probes: one that honours
the preference, one that breaks it, one naming another user's preference, a refusal, an empty one), each
check labelled with the verdict it should get. A rubric with no right answer (Bespoke's E_p criteria,
APeB's rubric grades) is not probed. The report per judge: the pass rate on each kind, and the AUC of
the judge's P(true) (its 0/1 verdicts where the server gave no probabilities) for items whose right
verdict is true (1) against false (0), with DeLong's 95% interval, probe items as the unit
(perseval.metrics.auc). A judge is flagged "judge does not discriminate: scores not interpretable" when
its AUC is undefined or below DISCRIMINATION_AUC, when the interval reaches down to CHANCE_AUC, or when
it passes at least PASSES_EVERYTHING of the known-bad items; its cells are then not interpretable: the run
record (perseval.report.build) withholds their numbers and every view shows `—` with the AUC.

A judge with `threshold: calibrated` has its threshold chosen here: the P(true) cut that maximizes Youden's J
on all probe items whose verdict was read from P(true) (ties to the higher cut; rule verdicts, such as an empty
response's absent claims, are left out: no threshold decides them), which its cells are scored at (perseval.pipeline.stages.as_scored);
its pass rates are cross-fitted by probe instance (each instance's items read at the cut fitted on the other
instances'), so that "passes everything" is not measured on the items that chose the cut.

A probe's key hashes the data key, the judge binding (kinds, params, repeats, model identity and
sampling, how verdicts are read), N and the seed, so it is judged once and its judgments are cached like any other.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from perseval.experiment.components import make_judges
from perseval.llm.settings import ModelConfig
from perseval.experiment.load import judge_specs
from perseval.pipeline.plan import probe_key
from perseval.pipeline.units import DataUnit, Plan
from perseval.pipeline.stages import PROBE
from perseval.core.instances import AgentOutput, Instance, Judgment
from perseval.experiment.specs import JudgeSpec
from perseval.core.store import StageStore, unit_lock
from perseval.benchmarks.probes import EMPTY, GOOD, WRONG, Labels
from perseval.kernel.registry import benchmark_class
from perseval.judges.base import at_threshold
from perseval.metrics.auc import auc_interval, youden_threshold

PROBE_VERSION = PROBE.version
DISCRIMINATION_AUC = 0.7
CHANCE_AUC = 0.5  # the AUC interval must lie above it too: a high AUC on a handful of items is no evidence
PASSES_EVERYTHING = 0.9


@dataclass
class ProbeUnit:
    key: str
    data: DataUnit
    judge: JudgeSpec
    model: ModelConfig
    n: int
    seed: int


def probe_units(plan: Plan) -> list[ProbeUnit]:
    """One unit per (benchmark entry, LLM judge that judges items with known verdicts); none when off."""
    e = plan.exp.experiment
    n = getattr(e, "judge_probes", 0)
    if not n:
        return []
    out = []
    for bi, data in enumerate(plan.data):
        for spec in judge_specs(plan.exp, bi):
            if spec.probed_on(data.entry.name) and spec.model:
                out.append(ProbeUnit(probe_key(data, spec, n, e.seed), data, spec, spec.model, n, e.seed))
    return out


def _covered(benchmark: str) -> str:
    items = benchmark_class(benchmark).probed_items
    return f"probes cover its {' and '.join(items)} items" if items else f"{benchmark} writes no probe answers"


def unprobed(plan: Plan) -> list[str]:
    """With `judge_probes` set, one line per benchmark entry whose LLM judges have no kind with items of known
    verdict (Benchmark.probed_items), so no probe runs and no AUC line comes for it; empty when probes are off."""
    if not getattr(plan.exp.experiment, "judge_probes", 0):
        return []
    probed = {u.data.key for u in probe_units(plan)}
    out = []
    for bi, data in enumerate(plan.data):
        llm = [s for s in judge_specs(plan.exp, bi) if s.uses_llm]
        if llm and data.key not in probed:
            kinds = sorted({k for s in llm for k in s.kinds})
            out.append(f"judge_probes: {data.name} is not probed: its judge kinds {', '.join(kinds)} have no items "
                       f"of known verdict ({_covered(data.entry.name)}), so no AUC is reported "
                       "for its judges")
    return out


# --- the known answers -------------------------------------------------------------------------------------

def probe_answers(instances: list[Instance], n: int, seed: int) -> tuple[list[AgentOutput], Labels]:
    """The probe outputs of n seeded instances and (agent, instance, item) -> the right verdict (1 / 0): what
    the instances' benchmark writes (Benchmark.probe_answers; perseval.benchmarks.probes by default)."""
    if not instances:
        return [], {}
    return benchmark_class(instances[0].benchmark).probe_answers(instances, n, seed)


# --- judging them, and the report --------------------------------------------------------------------------

async def judge_probes(spec: JudgeSpec, client: Any, instances: list[Instance], n: int, seed: int) -> list[Judgment]:
    from perseval.pipeline.runner import judge_shard

    probed = benchmark_class(instances[0].benchmark).probed_items if instances else ()
    judges = [j for j in make_judges(spec) if j.item in probed]
    outputs, _ = probe_answers(instances, n, seed)
    by_id = {i.instance_id: i for i in instances}
    bindings = spec.bindings(client)
    return await judge_shard(judges, bindings, by_id, outputs)


Item = tuple[str, str, str]  # (probe agent, instance, item)


def _item_scores(judgments: list[Judgment], labels: dict[Item, int]) -> tuple[dict[Item, tuple[int, float]], str]:
    """(label, value) per probe item, its judge repeats averaged: P(true) where every verdict the judge model
    gave carries one, else the 0/1 verdict; and which of the two it is. A verdict given without asking the
    model (an empty response's claims are absent by rule: `method` empty) counts as its 0/1 score."""
    scored = [j for j in judgments if (j.agent, j.instance_id, j.item_id) in labels and j.status == "scored"
              and j.score is not None]
    asked = [j for j in scored if j.method]
    from_p = bool(asked) and all(j.p_true is not None for j in asked)
    values: dict[Item, list[float]] = {}
    for j in scored:
        value = j.p_true if from_p and j.p_true is not None else j.score
        values.setdefault((j.agent, j.instance_id, j.item_id), []).append(float(value))
    return {k: (labels[k], sum(v) / len(v)) for k, v in values.items()}, "p_true" if from_p else "verdict"


def _threshold(items: dict[Item, tuple[int, float]]) -> float | None:
    return youden_threshold([y for y, _ in items.values()], [v for _, v in items.values()])


def read_from_p(judgments: list[Judgment], items: dict[Item, tuple[int, float]]) -> dict[Item, tuple[int, float]]:
    """The items whose verdicts a threshold decides (read from P(true)): a verdict given by rule (an empty
    response's claims are absent) is 0 at any threshold, so it would only lower the cut chosen."""
    read = {(j.agent, j.instance_id, j.item_id) for j in judgments if j.method == "logprobs" and j.p_true is not None}
    return {k: v for k, v in items.items() if k in read}


def cross_fitted(judgments: list[Judgment], items: dict[Item, tuple[int, float]]) -> list[Judgment]:
    """`judgments` with each probe instance's verdicts read at the threshold fitted on the other instances'
    items (at_threshold; unscored where those others choose none), so pass rates at a calibrated threshold
    are not measured on the items that chose it."""
    out = []
    for iid in dict.fromkeys(j.instance_id for j in judgments):
        others = _threshold({k: v for k, v in items.items() if k[1] != iid})
        out += at_threshold([j for j in judgments if j.instance_id == iid], others,
                            "no threshold could be fitted on the other probe instances")
    return out


def probe_report(judgments: list[Judgment], labels: dict[Item, int], calibrated: bool = False) -> dict[str, Any]:
    """Pass rate per probe kind, the AUC of good against bad with DeLong's interval (probe items as the unit;
    from P(true) where the judge's verdicts carry it), and whether the judge discriminates. `calibrated`: also
    the threshold chosen on all items (Youden's J of P(true); what the judge's cells are scored at), and the
    pass rates cross-fitted by probe instance (cross_fitted), which decide whether it passes everything."""
    items, source = _item_scores(judgments, labels)
    report: dict[str, Any] = {"n_items": len(items)}
    counted = judgments
    if calibrated:
        fitted = read_from_p(judgments, items) if source == "p_true" else {}
        report["threshold"] = _threshold(fitted)
        report["threshold_items"] = len(fitted)
        report["pass_rates"] = "cross-fitted by probe instance"
        report["calibrated"] = True
        counted = cross_fitted(judgments, fitted)
    for kind in dict.fromkeys((GOOD, EMPTY, WRONG, *(agent.split(":", 1)[1] for agent, _, _ in labels))):
        got = [float(j.score) for j in counted if j.agent == f"probe:{kind}" and j.status == "scored"
               and (j.agent, j.instance_id, j.item_id) in labels and j.score is not None]
        if kind in (GOOD, EMPTY, WRONG) or got:
            report[f"pass_rate.{kind}"] = 100.0 * sum(got) / len(got) if got else None
            report[f"n.{kind}"] = len(got)
    bad_verdicts = [float(j.score) for j in counted if labels.get((j.agent, j.instance_id, j.item_id)) == 0
                    and j.status == "scored" and j.score is not None]
    good_verdicts = [float(j.score) for j in counted if labels.get((j.agent, j.instance_id, j.item_id)) == 1
                     and j.status == "scored" and j.score is not None]
    auc = auc_interval([y for y, _ in items.values()], [v for _, v in items.values()])
    report["auc"] = auc.auc if auc else None
    report["auc_ci"] = [auc.ci_low, auc.ci_high] if auc else None
    report["auc_from"] = source
    report["pass_rate.bad"] = 100.0 * sum(bad_verdicts) / len(bad_verdicts) if bad_verdicts else None
    report["pass_rate.good"] = 100.0 * sum(good_verdicts) / len(good_verdicts) if good_verdicts else None
    report["n.good"], report["n.bad"] = len(good_verdicts), len(bad_verdicts)
    # None: nothing of known verdict was judged (no instance with such items), so nothing to say. A calibrated
    # judge with no threshold (no P(true)) cannot score its cells: it does not discriminate
    report["discriminates"] = None if not items else auc is not None and auc.auc >= DISCRIMINATION_AUC and \
        auc.ci_low > CHANCE_AUC and (not bad_verdicts or sum(bad_verdicts) / len(bad_verdicts) < PASSES_EVERYTHING) \
        and (not calibrated or report["threshold"] is not None)
    report["unscored"] = sum(1 for j in judgments if j.status != "scored")
    report["text_verdicts"] = sum(1 for j in judgments if j.status == "scored" and j.method == "text")
    return report


def probe_done(root: str, unit: ProbeUnit) -> bool:
    return StageStore(root, "probe", unit.key).is_complete()


def probe(unit: ProbeUnit, rt: Any) -> dict[str, Any]:
    """The probe stage of one unit (rt: perseval.pipeline.stages.Runtime): judgments under probe/<key>/, the report
    in its manifest. A unit with a failed judgment is not marked complete: the next run redoes it."""
    from perseval.kernel.registry import load_plugins
    from perseval.pipeline.stages import load_instances

    store = StageStore(rt.root, "probe", unit.key)
    with unit_lock(rt.root, "probe", unit.key):
        if not store.is_complete():
            load_plugins(rt.plugins)
            instances = load_instances(rt.root, unit.data.key)

            async def work() -> list[Judgment]:
                client = rt.client(unit.model, unit.judge.sampling, "judge", unit.seed)
                try:
                    return await judge_probes(unit.judge, client, instances, unit.n, unit.seed)
                finally:
                    await client.aclose()

            judgments = asyncio.run(work())
            _, labels = probe_answers(instances, unit.n, unit.seed)
            report = probe_report(judgments, labels, unit.judge.calibrated)
            if not unit.judge.calibrated:
                report["threshold"] = unit.judge.threshold  # the one its verdicts were read at
            store.write_records(0, judgments, Judgment)
            if not any(j.status == "failed" for j in judgments):
                store.mark_complete({"benchmark": unit.data.entry.name, "judge": unit.judge.name, "report": report})
            return {"key": unit.key, "report": report}
    return {"key": unit.key, "report": store.manifest()["report"]}


def probe_reports(plan: Plan, root: str) -> dict[tuple[str, str], dict[str, Any]]:
    """(benchmark, judge name) -> the report of every complete probe of the plan."""
    out = {}
    for unit in probe_units(plan):
        store = StageStore(root, "probe", unit.key)
        if store.is_complete():
            out[(unit.data.name, unit.judge.name)] = store.manifest()["report"]
    return out


UNCALIBRATED_NOTE = "threshold: calibrated, but no threshold could be chosen: no known-good and known-bad items " \
    "judged from P(true), so its P(true) verdicts are unscored"
