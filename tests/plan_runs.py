"""Plan and compute helpers shared by tests/test_controls.py and tests/test_judge_validity.py: an experiment
written into a copy of the configs, and a plan's stages computed in process as the flow runs them."""
from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from perseval.pipeline.units import shards
from perseval.pipeline.stages import Runtime, construct, index, judge, load_instances, run_shard, score

from .conftest import CONFIGS, copy_configs


def _tree(tmp_path: Path, exp: dict, agents: dict | None = None) -> Path:
    cfg = tmp_path / "configs"
    if not cfg.exists():
        copy_configs(cfg)
    for name, body in (agents or {}).items():
        (cfg / "agents" / f"{name}.yaml").write_text(yaml.safe_dump({"name": name, **body}))
    path = cfg / "experiments" / f"{exp['name']}.yaml"
    path.write_text(yaml.safe_dump(exp))
    return path



def _compute(plan, root: str, rt: Runtime, cells) -> None:
    """The stages of `cells`, as the flow runs them (every data unit built, every index)."""
    for unit in plan.data:
        construct(unit, rt)
    for unit in plan.index:
        index(unit, rt)
    for c in cells:
        for s in shards(len(load_instances(root, c.run.data.key)), rt.shard_size):
            run_shard(c.run, s, rt)
            judge(c.judged, s, rt)
        score(c, rt)

