"""Judge discrimination without human labels: every LLM judge also judges answers whose verdict is known.

For a few instances per benchmark entry (`judge_probes: N` in the experiment; 0 = off, the default, so
no existing config sends a request more) perseval writes three answers itself and has each LLM judge
judge them, item by item, exactly as it judges an agent's output:
  gold        the hidden items stated outright: an IBA / custom answer that says every checkpoint's
              statement, a Bespoke response made of the gold claims. Every item should pass.
  empty       an empty answer. Every item should fail.
  wrong-user  IBA / custom: the checkpoint statements of another instance of the same scenario, on the
              items whose gold value differs (a wrong-user answer); Bespoke: the gold claims of another
              query. These items should fail.
Only judge kinds whose items have such known verdicts are probed (checkpoints, claims); a rubric with
no right answer (Bespoke's E_p criteria) is not. The report per judge: the pass rate on each kind and
the AUC of the judge's verdicts for good (1) against bad (0) items (scikit-learn's roc_auc_score). A
judge with AUC below DISCRIMINATION_AUC, or undefined, or passing at least PASSES_EVERYTHING of the
known-bad items is flagged: "judge does not discriminate: scores not interpretable".

A probe's key hashes the data key, the judge binding (kinds, params, repeats, model identity and
sampling), N and the seed, so it is judged once and its judgments are cached like any other.
"""
from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any, Mapping

from perseval.setup.components import make_judges
from perseval.setup.config import ModelConfig
from perseval.setup.experiment import judge_specs
from perseval.core.hashing import content_key
from perseval.judges.base import JudgeBinding
from perseval.pipeline.plan import DataUnit, Plan, model_fingerprint
from perseval.core.records import AgentOutput, Instance, Judgment
from perseval.setup.specs import JudgeSpec
from perseval.core.store import StageStore, unit_lock
from perseval.report.rows import HeadlineRow
from perseval.benchmarks.views import KnownItemsGold, ScenarioPayload

PROBE_VERSION = 1
PROBED_ITEMS = ("checkpoint", "claim")
DISCRIMINATION_AUC = 0.7
PASSES_EVERYTHING = 0.9
NOT_INTERPRETABLE = "judge does not discriminate: scores not interpretable"
GOOD, EMPTY, WRONG = "gold", "empty", "wrong-user"


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
            if spec.uses_llm and spec.model and spec.sampling and \
                    any(j.item in PROBED_ITEMS for j in make_judges(spec)):
                model = spec.model
                key = content_key("probe", PROBE_VERSION, data.key, spec.name, list(spec.kinds), spec.params_json(),
                                  spec.repeats, model_fingerprint(model, spec.sampling), n, e.seed)
                out.append(ProbeUnit(key, data, spec, model, n, e.seed))
    return out


def unprobed(plan: Plan) -> list[str]:
    """With `judge_probes` set, one line per benchmark entry whose LLM judges have no kind with items of known
    verdict (PROBED_ITEMS), so no probe runs and no AUC line comes for it; empty when probes are off."""
    if not getattr(plan.exp.experiment, "judge_probes", 0):
        return []
    probed = {u.data.key for u in probe_units(plan)}
    out = []
    for bi, data in enumerate(plan.data):
        llm = [s for s in judge_specs(plan.exp, bi) if s.uses_llm]
        if llm and data.key not in probed:
            kinds = sorted({k for s in llm for k in s.kinds})
            out.append(f"judge_probes: {data.name} is not probed: its judge kinds {', '.join(kinds)} have no items "
                       f"of known verdict (probes cover {' and '.join(PROBED_ITEMS)} items), so no AUC is reported "
                       "for its judges")
    return out


# --- the known answers -------------------------------------------------------------------------------------

def _items(inst: Instance) -> list[tuple[str, str, str]]:
    """(item id, statement, value) of the items whose verdict a probe knows."""
    return KnownItemsGold.of(inst).items()


def probe_answers(instances: list[Instance], n: int, seed: int) -> tuple[list[AgentOutput], dict[tuple[str, str, str], int]]:
    """The probe outputs of n seeded instances with known items, and (agent, instance, item) -> 1 / 0."""
    pool = sorted((i for i in instances if _items(i)), key=lambda i: i.instance_id)
    picked = random.Random(f"judge-probes:{seed}").sample(pool, min(n, len(pool)))
    outputs: list[AgentOutput] = []
    labels: dict[tuple[str, str, str], int] = {}
    for inst in picked:
        items = _items(inst)
        outputs += [AgentOutput(inst.instance_id, f"probe:{GOOD}", 0, "\n".join(s for _, s, _ in items)),
                    AgentOutput(inst.instance_id, f"probe:{EMPTY}", 0, "")]
        labels |= {(f"probe:{GOOD}", inst.instance_id, i): 1 for i, _, _ in items}
        labels |= {(f"probe:{EMPTY}", inst.instance_id, i): 0 for i, _, _ in items}
        other = _other(inst, pool)
        if other is not None:
            theirs = {i: (s, v) for i, s, v in _items(other)}
            outputs.append(AgentOutput(inst.instance_id, f"probe:{WRONG}", 0,
                                       "\n".join(s for s, _ in theirs.values())))
            labels |= {(f"probe:{WRONG}", inst.instance_id, i): 0 for i, _, v in items
                       if not KnownItemsGold.of(inst).checkpoints or (i in theirs and theirs[i][1] != v)}
    return outputs, labels


def _other(inst: Instance, pool: list[Instance]) -> Instance | None:
    """Another user's instance of the same scenario (IBA, custom) or any other query (Bespoke)."""
    scenario = ScenarioPayload.of(inst).scenario
    same = [o for o in pool if o.user_id != inst.user_id and ScenarioPayload.of(o).scenario == scenario]
    return same[0] if same else None


# --- judging them, and the report --------------------------------------------------------------------------

async def judge_probes(spec: JudgeSpec, client: Any, instances: list[Instance], n: int, seed: int) -> list[Judgment]:
    from perseval.pipeline.runner import judge_shard

    judges = [j for j in make_judges(spec) if j.item in PROBED_ITEMS]
    outputs, _ = probe_answers(instances, n, seed)
    by_id = {i.instance_id: i for i in instances}
    bindings = [JudgeBinding(spec.name, client, r) for r in range(spec.repeats)]
    return await judge_shard(judges, bindings, by_id, outputs)


def probe_report(judgments: list[Judgment], labels: dict[tuple[str, str, str], int]) -> dict[str, Any]:
    """Pass rate per probe kind, AUC of good against bad, and the flag."""
    scored = [(labels[(j.agent, j.instance_id, j.item_id)], float(j.score)) for j in judgments
              if (j.agent, j.instance_id, j.item_id) in labels and j.status == "scored" and j.score is not None]
    report: dict[str, Any] = {"n_items": len(scored)}
    for kind in (GOOD, EMPTY, WRONG):
        got = [float(j.score) for j in judgments if j.agent == f"probe:{kind}" and j.status == "scored"
               and (j.agent, j.instance_id, j.item_id) in labels and j.score is not None]
        report[f"pass_rate.{kind}"] = 100.0 * sum(got) / len(got) if got else None
        report[f"n.{kind}"] = len(got)
    ys = [y for y, _ in scored]
    auc = None
    if len(set(ys)) == 2:
        from sklearn.metrics import roc_auc_score

        auc = float(roc_auc_score(ys, [s for _, s in scored]))
    bad = [s for y, s in scored if y == 0]
    report["auc"] = auc
    report["pass_rate.bad"] = 100.0 * sum(bad) / len(bad) if bad else None
    # None: nothing of known verdict was judged (no instance with such items), so nothing to say
    report["discriminates"] = None if not scored else auc is not None and auc >= DISCRIMINATION_AUC and \
        (not bad or sum(bad) / len(bad) < PASSES_EVERYTHING)
    report["unscored"] = sum(1 for j in judgments if j.status != "scored")
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
            report = probe_report(judgments, labels)
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


def with_probe_flags(plan: Plan, root: str, rows: list[Mapping[str, Any]]) -> list[HeadlineRow]:
    """The headline rows (of the controls pass, which returns plain mappings) as typed rows, those of a probed
    judge filled with its AUC, pass rates and item counts, and the flag when the judge does not separate
    known-good from known-bad answers."""
    reports = probe_reports(plan, root)
    out = []
    for r in map(HeadlineRow.of, rows):
        rep = reports.get((r.benchmark, r.judge))
        if rep is not None and rep["discriminates"] is not None:
            r = r.filled(judge_auc=rep["auc"], judge_pass_rate_gold=rep[f"pass_rate.{GOOD}"],
                         judge_pass_rate_bad=rep["pass_rate.bad"], judge_discriminates=rep["discriminates"],
                         judge_probe_items=rep["n_items"], judge_probe_gold=rep.get(f"n.{GOOD}"),
                         judge_probe_bad=(rep.get(f"n.{EMPTY}") or 0) + (rep.get(f"n.{WRONG}") or 0),
                         judge_flag=NOT_INTERPRETABLE if rep["discriminates"] is False else None)
        out.append(r)
    return out


def discrimination_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per probed judge: its AUC on answers of known verdict, its pass rates with their counts, and
    what that means for the scores it gave (what `perseval run` prints under the headline)."""
    seen: dict[str, str] = {}
    for r in rows:
        judge = f"{r['benchmark']}/{r['judge']}"
        if r.get("judge_discriminates") is None or judge in seen:
            continue
        auc = "undefined" if r.get("judge_auc") is None else f"{r['judge_auc']:.2f}"
        verdict = "discriminates" if r["judge_discriminates"] else NOT_INTERPRETABLE
        seen[judge] = (f"{judge}: AUC {auc} on {r.get('judge_probe_items', '?')} probe items of known verdict; "
                       f"passes {_pct(r.get('judge_pass_rate_gold'))} of {r.get('judge_probe_gold', '?')} gold and "
                       f"{_pct(r.get('judge_pass_rate_bad'))} of {r.get('judge_probe_bad', '?')} known-bad items: "
                       f"{verdict} (AUC >= {DISCRIMINATION_AUC} and < {100 * PASSES_EVERYTHING:.0f}% of bad "
                       "passed needed)")
    return list(seen.values())


def _pct(value: Any) -> str:
    return "-" if value is None else f"{value:.0f}%"


def flagged_judges(rows: list[dict[str, Any]]) -> list[str]:
    return sorted({f"{r['benchmark']}/{r['judge']}" for r in rows if r.get("judge_flag")})


def flag_tags(rows: list[dict[str, Any]]) -> dict[str, str]:
    """The MLflow tags of a run whose judges were probed: the flag, naming the judges, when one fails."""
    flagged = flagged_judges(rows)
    return {"perseval.judge_flag": f"{NOT_INTERPRETABLE} ({', '.join(flagged)})"} if flagged else {}
