"""The full IBA-Bench taxonomy against the paper's Tables 2 and 13, and the loader's validation."""
from __future__ import annotations

import copy
import re
import string
from collections import Counter
from functools import lru_cache
from pathlib import Path

import pytest
import yaml

from perseval.benchmarks.iba.taxonomy import load_taxonomy
from perseval.benchmarks.iba.taxonomy import DEFAULT_PATH, EVIDENCE_KINDS, parse_taxonomy
from perseval.core.errors import InputError

GEN, API = "generate", "call_api"

# Table 13: domain -> [(scenario, D, P, I, dynamic, action type)], in the paper's order.
# P counts static values plus "preferred A, now B" shifts, as Table 14 does.
TABLE13: dict[str, list[tuple[str, int, int, int, bool, str]]] = {
    "Writing and Design": [
        ("Peer review reports", 4, 9, 54, True, GEN),
        ("Academic paper writing", 6, 15, 71, True, GEN),
        ("Research proposal (RP) writing", 4, 13, 76, True, GEN),
        ("Business plan writing", 3, 8, 29, True, GEN),
        ("Diary writing", 3, 7, 23, True, GEN),
        ("Technical documentation writing", 4, 12, 80, True, GEN),
        ("Blog post writing", 2, 4, 4, False, GEN),
        ("WeChat public account article", 3, 8, 27, True, GEN),
        ("Novel writing", 2, 4, 6, False, GEN),
        ("Resume writing", 5, 14, 72, True, GEN),
        ("Short video script design", 3, 11, 41, False, GEN),
        ("PPT slide content writing", 2, 9, 15, True, GEN),
        ("Mind map design", 4, 20, 79, True, GEN),
        ("Modular course writing (teaching aid)", 4, 14, 71, True, GEN),
        ("Instruction manual writing", 3, 15, 73, True, GEN),
        ("Self-introduction script writing", 3, 8, 29, False, GEN),
    ],
    "Work": [
        ("Scholarship application", 7, 17, 140, True, GEN),
        ("Performance report spreadsheet", 6, 23, 90, True, GEN),
        ("Schedule planning", 6, 31, 119, True, GEN),
        ("Data analysis", 4, 27, 101, True, GEN),
        ("Programming", 5, 23, 90, True, GEN),
        ("Leave application", 4, 10, 93, False, GEN),
        ("Project management", 5, 22, 105, True, GEN),
        ("Communication management", 2, 5, 7, False, GEN),
        ("Announcement drafting", 3, 12, 74, True, GEN),
        ("Event organization", 4, 14, 111, False, GEN),
        ("Work summary writing", 4, 16, 113, True, GEN),
        ("Terminology explanation", 3, 14, 112, True, GEN),
    ],
    "Daily Consumption": [
        ("Food ordering", 3, 15, 122, True, API),
        ("Ticket booking", 4, 17, 145, True, API),
        ("Clothing purchase", 4, 15, 153, True, API),
        ("Digital product purchase", 4, 10, 89, False, API),
        ("Accommodation booking", 4, 12, 138, False, API),
        ("Online course purchase", 5, 12, 154, False, API),
        ("Book purchase", 4, 12, 127, True, API),
        ("Renting a house", 11, 28, 158, False, API),
    ],
    "Planning": [
        ("Weekly plan", 4, 19, 122, True, GEN),
        ("Monthly plan", 4, 12, 107, True, GEN),
        ("Long-term goal setting", 3, 16, 130, True, GEN),
        ("Project plan", 4, 15, 114, False, GEN),
        ("Financial plan", 3, 13, 74, True, GEN),
        ("Travel plan", 5, 18, 123, True, GEN),
        ("Study plan", 4, 19, 154, True, GEN),
        ("Career development plan", 4, 16, 100, True, GEN),
        ("Habit-building plan", 4, 18, 115, False, GEN),
        ("Skill improvement plan", 4, 16, 112, True, GEN),
    ],
    "Exercise and Health": [
        ("Exercise plan", 5, 22, 260, True, GEN),
        ("Diet plan", 4, 21, 255, True, GEN),
        ("Sleep plan", 6, 32, 262, True, GEN),
        ("Mental health support", 1, 6, 4, False, GEN),
    ],
    "Transportation": [
        ("Commute route planning", 5, 21, 236, False, API),
        ("Taxi / ride-hailing travel", 2, 6, 8, False, API),
        ("Travel and sightseeing route planning", 4, 19, 215, False, API),
        ("Parking", 3, 10, 59, False, API),
    ],
    "Medical Services": [
        ("Appointment registration", 4, 15, 210, False, API),
        ("Medicine selection", 4, 17, 231, False, API),
        ("Online medical consultation", 3, 14, 83, False, GEN),
    ],
    "Leisure Activities": [
        ("Audio-visual entertainment", 4, 24, 229, True, API),
        ("Outdoor leisure", 2, 5, 6, False, API),
        ("Social assistance", 3, 14, 98, True, GEN),
    ],
    "Information Management": [
        ("Research report writing", 4, 18, 174, True, GEN),
        ("Timeline organization", 3, 10, 41, True, GEN),
        ("Meeting minutes organization", 3, 13, 60, True, GEN),
        ("Reading notes", 2, 9, 16, True, GEN),
        ("Folder organization", 5, 19, 191, False, GEN),
        ("Tool usage", 9, 34, 182, True, GEN),
    ],
}

# Table 2, scale columns: domain -> (S, D, P = truncated mean values per scenario, I).
TABLE2 = {
    "Writing and Design": (16, 55, 10, 750),
    "Work": (12, 53, 17, 1155),
    "Daily Consumption": (8, 39, 15, 1086),
    "Planning": (10, 39, 16, 1151),
    "Exercise and Health": (4, 16, 20, 781),
    "Transportation": (4, 14, 14, 518),
    "Medical Services": (3, 11, 15, 524),
    "Leisure Activities": (3, 9, 14, 333),
    "Information Management": (6, 26, 17, 664),
}

ROWS = [(domain, *row) for domain, rows in TABLE13.items() for row in rows]


@lru_cache(maxsize=1)
def _raw() -> dict:
    return yaml.safe_load(Path(DEFAULT_PATH).read_text(encoding="utf-8"))


def raw_copy() -> dict:
    return copy.deepcopy(_raw())


def locate(data: dict, name: str) -> tuple[int, int, dict]:
    for di, d in enumerate(data["domains"]):
        for si, s in enumerate(d["scenarios"]):
            if s["name"] == name:
                return di, si, s
    raise KeyError(name)


def parse_error(data: dict) -> InputError:
    with pytest.raises(InputError) as info:
        parse_taxonomy(data, Path(DEFAULT_PATH))
    return info.value


# --- the taxonomy against Tables 13 and 2 ------------------------------------------------


def test_domains_scenarios_and_action_types():
    tax = load_taxonomy()
    assert tax.domains == list(TABLE13)
    assert [s.name for s in tax.scenarios] == [r[1] for r in ROWS]
    kinds = Counter(s.action_type for s in tax.scenarios)
    assert kinds == {GEN: 50, API: 16}
    assert sum(len(s.dimensions) for s in tax.scenarios) == 262
    assert sum(s.instances for s in tax.scenarios) == 6962


@pytest.mark.parametrize("domain,name,d,p,i,dynamic,action", ROWS, ids=[r[1] for r in ROWS])
def test_scenario_matches_table13(domain, name, d, p, i, dynamic, action):
    s = load_taxonomy().scenario(name)
    assert (s.domain, s.action_type, s.dynamic, s.instances) == (domain, action, dynamic, i)
    assert len(s.dimensions) == d
    assert s.n_preference_values == s.n_values + s.n_shifts == p
    assert all(len(dim.values) >= 2 for dim in s.dimensions)
    if dynamic:
        assert s.n_shifts >= 1
    else:
        assert s.n_shifts == 0


def test_domain_stats_match_table2():
    stats = load_taxonomy().domain_stats()
    assert {k: (v.scenarios, v.dimensions, v.mean_values, v.instances) for k, v in stats.items()} == TABLE2


def test_values_are_complete_and_distinct():
    texts: Counter[str] = Counter()
    for s in load_taxonomy().scenarios:
        for dim in s.dimensions:
            assert len({v.checkpoint for v in dim.values}) == len(dim.values), (s.name, dim.id)
            assert len({v.label for v in dim.values}) == len(dim.values), (s.name, dim.id)
            normalized = [re.sub(r"[\s\-]+", "_", v.lower()) for v in dim.value_ids]
            assert len(set(normalized)) == len(normalized), (s.name, dim.id)
            for v in dim.values:
                assert v.label and v.checkpoint, (s.name, dim.id, v.id)
                assert set(v.evidence) <= set(EVIDENCE_KINDS)
                assert len(v.evidence) >= 2, (s.name, dim.id, v.id)  # more than one way to reveal it
                assert "behaviour" in v.evidence, (s.name, dim.id, v.id)  # implicit evidence first
                texts.update(t for ts in v.evidence.values() for t in ts)
    assert [t for t, n in texts.items() if n > 1] == []


def test_every_task_template_fills_from_every_case():
    for s in load_taxonomy().scenarios:
        assert s.tasks and s.cases
        for task in s.tasks:
            fields = {f for _, f, _, _ in string.Formatter().parse(task) if f}
            for case in s.cases:
                assert fields <= set(case), (s.name, task)
                task.format(**case)


def test_call_api_slots_map_to_dimensions():
    for s in load_taxonomy().scenarios:
        if s.action_type == GEN:
            assert s.api is None
            continue
        api = s.api
        assert api is not None and api.fixed_slots and api.personal_slots, s.name
        names = [slot.name for slot in api.slots]
        assert len(set(names)) == len(names)
        dims = [slot.dimension for slot in api.personal_slots]
        assert sorted(dims) == sorted(d.id for d in s.dimensions), s.name  # one slot per dimension
        for slot in api.personal_slots:
            assert list(slot.values) == s.dimension(slot.dimension).value_ids
        for slot in api.fixed_slots:
            assert all(slot.from_task in case for case in s.cases), (s.name, slot.name)
            assert slot.dimension is None


def test_first_slice_scenarios_stay_compatible():
    tax = load_taxonomy()
    keep = {
        "Academic paper writing": {"citation_density": ["dense", "sparse"], "voice": ["we", "impersonal"],
                                   "length": ["concise", "detailed"], "contributions": ["bulleted", "prose"]},
        "Weekly plan": {"granularity": ["hourly", "daily_blocks"], "format": ["table", "bullets"],
                        "breaks": ["buffered", "packed"], "weekend": ["weekend_free", "weekend_used"]},
        "Food ordering": {"spice_level": ["mild", "medium", "hot"], "handoff": ["leave_at_door", "hand_to_me"],
                          "cutlery": ["include", "none"]},
        "Ticket booking": {"seat_class": ["standard", "first"], "seat_position": ["window", "aisle"],
                           "departure_window": ["early_morning", "midday", "evening"],
                           "fare_type": ["flexible", "saver"]},
        "Appointment registration": {"visit_mode": ["in_person", "video"],
                                     "time_of_day": ["morning", "afternoon", "evening"],
                                     "doctor_choice": ["usual_doctor", "earliest_available"],
                                     "reminder": ["sms", "email", "phone_call"]},
    }
    for name, dims in keep.items():
        s = tax.scenario(name)
        assert [d.id for d in s.dimensions][:len(dims)] == list(dims)
        for dim_id, values in dims.items():
            assert s.dimension(dim_id).value_ids[:len(values)] == values  # extended only at the end
    assert ("impersonal", "we") in tax.scenario("Academic paper writing").dimension("voice").shifts
    assert ("hot", "mild") in tax.scenario("Food ordering").dimension("spice_level").shifts
    assert tax.scenario("Ticket booking").api.name == "book_train_ticket"
    assert tax.scenario("Appointment registration").dimension("reminder").value_ids == ["sms", "email", "phone_call"]


# --- validation -------------------------------------------------------------------------


def test_duplicate_scenario_names_are_refused():
    data = raw_copy()
    data["domains"][3]["scenarios"].append(copy.deepcopy(locate(data, "Food ordering")[2]))
    err = parse_error(data)
    assert err.field == "name" and "duplicate scenario name" in str(err)
    assert "'Food ordering'" in str(err) and "domains[2].scenarios[0]" in str(err)  # names the first one
    assert f"domains[3].scenarios[{len(data['domains'][3]['scenarios']) - 1}]" in str(err)
    assert str(DEFAULT_PATH) in str(err)


def test_a_dimension_needs_two_values():
    data = raw_copy()
    di, si, raw = locate(data, "Novel writing")
    raw["dimensions"][1]["values"] = raw["dimensions"][1]["values"][:1]
    err = parse_error(data)
    assert err.field == "values" and "at least two" in str(err)
    assert f"domains[{di}].scenarios[{si}] (scenario 'Novel writing').dimensions[1] (dimension 'narrative_order')" \
        in str(err)


def test_an_api_slot_must_name_a_known_dimension():
    data = raw_copy()
    di, si, raw = locate(data, "Parking")
    slot = next(s for s in raw["api"]["slots"] if s.get("dimension") == "rate_type")
    slot["dimension"] = "rate_kind"
    err = parse_error(data)
    assert err.field == "dimension" and "unknown dimension 'rate_kind'" in str(err)
    assert "(scenario 'Parking').api.slots[" in str(err) and "(slot 'rate_type')" in str(err)


def test_each_dimension_has_exactly_one_slot():
    data = raw_copy()
    _, _, raw = locate(data, "Parking")
    raw["api"]["slots"].append({"name": "rate_again", "type": "enum", "dimension": "rate_type"})
    assert "already has slot 'rate_type'" in str(parse_error(data))
    data = raw_copy()
    _, _, raw = locate(data, "Parking")
    raw["api"]["slots"] = [s for s in raw["api"]["slots"] if s.get("dimension") != "rate_type"]
    err = parse_error(data)
    assert err.field == "slots" and "missing ['rate_type']" in str(err)


def test_a_shift_must_name_known_values():
    data = raw_copy()
    di, si, raw = locate(data, "Diary writing")
    raw["dimensions"][1]["shifts"] = [["template", "bullet_journal"]]
    err = parse_error(data)
    assert err.field == "shifts" and "shift ['template', 'bullet_journal']" in str(err)
    assert f"domains[{di}].scenarios[{si}] (scenario 'Diary writing').dimensions[1] (dimension 'structure')" in str(err)


def test_shifts_belong_to_dynamic_scenarios_and_dynamic_ones_have_some():
    data = raw_copy()
    _, _, raw = locate(data, "Novel writing")
    raw["dimensions"][0]["shifts"] = [["first_person", "third_person"]]
    assert "not dynamic" in str(parse_error(data))
    data = raw_copy()
    _, _, raw = locate(data, "Reading notes")
    for d in raw["dimensions"]:
        d.pop("shifts", None)
    err = parse_error(data)
    assert err.field == "dynamic" and "(scenario 'Reading notes')" in str(err)


@pytest.mark.parametrize("mutate,field,message", [
    (lambda s: s["dimensions"].append(copy.deepcopy(s["dimensions"][0])), "dimensions", "repeated"),
    (lambda s: s["dimensions"][0]["values"][1].update(id=False), "id", "must be a string"),
    (lambda s: s.update(instances=0), "instances", "positive integer"),
    (lambda s: s.update(instances="many"), "instances", "positive integer"),
    (lambda s: s["tasks"].append("Do it for {someone}."), "tasks", "someone"),
    (lambda s: s["dimensions"][0]["values"][0]["evidence"].update(gossip=["x"]), "evidence", "gossip"),
    (lambda s: s["dimensions"][0]["values"][0]["evidence"].update(behaviour="one sentence"), "evidence", "list"),
    (lambda s: s.update(api={"name": "x", "slots": []}), "api", "only call_api"),
    (lambda s: s.update(dynamic="yes please"), "dynamic", "true or false"),
])
def test_other_malformed_entries_name_scenario_and_field(mutate, field, message):
    data = raw_copy()
    _, _, raw = locate(data, "Blog post writing")
    mutate(raw)
    err = parse_error(data)
    assert err.field == field and message in str(err) and "(scenario 'Blog post writing')" in str(err)


def test_instances_stays_optional_for_other_files():
    data = raw_copy()
    for d in data["domains"]:
        for s in d["scenarios"]:
            s.pop("instances")
    tax = parse_taxonomy(data, Path("custom.yaml"))
    assert len(tax.scenarios) == 66 and all(s.instances is None for s in tax.scenarios)
    assert tax.domain_stats()["Work"].instances == 0
