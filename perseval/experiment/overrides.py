"""Experiment-level overrides of component settings: one agent or judge YAML serves several protocols.

A protocol setting (an answer budget, a clip, a history window) belongs to the experiment, not to the
component file that a CPU config and a paper config share. An experiment's `overrides:` replaces some of a
named component's settings for that experiment only:

    overrides:
      agents:  {iba-rag: {max_tokens: 192, json_max_tokens: 64}}          # the agent's params
      judges:  {smollm2-judge: {params: {iba.checkpoint: {response_chars: 6000}},
                                sampling: {max_tokens: 96}, repeats: 1}}
      models:  {smollm2-135m: {sampling: {max_tokens: 160}}}               # a backbone's sampling

Mappings merge key by key (nested mappings too); any other value replaces the component's. Overrides are
applied once, when the experiment is resolved, and the merged settings are validated by the component's own
`Params` (errors name the experiment file and the `overrides.` key). Keys are made from the validated,
effective settings, so an override equal to the YAML's value leaves every key as it was.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Mapping, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from perseval.core.errors import ConfigError
from perseval.kernel.params import error_lines, invalid, validate_params
from perseval.kernel.registry import agent_class, judge_class

C = TypeVar("C", bound=BaseModel)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


CALIBRATED = "calibrated"
THRESHOLDS = "a number in (0, 1), or `calibrated` (chosen on the probe set: needs judge_probes >= 2)"


def _threshold(value: Any) -> Any:
    """One message for every wrong value (pydantic's union would give one per member)."""
    if value == CALIBRATED or value is None:
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1:
        return float(value)
    raise ValueError(f"{value!r} is not allowed: {THRESHOLDS}")


# P(true) at which a binary verdict read as a probability passes, or `calibrated` (perseval.pipeline.probes)
Threshold = Annotated[float | Literal["calibrated"], BeforeValidator(_threshold)]


class JudgeOverride(_Strict):
    params: dict[str, Any] = {}  # with no judge `kind`: keyed by judge kind, as in the judge YAML
    sampling: dict[str, Any] = {}
    repeats: int | None = Field(None, ge=1)
    reasons: bool | None = None  # the judge YAML's `reasons` (False: verdicts without their reason)
    threshold: Threshold | None = None  # the judge YAML's `threshold`


class ModelOverride(_Strict):
    sampling: dict[str, Any] = {}


class Overrides(_Strict):
    agents: dict[str, dict[str, Any]] = {}  # agent name -> params
    judges: dict[str, JudgeOverride] = {}
    models: dict[str, ModelOverride] = {}

    def __bool__(self) -> bool:
        return bool(self.agents or self.judges or self.models)


def merged(base: Mapping[str, Any], change: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `change` written over it: mappings merge key by key, anything else is replaced."""
    out = dict(base)
    for key, value in change.items():
        old = out.get(key)
        out[key] = merged(old, value) if isinstance(old, Mapping) and isinstance(value, Mapping) else value
    return out


def _unknown(where: str, key: str, what: str, name: str, known: Mapping[str, Any]) -> ConfigError:
    return ConfigError(f"{where}: key '{key}': there is no {what} {name!r} (this experiment's {what}s: "
                       f"{sorted(known)})")


def _sampling(sampling: C, change: Mapping[str, Any], where: str, key: str) -> C:
    if not change:
        return sampling
    try:
        return type(sampling).model_validate(merged(sampling.model_dump(), change))
    except ValidationError as exc:
        raise ConfigError(invalid(where, "sampling", error_lines(exc, key, type(sampling)))) from None


def _agent(cfg: Any, change: Mapping[str, Any], where: str, files: Mapping[str, str]) -> Any:
    try:
        cls = agent_class(cfg.kind)
    except ConfigError:
        return cfg  # an unknown kind is reported against the agent's own file when the experiment is validated
    validate_params(cls.Params, cfg.params, files.get(f"agents/{cfg.name}", where))  # its own file's errors first
    params = merged(cfg.params, change)
    validate_params(cls.Params, params, where, prefix=f"overrides.agents.{cfg.name}")
    return cfg.model_copy(update={"params": params})


def _judge_params(cfg: Any, params: dict[str, Any], where: str, key: str) -> None:
    """The merged params through each judge kind's own Params (keyed by kind when the judge has none)."""
    by_kind = {cfg.kind: params} if cfg.kind else params
    for kind, raw in by_kind.items():
        try:
            cls = judge_class(kind)
        except ConfigError as exc:
            raise ConfigError(f"{where}: key '{key}.{kind}': {exc}") from None
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{where}: key '{key}.{kind}': expected a mapping of that judge kind's params")
        validate_params(cls.Params, raw, where, prefix=key if cfg.kind else f"{key}.{kind}")


def _judge(cfg: Any, change: JudgeOverride, where: str) -> Any:
    key = f"overrides.judges.{cfg.name}"
    update: dict[str, Any] = {"sampling": _sampling(cfg.sampling, change.sampling, where, f"{key}.sampling")}
    if change.params:
        update["params"] = merged(cfg.params, change.params)
        _judge_params(cfg, update["params"], where, f"{key}.params")
    update.update({k: v for k in ("repeats", "reasons", "threshold") if (v := getattr(change, k)) is not None})
    return cfg.model_copy(update=update)


def apply_overrides(overrides: Overrides, where: str, models: dict[str, Any], judges: dict[str, Any],
                    agents: dict[str, Any], resolver: Any) -> tuple[dict, dict, dict]:
    """The experiment's components with its `overrides:` applied (new objects; the loaded ones are kept).

    `resolver` (perseval.experiment.load._Resolver) tells where each loaded component came from and where named
    configs are looked up: an override of a component this experiment does not use is ignored when such a
    config exists (an experiment trimmed to fewer agents keeps its overrides), and an error otherwise."""
    files: Mapping[str, str] = resolver.files
    for kind, names, known in (("agent", overrides.agents, agents), ("judge", overrides.judges, judges),
                               ("model", overrides.models, models)):
        for name in names:
            exists = any((Path(root) / f"{kind}s" / f"{name}.yaml").exists() for root in resolver.roots)
            if name not in known and not exists:
                raise _unknown(where, f"overrides.{kind}s.{name}", kind, name, known)
    agents = {n: _agent(a, overrides.agents[n], where, files) if n in overrides.agents else a
              for n, a in agents.items()}
    judges = {n: _judge(j, overrides.judges[n], where) if n in overrides.judges else j for n, j in judges.items()}
    models = {n: m.model_copy(update={"sampling": _sampling(m.sampling, overrides.models[n].sampling, where,
                                                            f"overrides.models.{n}.sampling")})
              if n in overrides.models else m for n, m in models.items()}
    return models, judges, agents
