"""Convert a public, dialogue-act-annotated chat corpus into an IBA-layout release (docs/iba-release-layout.md).

    python scripts/chat_corpus_to_iba_release.py DIALOGUES.json OUT_DIR [--users 30] [--turns 30] [--seed 7]

Measures IBA-Agent on text that was not written for perseval (scripts/measure_iba_evidence_context.py
--source OUT_DIR). The input is a JSON list of conversations in the "formatted dialogue acts" shape used by
crowd-sourced movie-recommendation corpora (ReDial / IARD as annotated for user simulation):

    [{"conversation_id": "474", "conversation": [
        {"participant": "USER" | "AGENT", "utterance": "...",
         "dialogue_acts": [{"intent": "PRO", "slot_values": [["GENRE", "thrillers", ...], ...]}, ...]}, ...]}]

One user per conversation that states a genre. History turns are the user's messages, each with the reply
that follows it; a user turn whose acts carry a slot value under a preference intent is an evidence turn
(statement: IQU, PRO, CRI-A, CRI-C; rejection: REJ; correction: CRI-F), every other turn is noise. The
history is padded to `--turns` with preference-free user turns of other conversations (real chat text too:
greetings, "I have seen that one", thanks; none that voices a taste), on other days. The task names no genre: "Suggest a movie ...";
the one checkpoint is the first genre the user stated. Keep the output outside the repository: the corpus is
third-party data, not perseval's.
"""
from __future__ import annotations

import argparse
import json
import random
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

KINDS = {"IQU": "statement", "PRO": "statement", "CRI-A": "statement", "CRI-C": "statement",
         "REJ": "rejection", "CRI-F": "correction"}
QUERY = "Suggest a movie I could watch this weekend and tell me in two sentences why it suits me."
START = datetime(2025, 1, 6, 9, 0)
# a message with no annotated slot may still voice a taste ("I really like all types of horror films"): another
# user's taste must not become this user's noise
TASTE = re.compile(r"\b(like|love|enjoy|prefer|favou?rite|hate|fan|into|genre)", re.IGNORECASE)


def turns_of(conversation: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str]]:
    """(user utterance, the agent reply that follows it, or '') for every user message."""
    out = []
    for i, u in enumerate(conversation):
        if u.get("participant") != "USER":
            continue
        nxt = conversation[i + 1] if i + 1 < len(conversation) else None
        reply = nxt["utterance"] if nxt and nxt.get("participant") != "USER" else ""
        out.append((u, reply))
    return out


def evidence_of(utt: dict[str, Any]) -> list[dict[str, str]]:
    """The preference signals of one user message, from its dialogue acts."""
    found = []
    for act in utt.get("dialogue_acts") or []:
        kind = KINDS.get(act.get("intent", ""))
        if kind is None:
            continue
        for slot in act.get("slot_values") or []:
            found.append({"dimension": str(slot[0]).lower(), "value": str(slot[1]), "kind": kind})
    return found


def text(utt: dict[str, Any], reply: str) -> str:
    return f"User: {utt['utterance'].strip()}" + (f"\nAssistant: {reply.strip()}" if reply.strip() else "")


def noise_pool(dialogues: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(conversation id, turn text) of user messages that carry no slot value at all."""
    pool = []
    for d in dialogues:
        for utt, reply in turns_of(d["conversation"]):
            if not any(a.get("slot_values") for a in utt.get("dialogue_acts") or []) and len(utt["utterance"]) > 12 \
                    and not TASTE.search(utt["utterance"]):
                pool.append((d["conversation_id"], text(utt, reply)))
    return pool


def stamp(day: int, minute: int) -> str:
    return (START + timedelta(days=day, minutes=minute)).isoformat()


def convert(dialogues: list[dict[str, Any]], users: int, n_turns: int, seed: int) -> tuple[list[dict], list[dict]]:
    rng = random.Random(seed)
    pool = noise_pool(dialogues)
    instances, histories = [], []
    for d in dialogues:
        if len(instances) == users:
            break
        own = turns_of(d["conversation"])
        genres = [e for utt, _ in own for e in evidence_of(utt) if e["dimension"] == "genre" and e["kind"] == "statement"]
        if not genres:
            continue
        uid = f"u{d['conversation_id']}"
        noise = rng.sample([t for cid, t in pool if cid != d["conversation_id"]], max(0, n_turns - len(own)))
        days = sorted(rng.sample(range(60), len(noise) + 1))
        session_day = days.pop(rng.randrange(len(days)))  # the user's own conversation: one session, in order
        rows = [{"day": day, "minute": 0, "text": t, "evidence": None} for day, t in zip(days, noise)]
        rows += [{"day": session_day, "minute": 2 * k, "text": text(utt, reply), "evidence": evidence_of(utt) or None}
                 for k, (utt, reply) in enumerate(own)]
        rows.sort(key=lambda r: (r["day"], r["minute"]))
        for k, r in enumerate(rows):
            histories.append({"user_id": uid, "turn_id": f"{uid}-t{k:03d}", "timestamp": stamp(r["day"], r["minute"]),
                              "text": r["text"], "scenario": "Movie recommendation" if r["evidence"] else None,
                              "evidence": r["evidence"]})
        genre = genres[0]["value"]
        instances.append({
            "instance_id": f"iard-{d['conversation_id']}", "user_id": uid, "domain": "Leisure Activities",
            "scenario": "Movie recommendation", "action_type": "generate", "query": QUERY,
            "preferences": [{"dimension": "genre", "value": genre, "previous": None}],
            "checkpoints": [{"id": "genre", "dimension": "genre", "value": genre,
                             "statement": f"The suggested movie fits the user's stated taste for {genre}."}]})
    return instances, histories


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dialogues", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--users", type=int, default=30)
    ap.add_argument("--turns", type=int, default=30, help="history turns per user, noise included")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    instances, histories = convert(json.loads(args.dialogues.read_text(encoding="utf-8")), args.users, args.turns,
                                   args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("instances", instances), ("histories", histories)):
        with open(args.out / f"{name}.jsonl", "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    n_ev = sum(1 for h in histories if h["evidence"])
    print(f"{len(instances)} instances, {len(histories)} history turns ({n_ev} evidence turns) -> {args.out}")


if __name__ == "__main__":
    main()
