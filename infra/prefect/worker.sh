#!/usr/bin/env bash
# Start a Prefect process worker for perseval's scheduled deployments on this machine (the one that
# serves the models). Usage: PREFECT_API_URL=http://HOST:4200/api infra/prefect/worker.sh [POOL]
# Each scheduled run is executed in a subprocess from this checkout, with the offline environment.
set -euo pipefail
cd "$(dirname "$0")/../.."
POOL="${1:-perseval}"
: "${PREFECT_API_URL:?set PREFECT_API_URL to the Prefect server (e.g. http://127.0.0.1:4200/api)}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false \
       PREFECT_SERVER_ANALYTICS_ENABLED=false MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false
PY="${PERSEVAL_PYTHON:-.venv/bin/python}"
"$PY" -m prefect work-pool create "$POOL" --type process 2>/dev/null || true  # exists already: fine
exec "$PY" -m prefect worker start --pool "$POOL" --type process
