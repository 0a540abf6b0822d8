"""The FC variant: the controller LLM picks the next tool by function calling until it calls the
final output head or runs out of steps. Whatever the model does, the loop ends with a final output:
a reply without tool calls, or the step limit, is taken as a request for the final answer."""
from __future__ import annotations

from typing import Any, Awaitable, Callable

from perseval.benchmarks.iba.agents.iba_agent import alignment, prompts
from perseval.benchmarks.iba.agents.iba_agent import deep_retrieval as dr
from perseval.agents.tool_calls import assistant_turn, normalise_calls, parse_arguments
from perseval.benchmarks.iba.agents.iba_agent.state import State
from perseval.llm.usage import prompt_record, trace_fields

FINAL = "final_answer"


def _tool(name: str, description: str, properties: dict[str, Any] | None = None) -> dict[str, Any]:
    params = {"type": "object", "properties": properties or {}, "required": []}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


TOOL_SPECS: dict[str, dict[str, Any]] = {
    "retrieve_history": _tool("retrieve_history", "Search the user's past conversations (default query: the task).",
                              {"query": {"type": "string", "description": "what to search for"}}),
    "expand_queries": _tool("expand_queries", "Write facet queries (style, structure, decision, correction, "
                                              "habit) for the task and search the history with each."),
    "rerank": _tool("rerank", "Drop duplicate passages and keep only those that clearly reveal preferences."),
    "extract_preferences": _tool("extract_preferences", "Infer the user's task-relevant preferences from the "
                                                        "evidence gathered so far."),
    "plan_alignment": _tool("plan_alignment", "Plan how the preferences should shape the output."),
    FINAL: _tool(FINAL, "Produce the final output for the task and stop."),
}


def tool_names(state: State) -> list[str]:
    """The tools offered: the ablation switches remove the tools of a disabled module."""
    s = state.settings
    names = ["retrieve_history"]
    if s.deep_retrieval:
        names += ["expand_queries", "rerank"] if s.rerank else ["expand_queries"]
    if s.broad_thinking and s.synthesis == "trajectory":
        names += ["extract_preferences", "plan_alignment"]
    return names + [FINAL]



# --- tools: each returns a short summary for the controller's context ------------------------------


async def _retrieve_history(state: State, args: dict[str, Any]) -> str:
    query = str(args.get("query") or state.instance.query)
    found = await dr.retrieve(state, query, state.settings.top_k)
    return f"{len(found)} passages: " + " | ".join(p.text[:80].replace("\n", " ") for p in found)


async def _expand_queries(state: State, args: dict[str, Any]) -> str:
    queries = await dr.expand_queries(state)
    await dr.retrieve_expanded(state)
    return f"searched {len(queries)} queries: " + "; ".join(queries)


async def _rerank(state: State, args: dict[str, Any]) -> str:
    kept = await dr.refine(state)
    return f"{len(kept)} passages kept"


async def _extract(state: State, args: dict[str, Any]) -> str:
    prefs = await alignment.extract_preferences(state)
    return "preferences: " + ("; ".join(prefs) if prefs else "none found")


async def _plan(state: State, args: dict[str, Any]) -> str:
    return "plan: " + (await alignment.plan_alignment(state))[:300]


TOOLS: dict[str, Callable[[State, dict[str, Any]], Awaitable[str]]] = {
    "retrieve_history": _retrieve_history, "expand_queries": _expand_queries, "rerank": _rerank,
    "extract_preferences": _extract, "plan_alignment": _plan,
}


# --- the loop --------------------------------------------------------------------------------------


async def _run_calls(state: State, calls: list[dict[str, Any]], offered: list[str],
                     messages: list[dict[str, Any]]) -> bool:
    """Execute one turn's tool calls in order; True when the final head was called."""
    for c in calls:
        if c["name"] == FINAL:
            return True
        args = parse_arguments(c["arguments"])
        tool = TOOLS.get(c["name"]) if c["name"] in offered else None
        result = await tool(state, args) if tool else f"unknown tool {c['name']!r}; use one of {offered}"
        state.log("tool", name=c["name"], arguments=args, result=result[:500])
        messages.append({"role": "tool", "tool_call_id": c["id"], "content": result[:500]})
    return False


async def run_fc(state: State) -> None:
    offered = tool_names(state)
    specs = [TOOL_SPECS[n] for n in offered]
    messages: list[dict[str, Any]] = prompts.controller_messages(state.instance.query, state.instance.payload,
                                                                 offered)
    reason = "max_steps"
    for turn in range(state.settings.max_steps):
        result = await state.ask("controller", messages, tools=specs,
                                 max_tokens=state.settings.controller_max_tokens)
        calls = normalise_calls(result.tool_calls, turn)
        state.log("controller", turn=turn, text=result.text[:500],
                  tool_calls=[{"name": c["name"], "arguments": c["arguments"]} for c in calls], **trace_fields(result),
                  **prompt_record(messages))
        if not calls:  # a plain reply: the model is done gathering, so produce the output
            reason = "no_tool_call"
            break
        messages.append(assistant_turn(result.text, calls))
        if await _run_calls(state, calls, offered, messages):
            reason = "final_answer"
            break
    await final_head(state, reason)


async def final_head(state: State, reason: str) -> None:
    """The task-specific output head; with no evidence gathered yet it first searches with the task text."""
    if not state.retrievals:
        await dr.retrieve(state, state.instance.query, state.settings.top_k, step="retrieve_auto")
    state.log("final_head", reason=reason)
    await alignment.synthesize(state)
