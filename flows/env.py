"""Process environment for perseval runs. Imports no Prefect: Prefect reads its settings on import,
so PREFECT_API_URL must be in place before the first `import prefect`."""
from __future__ import annotations

import os

OFFLINE_ENV = {
    # The embedded default never reaches a model hub: a hub name fails fast instead of hanging.
    "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
    "TRANSFORMERS_VERBOSITY": "error", "TQDM_DISABLE": "1",  # keep per-batch bars off the stage bars
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
}
# No OMP_WAIT_POLICY: OpenMP's default (spin a while, then sleep) decodes at the server's own speed; PASSIVE
# halved it (quickstart cold 2026-12-03, docs/guides/performance.md). Set PASSIVE on a box shared with other
# CPU-heavy work, where spinning threads are descheduled and decoding collapses (perseval.llm.deployments).


def apply_offline_env() -> None:
    for k, v in OFFLINE_ENV.items():
        os.environ.setdefault(k, v)
