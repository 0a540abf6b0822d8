#!/usr/bin/env bash
# The pipeline benchmark on one H200, in one command and at most 10 minutes: a 500-instance IBA-Bench sample
# (perseval/benchmarks/iba/configs/experiments/iba_h200_bench.yaml: Qwen3-4B-Instruct served by perseval's vLLM deployment
# qwen3-4b-vllm-1gpu as backbone and judge, BGE-M3 embeddings in faiss-gpu) run fresh by
# `scripts/bench_pipeline.py --p1`, which then replays each stage's requests to a freshly started server of
# the same deployment (stage seconds over replay seconds).
#
#   infra/gpu/bench_h200.sh [--dry-run] [OUT]     # OUT (default bench-h200/) gets bench.json and the runs
#
# It installs nothing: vllm, FlagEmbedding and faiss-gpu must be importable by $PYTHON (default python), and
# both models' weights in the Hugging Face cache (HF_HUB_OFFLINE=1 unless set: a machine without network
# fails fast instead of hanging; set HF_HUB_OFFLINE=0 to let it download). --dry-run prints the commands.
set -euo pipefail
cd "$(dirname "$0")/../.."

DRY_RUN=0
if [[ "${1:-}" == "--dry-run" ]]; then
  DRY_RUN=1
  shift
fi
OUT=${1:-bench-h200}
PYTHON=${PYTHON:-python}
CONFIG=perseval/benchmarks/iba/configs/experiments/iba_h200_bench.yaml
LIMIT_S=${BENCH_LIMIT_S:-540}  # the benchmark's share of the 10 minutes; the checks before it take seconds

export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} TRANSFORMERS_OFFLINE=${TRANSFORMERS_OFFLINE:-${HF_HUB_OFFLINE:-1}}
export TOKENIZERS_PARALLELISM=false PREFECT_SERVER_ANALYTICS_ENABLED=false

run() {
  printf '+ %q' "$1"
  printf ' %q' "${@:2}"
  printf '\n'
  if [[ $DRY_RUN == 0 ]]; then
    "$@"
  fi
}

run nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
run "$PYTHON" -c "import vllm, FlagEmbedding, faiss; assert faiss.get_num_gpus() > 0, 'faiss sees no GPU'"
# the weights the experiment names (model sources, embedder models), from the cache only
run "$PYTHON" -c "import sys; from huggingface_hub import snapshot_download as get
from perseval.experiment.load import load_experiment
exp = load_experiment(sys.argv[1])
names = {m.source for m in exp.models.values()} | {r.params['embedder']['model'] for r in exp.retrievers.values()}
for name in sorted(names): get(name, local_files_only=True)" "$CONFIG"
run "$PYTHON" -m perseval_flows.cli validate "$CONFIG"
run mkdir -p "$OUT"
run timeout "$LIMIT_S" "$PYTHON" scripts/bench_pipeline.py --config "$CONFIG" --p1 --json "$OUT/bench.json" \
  --workdir "$OUT/work"
