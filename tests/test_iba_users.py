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
