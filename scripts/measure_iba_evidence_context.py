"""How often a release's preference evidence reaches IBA-Agent's final context, on the real embedded model.

    PYTHONPATH=. .venv/bin/python scripts/measure_iba_evidence_context.py               # the test release
    PYTHONPATH=. .venv/bin/python scripts/measure_iba_evidence_context.py --source DIR --sample 10
    PYTHONPATH=. .venv/bin/python scripts/measure_iba_evidence_context.py --construct 30   # see below

Per instance: IBA-Agent (perseval/benchmarks/iba/configs/agents/iba-agent.yaml) on SmolLM2-135M served by the embedded
llama.cpp deployment, over a real MiniLM + FAISS index of the histories, and the RAG baseline's
top-3 retrieval with the task text for comparison. "In context" means an evidence turn of the
instance's user (a history row with `evidence`) is among the passages IBA-Agent kept for Broad
Thinking and synthesis (its trace step `kept_passages`); "in extraction" that the turn's user text is
in the evidence the preference-extraction prompt reads (`compact_evidence`).

The script imports whichever perseval is first on PYTHONPATH, and reads that tree's configs, so
the same file measures a checkout before and after a change. A fresh request cache per run: nothing
is reused between runs. Prints one JSON line per instance, then a summary line.

Measured when written (the 6 instances of tests/data/iba_outside_release, 2 shared CPU cores):
before issue 14's change, evidence in the kept context 0/6 (every passage scored 0, 6/6 contexts
empty); after, 5/6 (one by the top-up), no empty context, 30 passages kept of which 6 evidence
turns - SmolLM2 calls every passage relevant and tags some noise with every signal, so its
labels barely separate evidence from noise. The RAG baseline's top-3 held the evidence 6/6.

`--construct N` measures N instances of perseval's own construction (implicit evidence, 20 noise
turns per evidence turn, seed 14) written as a release whose scenarios are all renamed, so nothing
of the taxonomy helps. Measured (30 instances, 39 s each): evidence in the kept context 26/30, no
empty context, the evidence among the re-ranked candidates 30/30; the RAG top-3 held it 26/30 (the
expanded queries found it 3 times where the top-3 did not; the 135M labels lost it 4 times).

Issue 22 (per-step evidence, `held` per instance and `steps_any` / `steps_share` in the summary; `--params`
overrides the agent's params, e.g. '{"selection": "threshold", "min_passages": 0}' for the paper's
selection). Real chat text: a release made from a dialogue-act-annotated movie-recommendation corpus
(ReDial/IARD as shipped in iai-group/UserSimCRS, data/datasets/iard/formatted_IARD_annotated_gold.json),
kept outside the repository:

    python scripts/chat_corpus_to_iba_release.py iard.json iard_release     # 30 users, 900 turns, 75 evidence
    PYTHONPATH=. python scripts/measure_iba_evidence_context.py \
        --source iard_release --sample 12 --traces before.jsonl             # before (a checkout of the previous main)
    PYTHONPATH=. python scripts/measure_iba_evidence_context.py --source iard_release --sample 12 \
        --traces after.jsonl                                                    # after
    ... --construct 12 ...                                                      # constructed, both trees

Measured (SmolLM2-135M, MiniLM, 2 shared cores at load 20-30, 120-300 s per instance): real chat, 12
instances, 38 evidence turns: before, evidence in the kept context 5/12 (the 135M rater scored the lost
statements 3 and noise 9-10), final prompt none (a plan always existed, so `_messages` dropped the evidence);
after, 7/12 at every step from the first retrieval to the final prompt (8/38 turns), the RAG top-3 7/12
(8/38). Constructed, first 11 of 12 instances, 56 evidence turns: before 10/11 kept; after 11/11 kept and in
the final prompt (32/56 turns: first retrieval 19, expansion 39, dedup 39, salience 32), RAG top-3 10/11
(19/56). The threshold selection replayed on the same rater answers (today's top-up to 3 / the paper's
no top-up): real chat 5/12 / 5/12, constructed 10/11 / 8/11.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import perseval
from perseval.agents.base import AgentContext
from perseval.benchmarks.iba.agents.iba_agent.agent import IbaAgent
from perseval.benchmarks.actions import ActionFormat
try:  # per-step evidence (issue 22); an older tree measured for comparison has no such module
    from perseval.benchmarks.iba.analysis_evidence import STEPS, gold_evidence, held_by_step
except ImportError:  # pragma: no cover - only when measuring an older checkout
    STEPS, gold_evidence, held_by_step = (), None, None
from perseval.benchmarks.iba.release import IBA_LAYOUT
from perseval.experiment.components import make_retriever
from perseval.llm.settings import DeploymentConfig, ModelConfig
from perseval.retrieval.settings import RetrieverConfig
from perseval.experiment.config import AgentConfig, load_config
from perseval.llm.cache import RequestCache
from perseval.llm.client import LLMClient
from perseval.llm.deployments import Deployment
from perseval.core.instances import Document
from perseval.experiment.load import BENCHMARKS_DIR

TREE = Path(perseval.__file__).resolve().parents[1]
CONFIGS = TREE / "configs"


def step(trace: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    return next((t for t in trace if t["step"] == name), None)


def user_text(doc: Document) -> str:
    return doc.text.split("\n")[0].removeprefix("User: ").strip()


async def measure(args: argparse.Namespace, work: Path) -> None:
    data = IBA_LAYOUT.load(args.source)
    instances = data.instances[:args.sample]
    owners: dict[str, list[Document]] = {}
    for d in data.documents:
        owners.setdefault(d.owner, []).append(d)
    retriever = make_retriever(load_config(RetrieverConfig, CONFIGS / "retrievers" / "minilm.yaml"))
    retriever.build([d for i in instances for d in owners[i.user_id]], work / "index")
    index = retriever.open(work / "index")

    async def retrieve(owner: str, query: str, k: int):
        return index.search(owner, query, k)

    model = load_config(ModelConfig, CONFIGS / "models" / "smollm2-135m.yaml")
    deployment = load_config(DeploymentConfig, CONFIGS / "deployments" / f"{model.deployment}.yaml")
    agent_cfg = load_config(AgentConfig, (BENCHMARKS_DIR / "iba" / "configs" / "agents" / "iba-agent.yaml"))
    agent = IbaAgent({**agent_cfg.params, **json.loads(args.params or "{}")})
    rows = []
    with Deployment(model, deployment, work / "logs") as endpoint:
        llm = LLMClient(endpoint, model.sampling, RequestCache(work / "cache.sqlite"), role="agent",
                        run_id="measure", seed=0)
        ctx = AgentContext(llm=llm, retrieve=retrieve, documents=lambda u: owners.get(u, []),
                           request_format=ActionFormat())
        try:
            for inst in instances:
                row, trace = await one(inst, agent, ctx, owners[inst.user_id], retrieve)
                rows.append(row)
                print(json.dumps(row), flush=True)
                if args.traces:
                    with open(args.traces, "a", encoding="utf-8") as fh:
                        fh.write(json.dumps({"instance": inst.instance_id, "trace": trace}) + "\n")
        finally:
            await llm.aclose()
    n = len(rows)
    summary = {"tree": str(TREE), "source": str(args.source), "instances": n,
               "evidence_in_context": sum(r["in_context"] for r in rows),
               "evidence_in_extraction": sum(r["in_extraction"] for r in rows),
               "rag_top3_has_evidence": sum(r["rag_top3"] for r in rows),
               "empty_context": sum(r["kept"] == 0 for r in rows),
               # per step: instances with an evidence turn held, and the share of all evidence turns held
               "steps_any": {st: sum(bool(r["held"].get(st)) for r in rows) for st in STEPS},
               "steps_share": {st: round(sum(r["held"].get(st) or 0 for r in rows)
                                         / max(sum(r["n_gold"] for r in rows), 1), 3) for st in STEPS},
               "rag_top3_share": round(sum(r["rag_top3_turns"] for r in rows) / max(sum(r["n_gold"] for r in rows), 1), 3),
               "params": json.loads(args.params or "{}"),
               "selection": {s: sum(r["selection"] == s for r in rows) for s in {r["selection"] for r in rows}},
               "seconds_per_instance": round(sum(r["seconds"] for r in rows) / max(n, 1), 1)}
    print("SUMMARY " + json.dumps(summary), flush=True)


async def one(inst, agent: IbaAgent, ctx: AgentContext, docs: list[Document],
              retrieve) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    gold = {d.doc_id: d for d in docs if d.meta.get("supports")}
    if gold_evidence is not None:  # the instance's own scenario's evidence, as the run's analysis counts it
        gold = {i: d for i, d in gold.items() if i in gold_evidence(inst, docs)}
    t0 = time.monotonic()
    out = await agent.act(inst.public(), ctx, 0, "iba-agent")
    seconds = time.monotonic() - t0
    kept = step(out.trace, "kept_passages") or {"passages": [], "selection": "none"}
    kept_ids = [p["doc_id"] for p in kept["passages"]]
    compact = (step(out.trace, "compact_evidence") or {}).get("evidence", "")
    salience = step(out.trace, "salience") or {"scores": []}
    rag = await retrieve(inst.user_id, inst.query, 3)
    return {
        "instance": inst.instance_id, "status": out.status, "seconds": round(seconds, 1),
        "kept": len(kept_ids), "selection": kept["selection"],
        "in_context": any(i in gold for i in kept_ids),
        "in_extraction": any(user_text(d)[:60] in compact for d in gold.values()),
        "rag_top3": any(p.doc_id in gold for p in rag),
        "rag_top3_turns": len({p.doc_id for p in rag} & set(gold)), "n_gold": len(gold),
        "held": held_by_step(out.trace, set(gold)) if held_by_step else {},
        "evidence_retrieved": any(s["doc_id"] in gold for s in salience["scores"]),
        "evidence_salience": [s for s in salience["scores"] if s["doc_id"] in gold],
        "all_scores": sorted((s["score"] for s in salience["scores"]), key=lambda v: (v is None, v or 0)),
    }, out.trace


def construct_release(n: int, folder: Path) -> Path:
    """N constructed instances written as a release, every scenario renamed out of the taxonomy."""
    from perseval.benchmarks.iba.benchmark import IbaBenchmark
    from perseval.benchmarks.iba.release import write_release

    built = IbaBenchmark({"noise_per_evidence": 20, "dynamic_rate": 0.3}).build(sample=n, seed=14, source=None)
    write_release(built, folder)
    for name in ("instances.jsonl", "histories.jsonl"):
        rows = [json.loads(line) for line in (folder / name).read_text().splitlines()]
        for row in rows:
            if row.get("scenario"):
                row["scenario"] += " (our own)"
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", type=Path, default=TREE / "tests" / "data" / "iba_outside_release")
    ap.add_argument("--sample", type=int, default=6, help="the first N instances of the release")
    ap.add_argument("--params", help='JSON overrides of the agent params, e.g. \'{"selection": "threshold"}\'')
    ap.add_argument("--traces", type=Path, help="append each instance's IBA-Agent trace to this JSONL file")
    ap.add_argument("--construct", type=int, metavar="N",
                    help="measure N constructed instances written as a release with renamed scenarios")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    with tempfile.TemporaryDirectory(prefix="iba-measure-") as tmp:
        if args.construct:
            args.source = construct_release(args.construct, Path(tmp) / "release")
            args.sample = args.construct
        asyncio.run(measure(args, Path(tmp)))


if __name__ == "__main__":
    main()
