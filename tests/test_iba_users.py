"""IBA's unit of independence is the persona (issue 31): instances of one seed persona share a user for
the intervals, while each keeps its own history."""
import pandas as pd

from perseval.benchmarks.iba.construct import ConstructParams, construct
from perseval.benchmarks.iba.taxonomy import load_taxonomy
from perseval.metrics.ci_tables import ci_long, cluster_of, with_users


def test_constructed_instances_cluster_by_persona_and_keep_their_own_history():
    data = construct(load_taxonomy(), sample=120, seed=42, params=ConstructParams(noise_per_evidence=0))
    clusters = [cluster_of(i) for i in data.instances]
    assert len(set(clusters)) < len(data.instances)  # 120 draws from 400 personas repeat some
    assert all(c == f"iba-{i.gold['persona']['persona_id']}" for c, i in zip(clusters, data.instances))
    owners = {d.owner for d in data.documents}
    assert owners == {i.user_id for i in data.instances} and len(owners) == len(data.instances)
    frame = pd.DataFrame({"instance_id": [i.instance_id for i in data.instances], "value": 50.0})
    table = ci_long(with_users(frame, data.instances).assign(g="all"), ["g"])
    assert table.loc[0, "n"] == 120 and table.loc[0, "n_users"] == len(set(clusters))


def test_the_ablation_subset_is_a_stratified_seeded_subset_of_the_whole_build():
    from collections import Counter

    params = ConstructParams(noise_per_evidence=0, distribution="table2")
    whole = construct(load_taxonomy(), sample=300, seed=7, params=params)
    part = construct(load_taxonomy(), sample=300, seed=7, params=params.model_copy(update={"subset": 100}))
    again = construct(load_taxonomy(), sample=300, seed=7, params=params.model_copy(update={"subset": 100}))
    by_id = {i.instance_id: i for i in whole.instances}
    assert len(part.instances) == 100 and all(by_id[i.instance_id] == i for i in part.instances)  # a true subset
    assert [i.instance_id for i in part.instances] == [i.instance_id for i in again.instances]  # seeded
    shares = Counter(i.group for i in whole.instances)
    for domain, n in Counter(i.group for i in part.instances).items():
        assert abs(n - 100 * shares[domain] / 300) < 1  # each domain its share, rounded
    assert "subset" not in params.model_dump()  # unset: the data keys of existing configs do not move
