"""PrefEval's tables: preference-following accuracy of the generation task and accuracy of the
classification task, one row per system and one column per (form, inter-turn setting), as the paper lays
them out, and the distribution of the four error types; every mean with its user-clustered interval (a
preference is a user).

Agent repeats and judge repeats of one instance are averaged first; unscored responses are left out.
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from perseval.benchmarks.prefeval.errors import ERROR_TYPES
from perseval.benchmarks.prefeval.layout import FORMS
from perseval.core.instances import Instance
from perseval.metrics.ci_tables import ci_long, instance_level
from perseval.benchmarks.prefeval.views import PrefEvalPayload

SYSTEM = ["agent", "backbone", "retriever", "judge"]


def setting(instance: Instance) -> str:
    return f"{PrefEvalPayload.of(instance).form} / {PrefEvalPayload.of(instance).inter_turns} turns"


def _order(instances: list[Instance]) -> list[str]:
    keys = {(FORMS.index(PrefEvalPayload.of(i).form), PrefEvalPayload.of(i).inter_turns): setting(i) for i in instances}
    return [keys[k] for k in sorted(keys)]


def _frame(scores: pd.DataFrame, metric: str, instances: list[Instance]) -> pd.DataFrame:
    sub = scores[(scores["metric"] == metric) & scores["value"].notna()]
    if sub.empty:
        return pd.DataFrame(columns=["system", "instance_id", "value", "user_id", "setting"])
    sub = sub.assign(system=[" / ".join(str(v) for v in row if isinstance(v, str) and v) for row in sub[SYSTEM].itertuples(index=False)])
    settings = {i.instance_id: setting(i) for i in instances}
    inst = instance_level(sub, ["system"])
    return inst.assign(setting=inst["instance_id"].map(settings))


def paper_table(scores: pd.DataFrame, metric: str, instances: list[Instance]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(system x setting means, with an Overall column; the long form with intervals)."""
    inst = _frame(scores, metric, instances)
    if inst.empty:
        return pd.DataFrame(), pd.DataFrame()
    long = ci_long(inst, ["system", "setting"], overall="Overall")
    wide = long.pivot(index="system", columns="setting", values="mean")
    order = [s for s in (*_order(instances), "Overall") if s in wide.columns]
    return wide.reindex(columns=order), long


def error_types(scores: pd.DataFrame, instances: list[Instance]) -> pd.DataFrame:
    """Per system and setting: the share (%) of responses of each error type and that follow the preference."""
    parts = []
    for metric in (*ERROR_TYPES, "accuracy"):
        inst = _frame(scores, metric, instances)
        if not inst.empty:
            parts.append(ci_long(inst, ["system", "setting"], overall="Overall").assign(metric=metric))
    if not parts:
        return pd.DataFrame()
    long = pd.concat(parts, ignore_index=True)
    return long.pivot_table(index=["system", "setting"], columns="metric", values="mean", sort=False) \
        .reindex(columns=[m for m in (*ERROR_TYPES, "accuracy") if m in set(long["metric"])])


def analyze(scores: pd.DataFrame, instances: list[Instance]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for metric, name in (("accuracy", "generation_accuracy"), ("mcq_accuracy", "classification_accuracy")):
        wide, long = paper_table(scores, metric, instances)
        if not wide.empty:
            out[f"table_{name}"], out[f"{name}_ci"] = wide, long
    errors = error_types(scores, instances)
    if not errors.empty:
        out["error_types"] = errors
    return out
