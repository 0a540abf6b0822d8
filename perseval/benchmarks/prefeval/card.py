"""PrefEval's card: what it reads, the turn it sends, how answers are read and judged (one page).

The final user turn: optionally retrieved exchanges (numbered), the question (a generation question ends
with the official word-limit request), optionally the reminder, and for classification the instruction
and the four options. The generation judge asks four binary questions, each in its own request, with the
response quoted as data. Wording of perseval's own: the official prompts are not copied. answers.py and
prompts.py import these texts; tests/test_cards.py compares them with what the agents send. How the
settings differ from the paper: docs/protocols/prefeval.md.
"""
from __future__ import annotations

from perseval.benchmarks.card import BenchmarkCard

CONTEXT_INTRO = "Some exchanges from our earlier conversations that may say what I prefer:"
EXCERPT_TEMPLATE = "{k}. {excerpt}"  # one retrieved exchange per line, numbered from 1
# The official generation scripts end the question with this, the agent's max_tokens as N.
WORD_LIMIT = "(Please respond within {n} words.)"
REMINDER = ("Before you answer, think back over our conversation and make sure your answer respects what "
            "I have told you I prefer.")
MCQ_INSTRUCTION = ("Here are four options for my request. Pick the one you recommend for me, as a single "
                   "letter (A, B, C or D), with no other text.")
OPTION_TEMPLATE = "{letter}. {text}"  # one line each, A to D
# The user turn joins the parts present with blank lines: CONTEXT_INTRO and the excerpts (one line each),
# the question (+ " " + WORD_LIMIT), REMINDER, MCQ_INSTRUCTION, the options.

JUDGE_SYSTEM_INTRO = "You check one property of an assistant's reply to a user."  # + the quoted-data rule
JUDGE_SYSTEM_OUTRO = "Reply with JSON only."
JUDGE_QUESTIONS = {
    "acknowledges": ("Does the response mention, or clearly assume, any preference, habit, restriction or "
                     "trait of the user (for example 'since you prefer ...', 'given your ...')? A generic "
                     "reference to 'our conversation' with no preference named does not count."),
    "hallucinates": ("The response mentions a preference of the user. Is the preference it mentions "
                     "DIFFERENT from, or unrelated to, the user's real preference given above? Answer true "
                     "if it states the wrong preference, false if it states the real one."),
    "violates": ("Does the response recommend or propose something that goes against the user's preference, "
                 "without acknowledging the preference and explaining how to avoid the conflict? Answer false "
                 "if it respects the preference or handles any conflicting option with care."),
    "helpful": ("Does the response actually try to answer the user's question with useful content, rather "
                "than refusing, dodging, or only asking something back?"),
}
JUDGE_PREFERENCE = "The user's real preference:\n{preference}"  # only for hallucinates and violates
JUDGE_QUESTION = "The user's question:\n{question}"
JUDGE_ANSWER_FORMAT = 'Answer {"verdict": true or false, "reason": "<one sentence>"}.'
# The judge's user turn: [preference,] question, the quoted response, the check's question, the format.

CARD = BenchmarkCard(
    name="prefeval",
    paper="Zhao et al., Do LLMs Recognize Your Preferences? Evaluating Personalized Preference Following "
    "in LLMs (PrefEval), ICLR 2025",
    data={"explicit_preference/<topic>.json, implicit_preference/...": "the preference (or the conversation "
          "revealing it) and the question, per topic (layout)",
          "mcq_options/<topic>.json": "the four options and the one that follows the preference",
          "filtered_inter_turns.json": "the unrelated turns inserted between preference and question"},
    prompts={"context intro": CONTEXT_INTRO, "excerpt": EXCERPT_TEMPLATE, "word limit": WORD_LIMIT,
             "reminder": REMINDER, "mcq instruction": MCQ_INSTRUCTION, "option": OPTION_TEMPLATE,
             "judge system": JUDGE_SYSTEM_INTRO,
             **{f"judge: {k}": v for k, v in JUDGE_QUESTIONS.items()}, "judge preference": JUDGE_PREFERENCE,
             "judge question": JUDGE_QUESTION, "judge answer format": JUDGE_ANSWER_FORMAT},
    answer="generation: the text (empty is invalid); classification: the JSON choice, else a <choice>X</choice> "
    "tag, else the one bare letter A-D; anything else is invalid",
    judges={"prefeval.generation": "benchmarks.prefeval.judges.generation",
            "prefeval.classification": "benchmarks.prefeval.judges.classification:ClassificationJudge"},
    metrics={"accuracy (generation)": "the four verdicts combined into the paper's error types (errors:classify)",
             "mcq_accuracy": "100 when the chosen option is the preference-following one"},
    controls={"swapped-history": "each question asked after another user's conversation"},
    analyses={"the paper's table per setting": "benchmarks.prefeval.analysis:paper_table",
              "error types": "benchmarks.prefeval.analysis:error_types"},
    agents={"prefeval.zero_shot": "benchmarks.prefeval.agents.zero_shot",
            "prefeval.rag": "benchmarks.prefeval.agents.rag", "prefeval.oracle": "benchmarks.prefeval.agents.oracle"},
    code={"user turn": "benchmarks.prefeval.answers:question_text",
          "judge request": "benchmarks.prefeval.prompts:check_messages",
          "choice reading": "benchmarks.prefeval.answers:read_choice",
          "error types": "benchmarks.prefeval.errors:classify"},
    protocol="docs/protocols/prefeval.md",
)
