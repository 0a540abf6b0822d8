"""Judge validity: kappa, alpha and the correlations cross-checked against scikit-learn, the
`krippendorff` package and scipy; the bootstrap, the confusion matrix, the labels layouts, and the
join with judgments a computed run stored."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from perseval.core.errors import InputError
from perseval.judges.labels import Label, file_pairs, judge_scores, label_pairs, read_labels
from perseval.metrics.validity import (confusion, correlations, criterion_row, krippendorff_alpha, validity_table,
                                      weighted_kappa)
from perseval.core.instances import Judgment

krippendorff = pytest.importorskip("krippendorff")


def _graded(seed: int, n: int = 60) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    human = rng.integers(1, 6, n)
    judge = np.clip(human + rng.integers(-2, 3, n), 1, 5)
    return judge, human


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kappa_matches_scikit_learn_and_correlations_match_scipy(seed):
    judge, human = _graded(seed)
    assert weighted_kappa(judge, human) == pytest.approx(cohen_kappa_score(judge, human, weights="quadratic"))
    binary_j, binary_h = judge > 3, human > 3
    assert weighted_kappa(binary_j, binary_h) == pytest.approx(cohen_kappa_score(binary_j, binary_h,
                                                                                 weights="quadratic"))
    r, rho = correlations(judge, human)
    assert r == pytest.approx(stats.pearsonr(judge, human).statistic)
    assert rho == pytest.approx(stats.spearmanr(judge, human).statistic)


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_alpha_matches_the_krippendorff_package_with_three_raters_and_gaps(level):
    judge, human = _graded(4)
    table = np.array([judge, human, np.clip(human + 1, 1, 5)], dtype=float)
    table[0, 3] = table[2, 5] = table[1, 7] = table[0, 7] = np.nan  # unit 7 keeps one value: not pairable
    ours = krippendorff_alpha([[None if np.isnan(v) else v for v in row] for row in table], level)
    assert ours == pytest.approx(krippendorff.alpha(reliability_data=table, level_of_measurement=level))


def test_undefined_statistics_are_none_not_zero():
    assert weighted_kappa([3, 3, 3], [3, 3, 3]) is None
    assert krippendorff_alpha([[1, 1], [1, 1]]) is None
    assert correlations([1, 2], [1, 2]) == (None, None)
    assert correlations([2, 2, 2], [1, 2, 3]) == (None, None)


def test_a_perfect_judge_has_every_statistic_1_and_a_diagonal_confusion_matrix():
    _, human = _graded(5, 40)
    row = criterion_row(human, human, [f"u{i % 8}" for i in range(40)], resamples=200)
    assert row["n"] == 40 and row["clusters"] == 8 and row["alpha_level"] == "ordinal"
    for stat in ("pearson", "spearman", "kappa", "alpha"):
        assert row[stat] == pytest.approx(1.0) and row[f"{stat}_ci_low"] == pytest.approx(1.0)
    m = confusion(human, human)
    assert int(np.trace(m.to_numpy())) == 40 and m.to_numpy().sum() == 40


def test_the_interval_resamples_users_and_covers_the_estimate():
    judge, human = _graded(6, 80)
    row = criterion_row(judge, human, [f"u{i % 10}" for i in range(80)], resamples=300)
    for stat in ("kappa", "alpha", "spearman"):
        assert row[f"{stat}_ci_low"] < row[stat] < row[f"{stat}_ci_high"]
    one_user = criterion_row(judge, human, ["u"] * 80, resamples=50)  # one cluster: every draw is the same data
    assert one_user["kappa_ci_low"] == pytest.approx(one_user["kappa"]) == pytest.approx(one_user["kappa_ci_high"])


def test_mean_judge_scores_are_snapped_to_the_human_categories_for_kappa_and_the_matrix():
    m = confusion([0.4, 0.6, 1.0, 0.0], [0, 1, 1, 0])
    assert m.loc[0.0, 0.0] == 2 and m.loc[1.0, 1.0] == 2
    table, matrices = validity_table([])
    assert table.empty and matrices == {}


def test_the_labels_csv_is_read_long_or_wide_and_a_bad_cell_names_its_row(tmp_path):
    long = tmp_path / "long.csv"
    long.write_text("instance_id,item_id,criterion,human,agent\ni1,cp1,style,1,rag\ni1,cp2,,no,rag\ni2,cp1,style,,rag\n")
    labels = read_labels(long)
    assert labels == [Label("i1", "cp1", "style", 1.0, "rag"), Label("i1", "cp2", "cp2", 0.0, "rag")]
    wide = tmp_path / "wide.csv"
    wide.write_text("instance_id,reasonableness,coherence\ni1,1,0\ni2,yes,\n")
    assert [(x.instance_id, x.item_id, x.human) for x in read_labels(wide)] == [
        ("i1", "reasonableness", 1.0), ("i1", "coherence", 0.0), ("i2", "reasonableness", 1.0)]
    bad = tmp_path / "bad.csv"
    bad.write_text("instance_id,human,item_id\ni1,maybe,cp1\n")
    with pytest.raises(InputError, match=r"bad.csv, row 2, field 'human'"):
        read_labels(bad)
    with pytest.raises(InputError, match="missing column 'instance_id'"):
        (tmp_path / "no_id.csv").write_text("id,human\n1,1\n")
        read_labels(tmp_path / "no_id.csv")


def _j(iid, item, agent, score, judge="j", rep=0, status="scored"):
    return Judgment(iid, agent, 0, judge, rep, item, "k", score, status)


def test_labels_join_the_judges_scores_and_an_ambiguous_label_must_name_its_agent():
    js = [_j("i1", "cp", "rag", 1.0), _j("i1", "cp", "rag", 0.0, rep=1), _j("i2", "cp", "rag", 1.0),
          _j("i3", "cp", "rag", None, status="unscored")]
    scores = {"j": judge_scores(js, "j")}
    labels = [Label("i1", "cp", "cp", 1.0), Label("i2", "cp", "cp", 0.0), Label("i3", "cp", "cp", 1.0)]
    (p,) = label_pairs(labels, scores, {"i1": "u1", "i2": "u2"}, "x.csv")
    assert (p.judge, p.human, p.clusters) == ([0.5, 1.0], [1.0, 0.0], ["u1", "u2"])  # i3 unscored: left out
    scores2 = {"j": judge_scores(js + [_j("i1", "cp", "other", 1.0)], "j")}
    with pytest.raises(InputError, match="give the labelled one in an `agent` column"):
        label_pairs(labels, scores2, {}, "x.csv")
    (f,) = file_pairs(labels, [Label("i1", "cp", "cp", 0.0), Label("i2", "cp", "cp", 0.0)], "labeller")
    assert (f.judge, f.human) == ([0.0, 0.0], [1.0, 0.0])


def test_judge_check_reads_the_judgments_a_computed_run_stored(tmp_path):
    """The IBA oracle's slot judgments (a rule judge, so no model) against labels that agree on all but one."""
    from perseval.experiment.load import load_experiment
    from perseval.report.analyses.judge_agreement import judge_agreement as judge_check
    from perseval.pipeline.plan import make_plan
    from perseval.pipeline.stages import Runtime
    from perseval.core.store import StageStore

    from .plan_runs import _compute, _tree

    exp_cfg = {"name": "t", "seed": 5, "shard_size": 4, "backbones": ["smollm2-135m"], "retrievers": [],
               "judges": ["smollm2-judge"], "output_root": str(tmp_path / "runs"),
               "benchmarks": [{"name": "iba", "sample": 4, "agents": ["iba-oracle"],
                               "params": {"noise_per_evidence": 2, "scenarios": ["Food ordering"]}}]}
    exp = load_experiment(_tree(tmp_path, exp_cfg))
    plan = make_plan(exp)
    cells = [c for c in plan.cells if c.judge == "iba.slots"]
    root = str(tmp_path / "runs")
    _compute(plan, root, Runtime(root, "r", str(tmp_path / "c.sqlite"), 4), cells)
    judged = StageStore(root, "judge", cells[0].judged.key).read_records(Judgment)
    rows = ["instance_id,item_id,criterion,human"]
    rows += [f"{j.instance_id},{j.item_id},slots,{0 if k == 0 else j.score}" for k, j in enumerate(judged)]
    (tmp_path / "labels.csv").write_text("\n".join(rows) + "\n")
    table, matrices = judge_check(exp, tmp_path / "labels.csv")
    (row,) = table.to_dict("records")
    assert row["judge"] == "iba.slots" and row["n"] == len(judged) and row["clusters"] == 4
    assert set(j.score for j in judged) == {1.0}  # the oracle passes every slot; one human label says 0
    assert row["kappa"] is None or row["kappa"] == pytest.approx(
        cohen_kappa_score([j.score for j in judged], [0.0] + [1.0] * (len(judged) - 1), weights="quadratic"))
    assert matrices["iba.slots/slots"].loc[0.0, 1.0] == 1
    with pytest.raises(InputError, match="no labelled item has a judge score"):
        (tmp_path / "other.csv").write_text("instance_id,item_id,human\nnope,x,1\n")
        judge_check(exp, tmp_path / "other.csv")


def test_the_bespoke_meta_test_human_scores_are_the_labels_of_each_evaluator(tmp_path):
    """Real meta-test pairs of the bundled sample; an evaluator whose scores are the human's (x20) agrees
    perfectly, one off by one step on need alignment does not."""
    from perseval.experiment.load import load_experiment
    from perseval.report.analyses.judge_agreement import data_label_pairs
    from perseval.pipeline.plan import make_plan
    from perseval.core.instances import InstanceScore
    from perseval.pipeline.stages import Runtime, construct, load_instances
    from perseval.core.store import StageStore

    from .plan_runs import _tree

    exp_cfg = {"name": "m", "seed": 1, "backbones": ["smollm2-135m"], "retrievers": [], "judges": ["smollm2-judge"],
               "benchmarks": [{"name": "bespoke-meta", "sample": 3, "agents": ["bespoke-meta-feedback"]}]}
    plan = make_plan(load_experiment(_tree(tmp_path, exp_cfg)))
    root = str(tmp_path / "runs")
    construct(plan.data[0], Runtime(root, "r", str(tmp_path / "c.sqlite"), 4))
    insts = load_instances(root, plan.data[0].key)
    crits = ["need_alignment", "content_depth", "tone", "explanation_style"]
    scores = [InstanceScore(i.instance_id, "bespoke-meta-feedback", 0, "j", 0, i.group, c,
                            20.0 * (i.gold["human"][c]["score"] + (1 if c == "tone" and k % 2 else 0)))
              for k, i in enumerate(insts) for c in crits]
    for cell in plan.cells:
        StageStore(root, "score", cell.key).write_records(0, scores, InstanceScore)
    pairs = {p.criterion: p for p in data_label_pairs(plan, root)}
    assert set(pairs) == set(crits) and len(pairs["tone"].human) == len(insts) > 3
    table, _ = validity_table(list(pairs.values()), resamples=100)
    by = table.set_index("criterion")
    assert by.loc["need_alignment", "kappa"] == pytest.approx(1.0)
    assert by.loc["tone", "kappa"] == pytest.approx(cohen_kappa_score(
        [round(v) for v in pairs["tone"].judge], pairs["tone"].human, weights="quadratic")) and \
        by.loc["tone", "kappa"] < 1.0


def test_inter_judge_alpha_self_consistency_length_bias_and_self_preference():
    """Two judges and two repeats on four items of stored judgments: alpha as the krippendorff package
    computes it, disagreement share, the length correlation and the model-family flag."""
    from collections import defaultdict

    from perseval.report.analyses.reliability import _alpha, _length_bias, _self_consistency, model_family

    a = [1.0, 0.0, 1.0, 1.0]
    b = [1.0, 1.0, 1.0, 0.0]
    table = defaultdict(dict)
    for k in range(4):
        table[("i", f"c{k}", 0)] |= {"A": a[k], "B": b[k]}
    alpha, n = _alpha(table, ["A", "B"])
    assert n == 4 and alpha == pytest.approx(krippendorff.alpha(reliability_data=np.array([a, b]),
                                                                 level_of_measurement="nominal"))
    reps = [_j("i", f"c{k}", "x", s, rep=r) for r, scores in enumerate([a, a]) for k, s in enumerate(scores)]
    assert _self_consistency(reps) == pytest.approx(1.0)  # the same verdicts on every repeat
    assert _self_consistency(reps[:4]) is None  # one repeat: nothing to compare
    per_output = [_j(f"i{k}", "c", "x", s) for k, s in enumerate([0.0, 0.0, 1.0, 1.0])]
    rho = _length_bias(per_output, {("i0", 0): 10, ("i1", 0): 20, ("i2", 0): 300, ("i3", 0): 400})
    assert rho == pytest.approx(stats.spearmanr([0, 0, 1, 1], [10, 20, 300, 400]).statistic)
    assert model_family("qwen3-30b-a3b-instruct") == model_family("qwen3-4b-instruct") == "qwen3"
    assert model_family("smollm2-135m") != model_family("qwen3-4b-instruct")
