"""Version 1 run records read as version 2.

A version 1 record kept each cell's typed estimate, difference, judge check and cost beside an untyped headline
`row` (every field of the summary JSON), held no control cell and counted a cell's status in items. Its
upgrade takes each section from the row where version 2 types it (status counts, controls, evidence
attribution, the probe's figures), labels the cells as version 2 does, and withholds the numbers of a cell
whose judge does not discriminate, as version 2 records do; its results digest is kept as it was written.
"""
from __future__ import annotations

from typing import Any

from perseval.report.names import short_names
from perseval.report.words import NOT_INTERPRETABLE

OLD_CONTROL = ("personalization_gain", "history_gain")


def upgrade_v1(data: dict[str, Any]) -> dict[str, Any]:
    cells = data["cells"]
    labels = short_names([tuple(c["parts"][p] for p in ("benchmark", "agent", "backbone", "retriever", "judge"))
                          for c in cells])
    return {**data, "schema_version": 2, "upgraded_from": 1,
            "cells": [_cell(c, label) for c, label in zip(cells, labels)], "instances": data.get("instances", [])}


def _role(agent: str) -> str:
    if "oracle" in agent:
        return "oracle"
    return "no history" if any(n in agent for n in ("no-history", "no-context", "no-profile")) else "history"


def _cell(c: dict[str, Any], label: str) -> dict[str, Any]:
    row = c["row"]
    probe = _probe(c.get("judge_check"), row)
    flagged = probe is not None and probe["discriminates"] is False
    estimate = {**c["estimate"], "weighting": row.get("weighting") or "instance"}
    if flagged:
        estimate |= {"uninterpretable_mean": estimate["point"], "uninterpretable_reason": probe["flag"],
                     "point": None, "low": None, "high": None, "se": None, "mde": None}
    diff = c.get("difference")
    return {"key": c["key"], "name": c["name"], "label": label, "parts": c["parts"], "role": _role(c["parts"]["agent"]),
            "metric": c["metric"], "baseline": row.get("baseline"), "status": _status(c, row),
            "estimate": estimate,
            "difference": None if diff is None or flagged else {**diff, "baseline_cell": ""},
            "probe": probe, "controls": None if flagged else _controls(row), "attribution": _attribution(row),
            "cost": c.get("cost") or {}, "mlflow_run_id": c.get("mlflow_run_id")}


def _status(c: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    judged = int(c["n"])
    share = row.get("scored_share")
    scored = round(judged * share / 100) if share is not None else judged
    return {"word": c["status"], "instances": judged, "scored": scored, "scored_share": share,
            "unscored_items": c["unscored_items"], "unscored_item_share": row.get("unscored_share"),
            "invalid_outputs": row.get("invalid_outputs") or 0, "failed_outputs": c["failed_outputs"],
            "failed_judgments": c["failed_judgments"]}


def _probe(check: dict[str, Any] | None, row: dict[str, Any]) -> dict[str, Any] | None:
    if check is None:
        return None
    return {"auc": check["auc"], "auc_low": row.get("judge_auc_ci_low"), "auc_high": row.get("judge_auc_ci_high"),
            "auc_from": row.get("judge_auc_from"), "pass_rate_gold": check["pass_rate_gold"],
            "pass_rate_bad": check["pass_rate_bad"], "discriminates": check["discriminates"], "items": check["items"],
            "gold_items": row.get("judge_probe_gold"), "bad_items": row.get("judge_probe_bad"),
            "threshold": check.get("threshold"),
            "flag": row.get("judge_flag") or (NOT_INTERPRETABLE if check["discriminates"] is False else None)}


def _gain(row: dict[str, Any], prefix: str, reference: str, score: str) -> dict[str, Any] | None:
    if row.get(f"{prefix}_users") is None:
        return None
    return {"reference": "", "reference_label": reference, "point": row.get(prefix),
            "low": row.get(f"{prefix}_ci_low"), "high": row.get(f"{prefix}_ci_high"), "p": row.get(f"{prefix}_p"),
            "p_holm": row.get(f"{prefix}_p_holm"), "instances": row.get(f"{prefix}_n") or 0,
            "users": row[f"{prefix}_users"], "own": row.get(f"{prefix}_own"), "reference_score": row.get(score),
            "small_n": bool(row.get(f"{prefix}_small_n"))}


def _controls(row: dict[str, Any]) -> dict[str, Any] | None:
    if not any(k in row for k in (*OLD_CONTROL, "controls_note")):
        return None
    return {"note": row.get("controls_note"), "zero_by_construction": row.get("controls_note") is not None,
            "personalization": _gain(row, "personalization_gain", "swapped-history", "swapped_score"),
            "history": _gain(row, "history_gain", str(row.get("no_history_agent") or "no history"),
                             "no_history_score")}


def _attribution(row: dict[str, Any]) -> dict[str, Any] | None:
    if row.get("evidence_recall") is None:
        return None
    return {"evidence_recall": row["evidence_recall"], "instances": row.get("evidence_n") or 0,
            "score_reached": row.get("score_evidence_reached"), "reached": row.get("n_evidence_reached") or 0,
            "score_missed": row.get("score_evidence_missed"), "missed": row.get("n_evidence_missed") or 0}
